"""Reading an eval report (`searchgrpo-eval-v1` JSON) into the rows the eval pane shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASELINE = "baseline"
AGGREGATE_COLUMNS = (
    ("reward_mean", "reward"),
    ("important_discovery", "IMPORTANT found"),
    ("recall_at_k", "recall@k"),
    ("ndcg_at_k", "nDCG@k"),
    ("clues_mean", "clues"),
    ("docs_mean", "docs"),
)
PAIRED_METRICS = ("reward_mean", "important_discovery", "recall_at_k", "ndcg_at_k")


@dataclass(frozen=True)
class EvalReport:
    path: str
    policies: list[str]
    states: int
    top_k: int
    aggregate: dict[str, dict[str, Any]]
    paired: dict[str, dict[str, Any]]
    per_question: list[dict[str, Any]]


def load_report(path: str | Path) -> EvalReport:
    """Parse a report; raises ValueError when the file is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the eval report ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != "searchgrpo-eval-v1":
        raise ValueError(f"{path}: not a searchgrpo-eval-v1 report")
    return EvalReport(
        path=str(path),
        policies=[p["name"] for p in data.get("policies", [])],
        states=int(data.get("states", 0)),
        top_k=int(data.get("top_k", 0)),
        aggregate=data.get("aggregate", {}),
        paired=data.get("paired", {}),
        per_question=data.get("per_question", []),
    )


def fmt(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "–"


def with_ci(value: Any, ci: Any) -> str:
    """'0.412 [0.301, 0.520]', or just the value when there is no interval."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
        return f"{fmt(value)} [{fmt(ci[0])}, {fmt(ci[1])}]"
    return fmt(value)


def aggregate_rows(report: EvalReport) -> list[list[str]]:
    """One row per policy: name, then each aggregate metric (with its CI where given)."""
    rows = []
    for name in report.policies:
        agg = report.aggregate.get(name, {})
        ci = agg.get("ci", {})
        rows.append([name, *(with_ci(agg.get(key), ci.get(key)) for key, _ in AGGREGATE_COLUMNS)])
    return rows


def paired_rows(report: EvalReport) -> list[tuple[str, list[tuple[str, int]]]]:
    """Per non-baseline policy: (name, [(text, sign)]) with sign +1/-1 when the CI excludes 0."""
    rows = []
    for name, metrics in report.paired.items():
        cells = []
        for key in PAIRED_METRICS:
            m = metrics.get(key, {})
            diff, ci = m.get("diff"), m.get("ci")
            sign = 0
            if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
                sign = 1 if ci[0] > 0 else -1 if ci[1] < 0 else 0
            text = with_ci(diff, ci)
            cells.append((("+" if isinstance(diff, (int, float)) and diff > 0 else "") + text, sign))
        rows.append((name, cells))
    return rows


def question_rows(report: EvalReport) -> list[list[str]]:
    """Per question: id, question, states, each policy's reward, then the last policy's gain over
    the first (when there are two or more)."""
    rows = []
    for q in report.per_question:
        rewards = q.get("reward", {})
        cells = [str(q.get("question_id", "")), str(q.get("question", "")), str(q.get("states", ""))]
        cells += [fmt(rewards.get(p)) for p in report.policies]
        if len(report.policies) > 1:
            first, last = rewards.get(report.policies[0]), rewards.get(report.policies[-1])
            cells.append(f"{last - first:+.3f}" if isinstance(first, (int, float)) and isinstance(last, (int, float)) else "–")
        rows.append(cells)
    return rows
