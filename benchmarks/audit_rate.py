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

`--interleave` measures the two rates on a machine shared with other work: both checkers are open
at once and label the same batches of `BATCH` pairs (the audit's own batches), alternately, the
first backend first on even batches and second on odd ones, so that both see the same load over
time; it reports the rates, each backend's three-label agreement with gold and how often they agree
(benchmarks/results/audit_rate_interleaved.json). `--threads N` sets torch's threads (the `base`
judge's; the embedded server's are `checker.server_threads`).
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
    p.add_argument("--interleave", action="store_true", help="label the same batches alternately (a shared machine)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (the base judge's)")
    return p.parse_args()


def interleaved(args: argparse.Namespace) -> dict[str, Any]:
    """Both backends on the same batches of pairs, alternately (see the module docstring)."""
    from searchgrpo.evaluate.audit_pairs import load_audit_data, sample_pairs
    from searchgrpo.evaluate.checker_audit import BATCH
    from searchgrpo.world import make_checker, make_retriever

    cfgs = {
        b: load_config(ROOT / "config.yaml", [f"checker.backend={b}", "checker.cache=false", *args.overrides])
        for b in args.backends
    }
    first = cfgs[args.backends[0]]
    data = load_audit_data(first, str(args.questions) if args.questions else None)
    pairs = sample_pairs(data, make_retriever(first, data.dataset), args.pairs, args.seed)
    checkers = {b: make_checker(cfgs[b], data.dataset) for b in args.backends}
    spent = dict.fromkeys(args.backends, 0.0)
    labels: dict[str, list[str]] = {b: [] for b in args.backends}
    loads = [os.getloadavg()[0]]
    try:
        for n, start in enumerate(range(0, len(pairs), BATCH)):
            batch = [p.request for p in pairs[start : start + BATCH]]
            for b in args.backends if n % 2 == 0 else args.backends[::-1]:
                began = time.perf_counter()
                verdicts = checkers[b].check(batch)
                spent[b] += time.perf_counter() - began
                labels[b].extend(v.label.value for v in verdicts)
            loads.append(os.getloadavg()[0])
            print(
                f"  {start + len(batch)}/{len(pairs)} pairs: "
                + ", ".join(f"{b} {(start + len(batch)) / spent[b]:.2f}/s" for b in args.backends),
                file=sys.stderr,
                flush=True,
            )
    finally:
        for checker in checkers.values():
            checker.close()
    gold = [p.gold.value for p in pairs]
    rows = {
        b: {
            "verdicts": len(labels[b]),
            "check_seconds": spent[b],
            "verdicts_per_second": len(labels[b]) / spent[b],
            "seconds_per_verdict": spent[b] / len(labels[b]),
            "agreement_with_gold": sum(a == g for a, g in zip(labels[b], gold)) / len(gold),
            "important_rate": labels[b].count("IMPORTANT") / len(labels[b]),
        }
        for b in args.backends
    }
    ref, cand = args.backends
    ratio = rows[cand]["verdicts_per_second"] / rows[ref]["verdicts_per_second"]
    return {
        "command": "python " + " ".join(sys.argv),
        "mode": "interleaved",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "torch_threads": torch_threads()},
        "load_average_1min": {"min": min(loads), "max": max(loads), "mean": sum(loads) / len(loads)},
        "pairs": len(pairs),
        "seed": args.seed,
        "backends": rows,
        "rate_ratio": {"candidate_over_reference": ratio, "candidate": cand, "reference": ref},
        "goal": {"ratio_at_least": GOAL, "met": bool(ratio >= GOAL), "applies_to": "base over llm, CPU, SmolLM2"},
        "labels_identical_share": sum(a == b for a, b in zip(labels[ref], labels[cand])) / len(pairs),
    }


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


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
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.interleave:
        result = interleaved(args)
        out = args.out.with_name(args.out.name + "_interleaved.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        for b, r in result["backends"].items():
            print(
                f"{b:>9}: {r['verdicts_per_second']:8.2f} verdicts/s ({r['seconds_per_verdict'] * 1000:.1f} ms each), "
                f"agreement with gold {r['agreement_with_gold']:.3f}, IMPORTANT rate {r['important_rate']:.3f}"
            )
        ratio = result["rate_ratio"]["candidate_over_reference"]
        print(
            f"{args.backends[1]} / {args.backends[0]}: {ratio:.2f}x the rate (goal >= {GOAL:g}x); same label on "
            f"{result['labels_identical_share']:.1%} of pairs; load {result['load_average_1min']}\nresults: {out}"
        )
        return
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
