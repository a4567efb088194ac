"""Rich tables of an eval report (the console output of `searchgrpo eval`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from searchgrpo.errors import printable

METRICS = (
    ("recall_at_k", "IMPORTANT recall@k"),
    ("important_discovery", "discovery rate"),
    ("ndcg_at_k", "nDCG@k"),
    ("reward_mean", "mean reward"),
)


def _plain(text: Any) -> Text:
    """Text from the data (a question, a checkpoint's name): shown as it is, never read as markup."""
    return Text(printable(text))


def _fmt(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None:
        return ""
    return f" [{_fmt(ci[0])}, {_fmt(ci[1])}]"


def eval_tables(path: str | Path, max_questions: int = 20) -> list[Table]:
    """The aggregate table (each metric with its 95% CI, and the paired difference against the
    baseline) and a per-question reward table."""
    report = json.loads(Path(path).read_text())
    names = [p["name"] for p in report["policies"]]
    agg, paired = report["aggregate"], report["paired"]
    title = (f"eval: {report['states']} states / {report['questions']} questions, top_k={report['top_k']}, "
             f"{'greedy' if report['decoding']['greedy'] else str(report['decoding']['num_samples']) + ' samples'}")
    table = Table(title=title)
    table.add_column("metric")
    for n in names:
        table.add_column(_plain(n), justify="right")
    for n in names:
        if n in paired:
            table.add_column(_plain(f"{n} - baseline"), justify="right")
    for key, label in METRICS:
        row = [label] + [_fmt(agg[n][key]) + _ci(agg[n]["ci"].get(key)) for n in names]
        for n in names:
            if n in paired:
                d = paired[n][key]
                row.append(f"{'+' if (d['diff'] or 0) >= 0 else ''}{_fmt(d['diff'])}{_ci(d['ci'])}")
        table.add_row(*row)
    for key, label in (("clues_mean", "clues per state"), ("docs_mean", "documents per state")):
        table.add_row(label, *[_fmt(agg[n][key], 2) for n in names], *["" for n in names if n in paired])

    per_q = Table(title=f"reward per question (first {max_questions} of {len(report['per_question'])})")
    per_q.add_column("question", overflow="ellipsis", max_width=60)
    for n in names:
        per_q.add_column(_plain(n), justify="right")
    for q in report["per_question"][:max_questions]:
        per_q.add_row(_plain(q["question"]), *[_fmt(q["reward"].get(n)) for n in names])
    return [table, per_q]
