"""Reading an eval report back: the one reader behind `searchgrpo eval`'s tables, the console's
Eval tab and the efficacy benchmark.

`load_report` reads any report format (`searchgrpo-eval-v1`/`-v2` per round, `searchgrpo-episodes-v1`
per episode) into an `EvalReport`; the `*_rows` functions turn it into rows of plain strings with
the same metric names everywhere, and `eval_tables` into rich tables for the terminal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgrpo.errors import UserError, printable

BASELINE = "baseline"
FORMATS = {"searchgrpo-eval-v1": "rounds", "searchgrpo-eval-v2": "rounds", "searchgrpo-episodes-v1": "episodes"}

LABELS = {
    "recall_at_k": "recall@k (union)",
    "important_discovery": "IMPORTANT discovery",
    "ndcg_at_k": "nDCG@k",
    "reward_mean": "mean reward",
    "clues_mean": "clues / state",
    "docs_mean": "documents / state",
    "full_coverage": "fully covered",
    "median_rounds_to_full": "median rounds to full evidence",
    "checker_docs_per_important": "checker docs / IMPORTANT",
    "docs_checked": "checker docs / question",
    "search_rounds": "SEARCH rounds / question",
    "clues_per_search": "clues / SEARCH round",
}
"""How each metric is named wherever a report is shown (`label` adds recall@B and round curves)."""


def label(key: str) -> str:
    if key.startswith("recall_at_") and key[10:].isdigit():
        return f"recall@{key[10:]} docs"
    if key.startswith("recall_round_"):
        return f"evidence recall, round {key[13:]}"
    return LABELS.get(key, key)


@dataclass(frozen=True)
class EvalReport:
    path: str
    mode: str
    """rounds | episodes"""
    policies: list[str]
    headline: str
    """The metric the report leads with (recall at the largest budget; episodes: recall after round 3)."""
    metrics: list[str]
    """The aggregate metrics, in display order (the headline first)."""
    top_k: int
    units: int
    """States (rounds) or questions (episodes)."""
    questions: int
    aggregate: dict[str, dict[str, Any]]
    paired: dict[str, dict[str, Any]]
    per_question: list[dict[str, Any]]
    clue_checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    curve: dict[str, list[float | None]] = field(default_factory=dict)
    """Episodes: each policy's evidence recall after rounds 1..N."""
    greedy: bool = True
    rounds: int = 0
    """Episodes: rounds per episode (rounds to full evidence is censored at rounds + 1)."""


