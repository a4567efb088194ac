"""Paired difference between the fine-tuned policies of two eval reports of the same held-out set.

Each efficacy run compares its checkpoint with the baseline; this compares two runs' checkpoints
with each other, on the states (per-round reports) or questions (episode reports) both scored,
with a bootstrap 95% CI over questions:

    python benchmarks/compare_reports.py RUN_A/eval-hotpotqa.json RUN_B/eval-hotpotqa.json
    python benchmarks/compare_reports.py RUN_A/episodes-split.json RUN_B/episodes-split.json --metric recall_round_3
    python benchmarks/compare_reports.py RUN_A RUN_B [--json OUT]   # two efficacy runs: every headline figure

Per-round metrics are averaged over a question's states first (states with nothing to find are
left out), so every question weighs the same. Given two efficacy output folders (`efficacy.py
--out`, e.g. round credit against episode credit at the same seeds and steps), it pairs every
held-out set both evaluated (`eval-<set>.json`, `episodes-<set>.json`) and prints B - A for the
headline figures: recall at 10 and 5 documents, documents per state, evidence recall after each
round, full coverage, rounds to full evidence (mean, and the difference of the medians), and
checker documents per IMPORTANT found (pooled over the shared questions, its CI by resampling
them).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgrpo.evaluate.stats import mean_ci, paired_ratio_diff_ci

ROUND_METRICS = ("recall_at_10", "recall_at_5", "docs")
"""Per-sample keys of a per-round report (`docs`: the documents the clue set retrieved)."""


def _sample_value(sample: dict[str, Any], metric: str) -> Any:
    return len(sample["docs"]) if metric == "docs" else sample.get(metric)


def tuned_values(path: Path, metric: str, report: dict[str, Any] | None = None) -> tuple[str, dict[str, float]]:
    """(the report's fine-tuned policy, its per-question `metric`)."""
    report = report or json.loads(path.read_text())
    rows = report["per_state"] if report["mode"] == "rounds" else report["per_question"]
    policy = next(p for p in rows[0]["results"] if p != "baseline")
    values: dict[str, list[float]] = {}
    for row in rows:
        result = row["results"][policy]
        value = _sample_value(result["samples"][0], metric) if report["mode"] == "rounds" else result.get(metric)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            values.setdefault(row["question_id"], []).append(float(value))
    return policy, {q: float(np.mean(v)) for q, v in values.items()}


def paired(a: dict[str, float], b: dict[str, float]) -> dict[str, Any] | None:
    """B - A over the questions both have: mean difference, its CI, and the number of questions."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    diff = np.array([b[q] - a[q] for q in shared])
    lo, hi = mean_ci(diff)
    return {"diff": float(diff.mean()), "ci": [lo, hi], "questions": len(shared)}


def episode_figures(a: dict[str, Any], b: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The episode reports' paired figures (both reports already loaded)."""
    out: dict[str, dict[str, Any]] = {}
    rounds = min(a["rounds"], b["rounds"])
    keys = [f"recall_round_{r}" for r in range(1, rounds + 1)] + ["full_coverage", "rounds_to_full"]
    for key in keys:
        d = paired(tuned_values(Path(), key, a)[1], tuned_values(Path(), key, b)[1])
        if d:
            out[key] = d
    full_a, full_b = tuned_values(Path(), "rounds_to_full", a)[1], tuned_values(Path(), "rounds_to_full", b)[1]
    shared = sorted(set(full_a) & set(full_b))
    if shared:
        median_a = float(np.median([full_a[q] for q in shared]))
        median_b = float(np.median([full_b[q] for q in shared]))
        out["median_rounds_to_full"] = {"a": median_a, "b": median_b, "diff": median_b - median_a}
    per: list[dict[str, dict[str, float]]] = []
    for key in ("docs_checked", "important_found"):
        per.append({"a": tuned_values(Path(), key, a)[1], "b": tuned_values(Path(), key, b)[1]})
    qs = sorted(set(per[0]["a"]) & set(per[0]["b"]) & set(per[1]["a"]) & set(per[1]["b"]))
    if qs and sum(per[1]["a"][q] for q in qs) and sum(per[1]["b"][q] for q in qs):

        def col(i: int, side: str) -> list[float]:
            return [per[i][side][q] for q in qs]

        ratio_a = sum(col(0, "a")) / sum(col(1, "a"))
        ratio_b = sum(col(0, "b")) / sum(col(1, "b"))
        lo, hi = paired_ratio_diff_ci(col(0, "a"), col(1, "a"), col(0, "b"), col(1, "b"))
        out["checker_docs_per_important"] = {
            "a": ratio_a,
            "b": ratio_b,
            "diff": ratio_b - ratio_a,
            "ci": [lo, hi],
            "questions": len(qs),
        }
    return out


def compare_runs(run_a: Path, run_b: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Every held-out set both efficacy runs evaluated: {set: {figure: paired difference}}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for path_a in sorted(run_a.glob("eval-*.json")):
        stem = path_a.stem.removeprefix("eval-")
        path_b = run_b / path_a.name
        if not path_b.is_file():
            continue
        report_a, report_b = json.loads(path_a.read_text()), json.loads(path_b.read_text())
        figures: dict[str, dict[str, Any]] = {}
        for metric in ROUND_METRICS:
            d = paired(tuned_values(path_a, metric, report_a)[1], tuned_values(path_b, metric, report_b)[1])
            if d:
                figures[metric] = d
        episodes_a, episodes_b = run_a / f"episodes-{stem}.json", run_b / f"episodes-{stem}.json"
        if episodes_a.is_file() and episodes_b.is_file():
            figures.update(episode_figures(json.loads(episodes_a.read_text()), json.loads(episodes_b.read_text())))
        out[stem] = figures
    return out


def table(results: dict[str, dict[str, dict[str, Any]]], fmt: Callable[[float], str] = "{:+.3f}".format) -> str:
    """The figures as a Markdown table; a difference is bold when its CI excludes zero."""
    lines = ["| held-out set | figure | B - A (95% CI) | questions |", "| --- | --- | ---: | ---: |"]
    for stem, figures in results.items():
        for name, d in figures.items():
            diff = fmt(d["diff"])
            if "ci" in d:
                lo, hi = d["ci"]
                shown = f"**{diff}** [{fmt(lo)}, {fmt(hi)}]" if lo > 0 or hi < 0 else f"{diff} [{fmt(lo)}, {fmt(hi)}]"
            else:
                shown = f"{diff} ({d['a']:.2f} -> {d['b']:.2f})"
            lines.append(f"| {stem} | {name} | {shown} | {d.get('questions', '')} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path, help="a report, or an efficacy output folder")
    p.add_argument("b", type=Path, help="a report, or an efficacy output folder")
    p.add_argument("--metric", default="recall_at_10", help="a per-sample (rounds) or per-question (episodes) key")
    p.add_argument("--json", type=Path, help="two folders: also write every figure here")
    args = p.parse_args()
    if args.a.is_dir() and args.b.is_dir():
        results = compare_runs(args.a, args.b)
        if not results:
            raise SystemExit(f"{args.a} and {args.b} share no eval-<set>.json report")
        print(f"B = {args.b}, A = {args.a}")
        print(table(results))
        if args.json:
            args.json.write_text(json.dumps({"a": str(args.a), "b": str(args.b), "sets": results}, indent=1))
        return
    name_a, a = tuned_values(args.a, args.metric)
    name_b, b = tuned_values(args.b, args.metric)
    d = paired(a, b)
    if d is None:
        raise SystemExit("the two reports share no question with a value")
    lo, hi = d["ci"]
    print(
        f"{args.metric}: {name_b} ({args.b}) - {name_a} ({args.a}) = {d['diff']:+.3f} "
        f"[{lo:+.3f}, {hi:+.3f}] over {d['questions']} questions"
    )


if __name__ == "__main__":
    main()
