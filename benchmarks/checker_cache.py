"""How much of a GRPO step the LLM checker costs, and how often its verdict cache answers.

    python benchmarks/checker_cache.py [--questions 12] [--epochs 2] [--set key=value ...]

Collects the first N questions of a shared question set, then trains SmolLM2 for E epochs with
`checker.backend=llm` on the embedded llama.cpp server (a fresh verdict cache), and reports, per
epoch: checker calls, cache hits and hit rate, mean call latency, and the checker's share of the
step time. Later epochs revisit the same states, so their verdicts come from the cache.
Writes benchmarks/results/checker_cache.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.episodes.collect import collect_to_folder  # noqa: E402
from searchgrpo.events import StepFinished  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402
from searchgrpo.train.trainer import Trainer  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions-file", type=Path, default=SHARED / "2wikimultihopqa.jsonl")
    p.add_argument("--questions", type=int, default=12, help="questions collected (first N)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "checker_cache.json")
    p.add_argument("--set", dest="overrides", action="append", default=[])
    args = p.parse_args()
    quiet_libraries()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = load_config(ROOT / "config.yaml", ["data.eval_fraction=0", "grpo.max_new_tokens=32"])
        collected = collect_to_folder(base, str(args.questions_file), work / "data", limit=args.questions)
        cfg = load_config(
            ROOT / "config.yaml",
            [
                f"data.traces={collected.traces}",
                f"data.corpus={collected.corpus}",
                "data.eval_fraction=0",
                "checker.backend=llm",
                f"checker.cache_path={work / 'verdicts.sqlite'}",
                f"train.epochs={args.epochs}",
                "train.eval_every=0",
                "train.save_every=0",
                f"train.output_dir={work / 'runs'}",
                "grpo.max_new_tokens=32",
                *args.overrides,
            ],
        )
        steps: list[StepFinished] = []

        def on_event(event: object) -> None:
            if isinstance(event, StepFinished):
                steps.append(event)
                m = event.metrics
                print(
                    f"epoch {event.epoch} step {event.step}/{event.total_steps}: checker calls "
                    f"{m['checker/calls']:.0f}, cache hits {m['checker/cache_hits']:.0f}, checker "
                    f"{m['checker/time_s']:.1f} s of {m['time/step']:.1f} s",
                    flush=True,
                )

        trainer = Trainer(cfg, sink=on_event)
        trainer.train()
    per_epoch = {}
    for epoch in sorted({s.epoch for s in steps}):
        ms = [s.metrics for s in steps if s.epoch == epoch]
        calls = sum(m["checker/calls"] for m in ms)
        hits = sum(m["checker/cache_hits"] for m in ms)
        checker_s = sum(m["checker/time_s"] for m in ms)
        step_s = sum(m["time/step"] for m in ms)
        per_epoch[epoch] = {
            "steps": len(ms),
            "checker_calls": calls,
            "cache_hits": hits,
            "cache_hit_rate": hits / (hits + calls) if hits + calls else 0.0,
            "latency_ms_mean": statistics.mean(m["checker/latency_ms"] for m in ms if m["checker/calls"])
            if calls
            else 0.0,
            "checker_seconds": checker_s,
            "step_seconds": step_s,
            "checker_share_of_step": checker_s / step_s if step_s else 0.0,
        }
    result = {"command": "python " + " ".join(sys.argv), "questions": args.questions, "epochs": per_epoch}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(
        f"{'epoch':>5} {'steps':>5} {'calls':>6} {'hits':>6} {'hit rate':>8} {'latency ms':>10} {'checker s':>9} "
        f"{'step s':>8} {'share':>6}"
    )
    for epoch, r in per_epoch.items():
        print(
            f"{epoch:>5} {r['steps']:>5} {r['checker_calls']:>6.0f} {r['cache_hits']:>6.0f} "
            f"{r['cache_hit_rate']:>8.2f} "
            f"{r['latency_ms_mean']:>10.0f} {r['checker_seconds']:>9.1f} {r['step_seconds']:>8.1f} "
            f"{r['checker_share_of_step']:>6.2f}"
        )
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
