"""Paired difference between the fine-tuned policies of two eval reports of the same held-out set.

Each efficacy run compares its checkpoint with the baseline; this compares two runs' checkpoints
with each other, on the states (per-round reports) or questions (episode reports) both scored,
with a bootstrap 95% CI over questions:

    python benchmarks/compare_reports.py RUN_A/eval-hotpotqa.json RUN_B/eval-hotpotqa.json
    python benchmarks/compare_reports.py RUN_A/episodes-split.json RUN_B/episodes-split.json --metric recall_round_3

Per-round metrics are averaged over a question's states first (states with nothing to find are
left out), so every question weighs the same.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgrpo.evaluate.stats import mean_ci


def tuned_values(path: Path, metric: str) -> tuple[str, dict[str, float]]:
    """(the report's fine-tuned policy, its per-question `metric`)."""
    report = json.loads(path.read_text())
    rows = report["per_state"] if report["mode"] == "rounds" else report["per_question"]
    policy = next(p for p in rows[0]["results"] if p != "baseline")
    values: dict[str, list[float]] = {}
    for row in rows:
        result = row["results"][policy]
        value = result["samples"][0][metric] if report["mode"] == "rounds" else result[metric]
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            values.setdefault(row["question_id"], []).append(float(value))
    return policy, {q: float(np.mean(v)) for q, v in values.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--metric", default="recall_at_10", help="a per-sample (rounds) or per-question (episodes) key")
    args = p.parse_args()
    name_a, a = tuned_values(args.a, args.metric)
    name_b, b = tuned_values(args.b, args.metric)
    shared = sorted(set(a) & set(b))
    if not shared:
        raise SystemExit("the two reports share no question with a value")
    diff = np.array([b[q] - a[q] for q in shared])
    lo, hi = mean_ci(diff)
    print(
        f"{args.metric}: {name_b} ({args.b}) - {name_a} ({args.a}) = {diff.mean():+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}] over {len(shared)} questions"
    )


if __name__ == "__main__":
    main()
