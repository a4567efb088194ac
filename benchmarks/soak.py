"""Soak: train for an hour (or N steps) and check that memory and file handles stay flat.

    PYTHONPATH=. python benchmarks/soak.py                        # 60 minutes, tiny model, demo world
    PYTHONPATH=. python benchmarks/soak.py --minutes 10           # a shorter run
    PYTHONPATH=. python benchmarks/soak.py --steps 2000           # a step budget instead
    PYTHONPATH=. python benchmarks/soak.py --model smollm2        # the embedded SmolLM2-135M
    PYTHONPATH=. python benchmarks/soak.py --device cuda --steps 1000   # on a GPU (its default decoder)

The run is the real trainer with everything a long run does: events to events.jsonl, an eval
pass and a checkpoint every `--save-every` steps (keep_last deletes old ones), resumable. Every
`--sample-every` steps it samples this process's resident memory (VmRSS from /proc/self/status),
open file descriptors (/proc/self/fd) and threads; after the run it closes everything and counts
the descriptors again. It writes a JSON report (default benchmarks/results/soak.json) and exits 1
if a bound is broken:

- RSS growth after warm-up (the first `--warmup` fraction of the run) below `--rss-bound-mb`;
- the fitted RSS slope below `--slope-bound-mb` per 1000 steps (a slow leak shows here first;
  judged when at least 1000 steps follow the warm-up);
- no descriptor opened after warm-up still open at the end (compared by number and target, so
  another thread of the process closing its own cannot hide or fake a leak), and the count back
  at its starting value once closed;
- on a GPU, the CUDA memory allocated after warm-up (torch.cuda.memory_allocated) grows by less
  than `--gpu-bound-mb`.

Expected growth: the retriever keeps a bounded cache of search results (50,000 queries, a few
hundred bytes each), which fills over the first hours of sampling new clues; the report gives
its fill so that growth can be told from a leak.

Linux only (it reads /proc). No dependency beyond the project's own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.soak_run import soak  # noqa: E402  (the harness the test suite also runs)

SMALL_WORLD = ("data.demo.questions=24", "data.demo.distractors=40")
TINY = (
    "model.base=tiny",
    "grpo.num_generations=3",
    "grpo.max_new_tokens=12",
    "grpo.max_prompt_tokens=384",
    "data.max_table_rows=4",
    "train.states_per_step=2",
    "train.micro_batch_size=6",
    "train.lr=1e-2",
)
SMOLLM2 = (
    "model.base=embedded:smollm2",
    "grpo.num_generations=4",
    "grpo.max_new_tokens=32",
    "grpo.max_prompt_tokens=768",
    "train.states_per_step=2",
    "train.micro_batch_size=8",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=None, help="Time budget (default 60 unless --steps).")
    parser.add_argument("--steps", type=int, default=None, help="Step budget instead of a time budget.")
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    parser.add_argument("--big-world", action="store_true", help="The default demo world (160 questions).")
    parser.add_argument("--sample-every", type=int, default=25, help="Steps between samples.")
    parser.add_argument("--save-every", type=int, default=50, help="Checkpoint (and eval) cadence in steps.")
    parser.add_argument("--warmup", type=float, default=0.2, help="Fraction of samples treated as warm-up.")
    parser.add_argument("--rss-bound-mb", type=float, default=64.0)
    parser.add_argument("--slope-bound-mb", type=float, default=16.0, help="Per 1000 steps.")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (model.device).")
    parser.add_argument("--gpu-bound-mb", type=float, default=64.0, help="CUDA allocated growth after warm-up.")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 keeps a shared machine usable).")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs") / "soak")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "soak.json")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="Extra config override.")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    seconds = None if args.steps else 60 * (args.minutes if args.minutes is not None else 60)
    overrides = [
        *(TINY if args.model == "tiny" else SMOLLM2),
        *(() if args.big_world else SMALL_WORLD),
        f"train.save_every={args.save_every}",
        f"train.eval_every={args.save_every}",
        "train.eval_states=4",
        "train.keep_last=2",
        f"train.output_dir={args.runs_dir}",
        f"model.device={args.device}",
        *args.overrides,
    ]
    report = soak(
        overrides,
        seconds=seconds,
        steps=args.steps,
        sample_every=args.sample_every,
        warmup=args.warmup,
        rss_bound_mb=args.rss_bound_mb,
        slope_bound_mb=args.slope_bound_mb,
        gpu_bound_mb=args.gpu_bound_mb,
        progress=True,
    )
    report["command"] = " ".join(["python", *sys.argv])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    r, f = report["rss_mb"], report["fds"]
    print(
        f"{report['steps']} steps in {report['duration_s'] / 60:.1f} min; RSS {r['start']:.0f} -> "
        f"{r['after_warmup']:.0f} (after warm-up) -> {r['end']:.0f} MB, growth after warm-up "
        f"{r['growth_after_warmup']:+.1f} MB (bound {args.rss_bound_mb:.0f}), slope "
        f"{r['slope_mb_per_1k_steps']:+.2f} MB/1k steps; fds {f['after_warmup']} -> {f['end']} "
        f"(after close {f['after_close']}, before {f['before']}); search cache "
        f"{report['search_cache']['entries']}/{report['search_cache']['bound']} queries"
    )
    if "gpu_allocated_mb" in report:
        g = report["gpu_allocated_mb"]
        print(
            f"GPU allocated {g['after_warmup']:.0f} (after warm-up) -> {g['end']:.0f} MB, growth after warm-up "
            f"{g['growth_after_warmup']:+.1f} MB (bound {args.gpu_bound_mb:.0f}), slope "
            f"{g['slope_mb_per_1k_steps']:+.2f} MB/1k steps"
        )
    print(f"passed: {report['passed']}  report: {args.out}")
    return 0 if all(v is not False for v in report["passed"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
