"""Verdicts per second of two checker backends auditing the same (state, document) pairs.

    python benchmarks/audit_rate.py                          # llm (embedded llama.cpp server) vs base, 500 pairs
    python benchmarks/audit_rate.py --backends llm gold      # before the base backend exists: the harness itself

Each backend runs `searchgrpo audit-checker`'s job (`run_audit`) on the config's data (the demo
world by default) with the same `--pairs` and `--seed`, so both label the same pairs in the same
order (checked: the run stops if they differ), with the verdict cache off (`checker.cache=false`:
every verdict is computed). The rate is verdicts over the seconds spent inside the checker's
`check`, so neither a server's start nor a model's load counts. The report gives both rates,
their ratio (the goal of issue #22: the in-process `base` judge at least 3x the llama.cpp server's
on CPU with SmolLM2), each backend's agreement with gold, and how often the two backends give the
same label (they differ: the server runs a quantised GGUF). Results: benchmarks/results/audit_rate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.evaluate import agreement as ag  # noqa: E402
from searchgrpo.evaluate.audit_metrics import INDEX  # noqa: E402
from searchgrpo.evaluate.checker_audit import AuditRequest, run_audit  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402
from searchgrpo.terminal import audit_progress  # noqa: E402

GOAL = 3.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", nargs=2, default=["llm", "base"], metavar=("REFERENCE", "CANDIDATE"))
    p.add_argument("--pairs", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--questions", type=Path, help="audit on this question set instead of the config's data")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="config override (both backends)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "audit_rate")
    return p.parse_args()


def measure(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    cfg = load_config(ROOT / "config.yaml", [f"checker.backend={backend}", "checker.cache=false", *args.overrides])
    request = AuditRequest(
        questions=str(args.questions) if args.questions else None,
        pairs=args.pairs,
        seed=args.seed,
        output=str(args.out / f"audit-{backend}.json"),
        plot=False,
    )
    started = time.perf_counter()
    with audit_progress(Console(stderr=True)) as sink:
        path = run_audit(cfg, request, sink)
    report = json.loads(path.read_text())
    report["_wall_s"] = time.perf_counter() - started
    return report


def main() -> None:
    args = parse_args()
    quiet_libraries()
    args.out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    reports = {b: measure(b, args) for b in args.backends}
    ref, cand = (reports[b] for b in args.backends)
    keys = [[(p["question_id"], tuple(p["sub_goals"]), p["docid"]) for p in r["pairs"]] for r in (ref, cand)]
    if keys[0] != keys[1]:
        raise SystemExit("the two audits labelled different pairs; they must share the data, --pairs and --seed")
    same = ag.confusion_matrix(
        [INDEX_OF[p["verdict"]] for p in ref["pairs"]], [INDEX_OF[p["verdict"]] for p in cand["pairs"]], 3
    )
    rows = {}
    for b, r in reports.items():
        rows[b] = {
            "checker": r["checker"]["description"],
            "verdicts": r["speed"]["verdicts"],
            "check_seconds": r["speed"]["seconds"],
            "verdicts_per_second": r["speed"]["verdicts_per_second"],
            "seconds_per_verdict": r["speed"]["seconds_per_verdict"],
            "first_batch_seconds": r["speed"]["first_batch_seconds"],
            "wall_seconds_with_start_up": r["_wall_s"],
            "agreement_with_gold": r["three_label"]["accuracy"],
            "important_rate": r["important_vs_rest"]["judge_rate"],
            "counters": r["speed"]["checker_counters"],
        }
    ratio = rows[args.backends[1]]["verdicts_per_second"] / rows[args.backends[0]]["verdicts_per_second"]
    result = {
        "command": "python " + " ".join(sys.argv),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average_at_start": load},
        "pairs": args.pairs,
        "seed": args.seed,
        "backends": rows,
        "rate_ratio": {"candidate_over_reference": ratio, "candidate": args.backends[1], "reference": args.backends[0]},
        "goal": {"ratio_at_least": GOAL, "met": bool(ratio >= GOAL), "applies_to": "base over llm, CPU, SmolLM2"},
        "labels_identical_share": float(np.trace(same) / same.sum()),
        "labels_kappa": float(ag.cohen_kappa(same)),
    }
    out = args.out.with_suffix(".json")
    out.write_text(json.dumps(result, indent=2))
    for b, r in rows.items():
        print(
            f"{b:>9}: {r['verdicts_per_second']:8.2f} verdicts/s ({r['seconds_per_verdict'] * 1000:.1f} ms each, "
            f"{r['verdicts']} verdicts in {r['check_seconds']:.1f} s; {r['wall_seconds_with_start_up']:.1f} s with "
            f"start-up), agreement with gold {r['agreement_with_gold']['value']:.3f}, IMPORTANT rate "
            f"{r['important_rate']:.3f}"
        )
    print(
        f"{args.backends[1]} / {args.backends[0]}: {ratio:.2f}x the rate (goal for base / llm: >= {GOAL:g}x); "
        f"same label on {result['labels_identical_share']:.1%} of pairs (kappa {result['labels_kappa']:.3f})"
    )
    print(f"results: {out}")


INDEX_OF = {label.value: i for label, i in INDEX.items()}

if __name__ == "__main__":
    main()