def load_report(path: str | Path) -> EvalReport:
    """Parse a report; one clear line (UserError) when the file is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the eval report ({exc})") from None
    name = data.get("format") if isinstance(data, dict) else None
    mode = FORMATS.get(name) if isinstance(name, str) else None
    if mode is None:
        raise UserError(
            f"{path}: not a searchgrpo eval report (format {data.get('format') if isinstance(data, dict) else None!r})"
        )
    policies = [p["name"] for p in data.get("policies", [])]
    if mode == "episodes":
        rounds = int(data.get("rounds", 0))
        curve_keys = [f"recall_round_{r}" for r in range(1, rounds + 1)]
        headline = data.get("headline") or curve_keys[-1]
        metrics = [
            headline,
            *(k for k in (curve_keys[0], curve_keys[-1]) if k != headline),
            "full_coverage",
            "median_rounds_to_full",
            "checker_docs_per_important",
            "docs_checked",
            "search_rounds",
            "clues_per_search",
        ]
        units = int(data.get("questions", 0))
    else:
        budgets = data.get("budgets", [])
        headline = data.get("headline") or "recall_at_k"
        metrics = [
            headline,
            *(f"recall_at_{b}" for b in budgets if f"recall_at_{b}" != headline),
            "recall_at_k",
            "important_discovery",
            "ndcg_at_k",
            "reward_mean",
            "clues_mean",
            "docs_mean",
        ]
        units = int(data.get("states", 0))
    decoding = data.get("decoding", {})
    return EvalReport(
        path=str(path),
        mode=mode,
        policies=policies,
        headline=headline,
        metrics=list(dict.fromkeys(metrics)),
        top_k=int(data.get("top_k", 0)),
        units=units,
        questions=int(data.get("questions", 0)),
        aggregate=data.get("aggregate", {}),
        paired=data.get("paired", {}),
        per_question=data.get("per_question", []),
        clue_checks=data.get("clue_checks", {}),
        curve=data.get("curve", {}),
        greedy=bool(decoding.get("greedy", True)),
        rounds=int(data.get("rounds", 0) or 0),
    )


# --------------------------------------------------------------------------- rows


def fmt(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "–"


def _ci_ok(ci: Any) -> bool:
    return isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci)


def with_ci(value: Any, ci: Any, signed: bool = False) -> str:
    """'0.412 [0.301, 0.520]' (signed: '+0.112 [+0.020, +0.190]'), or the value alone."""
    spec = "+.3f" if signed else ".3f"
    text = f"{value:{spec}}" if isinstance(value, (int, float)) else "–"
    return f"{text} [{ci[0]:{spec}}, {ci[1]:{spec}}]" if _ci_ok(ci) else text


def censored(value: Any, rounds: int) -> str | None:
    """A median of rounds to full evidence past the last round played: '>N' (the questions not
    fully covered count as rounds + 1, so 7.000 after 6 rounds means "not within 6"), else None.

    >>> censored(7.0, 6), censored(6.5, 6), censored(4.0, 6), censored(None, 6)
    ('>6', '>6', None, None)
    """
    if rounds and isinstance(value, (int, float)) and value > rounds:
        return f">{rounds}"
    return None


def aggregate_rows(report: EvalReport) -> list[list[str]]:
    """One row per metric: its label, then each policy's value with its 95% CI (a censored median
    of rounds to full evidence as '>N')."""
    rows = []
    for key in report.metrics:
        row = [label(key)]
        for name in report.policies:
            agg = report.aggregate.get(name, {})
            value = agg.get(key)
            beyond = censored(value, report.rounds) if key == "median_rounds_to_full" else None
            row.append(beyond or with_ci(value, agg.get("ci", {}).get(key)))
        rows.append(row)
    return rows


def paired_rows(report: EvalReport) -> list[tuple[str, list[tuple[str, int]]]]:
    """Per metric: (label, [(difference with CI, sign)] per non-baseline policy); sign is +1 / -1
    when the CI lies above / below 0, else 0."""
    names = [n for n in report.policies if n in report.paired]
    rows = []
    for key in report.metrics:
        cells = []
        for name in names:
            m = report.paired[name].get(key, {})
            diff, ci = m.get("diff"), m.get("ci")
            sign = (1 if ci[0] > 0 else -1 if ci[1] < 0 else 0) if _ci_ok(ci) else 0
            cells.append((with_ci(diff, ci, signed=True), sign))
        rows.append((label(key), cells))
    return rows


def question_rows(report: EvalReport, limit: int | None = None) -> list[list[str]]:
    """Per question: id, question, then each policy's headline value, and the last policy's gain
    over the first when there are two or more."""
    rows = []
    for q in report.per_question[:limit]:
        if report.mode == "episodes":
            values = {n: q.get("results", {}).get(n, {}).get(report.headline) for n in report.policies}
        else:
            values = q.get(report.headline) or q.get("reward", {})
        cells = [str(q.get("question_id", "")), str(q.get("question", ""))]
        cells += [fmt(values.get(p)) for p in report.policies]
        if len(report.policies) > 1:
            first, last = values.get(report.policies[0]), values.get(report.policies[-1])
            if isinstance(first, (int, float)) and isinstance(last, (int, float)):
                cells.append(f"{last - first:+.3f}")
            else:
                cells.append("–")
        rows.append(cells)
    return rows


def curve_rows(report: EvalReport) -> list[list[str]]:
    """Episodes: per round, each policy's mean evidence recall after it."""
    n = max((len(c) for c in report.curve.values()), default=0)
    return [[str(r + 1), *(fmt(report.curve.get(p, [None] * n)[r]) for p in report.policies)] for r in range(n)]


CLUE_COLUMNS = (
    ("clues_per_set", "clues / set"),
    ("top_prefix_share", "top prefix share"),
    ("top_template_share", "top template share"),
    ("cut_clue_share", "cut at token limit"),
    ("redundant_clues_per_set", "redundant clues / set"),
    ("zero_marginal_clue_share", "clues adding nothing"),
    ("invented_number_share", "invented numbers"),
    ("table_copy_share", "copied table rows"),
    ("goal_copy_share", "copied sub-goal wording"),
    ("most_common_token_share", "top token share"),
    ("question_copies_per_set", "question copies / set"),
)


def clue_rows(report: EvalReport) -> list[list[str]]:
    """Per policy: the clue-text checks (`evaluate.clue_stats`), with the top prefix itself."""
    rows = []
    for name in report.policies:
        c = report.clue_checks.get(name)
        if not c:
            continue
        cells = [name, *(fmt(c.get(key), 2) for key, _ in CLUE_COLUMNS), repr(c.get("top_prefix", ""))]
        rows.append(cells)
    return rows


def eval_tables(path: str | Path, max_questions: int = 20) -> list[Any]:
    """The report as rich tables: aggregate metrics with 95% CIs, paired differences against the
    baseline, the per-round curve (episodes), the clue checks, and the first questions. Text from
    the report (questions, policy names, clues) is shown as it is, never read as markup."""
    from rich.table import Table
    from rich.text import Text as RichText

    def Text(value: object) -> RichText:
        return RichText(printable(value))

    report = load_report(path)
    unit = "questions (episodes)" if report.mode == "episodes" else "states"
    decoding = "greedy" if report.greedy else "sampled"
    table = Table(
        title=f"eval: {report.units} {unit} / {report.questions} questions, top_k={report.top_k}, "
        f"{decoding}; headline: {label(report.headline)}"
    )
    table.add_column("metric", no_wrap=True)
    for n in report.policies:
        table.add_column(Text(n), justify="right")
    paired = {lab: cells for lab, cells in paired_rows(report)}
    names = [n for n in report.policies if n in report.paired]
    for n in names:
        table.add_column(Text(f"{n} − baseline"), justify="right")
    for row in aggregate_rows(report):
        diffs = [text for text, _ in paired.get(row[0], [])]
        table.add_row(*map(Text, [*row, *diffs]))
    tables: list[Any] = [table]
    if report.curve:
        curve = Table(title="evidence recall after each round")
        curve.add_column("round", justify="right")
        for n in report.policies:
            curve.add_column(Text(n), justify="right")
        for row in curve_rows(report):
            curve.add_row(*map(Text, row))
        tables.append(curve)
    if report.clue_checks:
        clues = Table(title="clue text checks (shares of clue sets / clues)")
        for col in ("policy", *(lab for _, lab in CLUE_COLUMNS), "top prefix"):
            clues.add_column(col, justify="left" if col in ("policy", "top prefix") else "right")
        for row in clue_rows(report):
            clues.add_row(*map(Text, row))
        tables.append(clues)
    per_q = Table(title=f"{label(report.headline)} per question (first {max_questions} of {len(report.per_question)})")
    per_q.add_column("id", no_wrap=True)
    per_q.add_column("question", overflow="ellipsis", max_width=60)
    for n in report.policies:
        per_q.add_column(Text(n), justify="right")
    if len(report.policies) > 1:
        per_q.add_column("last − first", justify="right")
    for row in question_rows(report, max_questions):
        per_q.add_row(*map(Text, row))
    tables.append(per_q)
    return tables
