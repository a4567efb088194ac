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
- the descriptor count constant after warm-up, and back at its starting value once closed;
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
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIN_SLOPE_SPAN = 1000
"""Steps after warm-up below which the RSS slope is not judged (noise dominates a short fit)."""
SMALL_WORLD = ("data.demo.questions=24", "data.demo.distractors=40")
TINY = ("model.base=tiny", "grpo.num_generations=3", "grpo.max_new_tokens=12", "grpo.max_prompt_tokens=384",
        "data.max_table_rows=4", "train.states_per_step=2", "train.micro_batch_size=6", "train.lr=1e-2")
SMOLLM2 = ("model.base=embedded:smollm2", "grpo.num_generations=4", "grpo.max_new_tokens=32",
           "grpo.max_prompt_tokens=768", "train.states_per_step=2", "train.micro_batch_size=8")


def rss_mb() -> float:
    """This process's resident set size in MB (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # less the descriptor listdir itself opens


def threads() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def _slope_per_1k(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of value over step, per 1000 steps."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(s for s, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((s - mx) ** 2 for s, _ in points)
    return 1000 * sum((s - mx) * (v - my) for s, v in points) / var if var else 0.0


def soak(
    overrides: list[str],
    *,
    seconds: float | None = None,
    steps: int | None = None,
    sample_every: int = 10,
    warmup: float = 0.2,
    rss_bound_mb: float = 64.0,
    slope_bound_mb: float = 16.0,
    gpu_bound_mb: float = 64.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Train under `overrides` for `seconds` or `steps`, sampling resources; returns the report."""
    from searchgrpo.config import load_config
    from searchgrpo.events import CheckpointSaved, EvalFinished, StepFinished
    from searchgrpo.runs import quiet_libraries
    from searchgrpo.sinks import JsonlSink, fanout
    from searchgrpo.train.trainer import Trainer, TrainerControl

    quiet_libraries()
    budget = ["train.epochs=100000", *([f"train.max_steps={steps}"] if steps else [])]
    cfg = load_config(None, [*overrides, *budget])
    cuda = cfg.model.device.startswith("cuda")
    if cuda:  # the CUDA driver's own descriptors stay open for the life of the process: count from after them
        import torch

        torch.zeros(1, device=cfg.model.device)
    fds_before = open_fds()
    control = TrainerControl()
    samples: list[dict[str, float]] = []
    start = time.monotonic()

    def sample(step: int) -> None:
        samples.append({"step": step, "elapsed_s": round(time.monotonic() - start, 2), "rss_mb": round(rss_mb(), 2),
                        "fds": open_fds(), "threads": threads(), **gpu_memory_mb(cuda)})
        if progress:
            s = samples[-1]
            gpu = f"  gpu {s['gpu_allocated_mb']:8.1f} MB" if cuda else ""
            print(f"step {step:>6}  {s['elapsed_s']:>8.0f}s  rss {s['rss_mb']:8.1f} MB  fds {s['fds']:>4}  "
                  f"threads {s['threads']:>3}{gpu}", flush=True)

    saved = {"checkpoints": 0, "evals": 0}

    def on_event(event: Any) -> None:
        if isinstance(event, CheckpointSaved):
            saved["checkpoints"] += 1
        elif isinstance(event, EvalFinished):
            saved["evals"] += 1
        elif isinstance(event, StepFinished):
            if event.step % sample_every == 0 or event.step == 1:
                sample(event.step)
            if seconds is not None and time.monotonic() - start >= seconds:
                control.stop.set()

    trainer = Trainer(cfg, control=control)
    jsonl = JsonlSink(trainer.run_dir / "events.jsonl")
    trainer.sink = fanout(jsonl, on_event)
    try:
        summary = trainer.train()
    finally:
        jsonl.close()
    duration = time.monotonic() - start
    retriever = getattr(getattr(trainer, "env", None), "retriever", None)
    search_cache = {"entries": len(getattr(retriever, "_cache", ())), "bound": getattr(retriever, "_cache_size", 0)}
    del trainer, retriever
    import gc

    gc.collect()
    fds_after_close = open_fds()

    cut = max(1, int(len(samples) * warmup))
    steady = samples[cut - 1:] if len(samples) > 1 else samples
    rss_steady = [(s["step"], s["rss_mb"]) for s in steady]
    growth = steady[-1]["rss_mb"] - steady[0]["rss_mb"]
    slope = _slope_per_1k(rss_steady)
    fd_values = {s["fds"] for s in steady}
    gpu_growth = steady[-1]["gpu_allocated_mb"] - steady[0]["gpu_allocated_mb"] if cuda else 0.0
    report = {
        "model": cfg.model.base,
        "overrides": overrides,
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, torch threads {_torch_threads()}",
        "duration_s": round(duration, 1),
        "steps": summary.step,
        "steps_per_s": round(summary.step / duration, 2) if duration else 0.0,
        "checkpoints_saved": saved["checkpoints"],
        "evals": saved["evals"],
        "rss_mb": {
            "start": samples[0]["rss_mb"],
            "after_warmup": steady[0]["rss_mb"],
            "end": samples[-1]["rss_mb"],
            "max": max(s["rss_mb"] for s in samples),
            "growth_after_warmup": round(growth, 2),
            "slope_mb_per_1k_steps": round(slope, 3),
        },
        "fds": {"before": fds_before, "after_warmup": steady[0]["fds"], "end": samples[-1]["fds"],
                "min_after_warmup": min(fd_values), "max_after_warmup": max(fd_values), "after_close": fds_after_close},
        "threads": {"after_warmup": steady[0]["threads"], "end": samples[-1]["threads"]},
        "search_cache": search_cache,
        **({"gpu_allocated_mb": {"after_warmup": steady[0]["gpu_allocated_mb"], "end": samples[-1]["gpu_allocated_mb"],
                                 "max": max(s["gpu_allocated_mb"] for s in samples),
                                 "growth_after_warmup": round(gpu_growth, 2),
                                 "slope_mb_per_1k_steps": round(_slope_per_1k(
                                     [(s["step"], s["gpu_allocated_mb"]) for s in steady]), 3)}} if cuda else {}),
        "bounds": {"rss_growth_after_warmup_mb": rss_bound_mb, "rss_slope_mb_per_1k_steps": slope_bound_mb,
                   "gpu_allocated_growth_after_warmup_mb": gpu_bound_mb,
                   "fds": "constant after warm-up; back to the start once closed", "warmup_fraction": warmup},
        "samples": samples,
    }
    span = steady[-1]["step"] - steady[0]["step"]
    report["passed"] = {
        "rss_growth": growth < rss_bound_mb,
        "rss_slope": slope < slope_bound_mb if span >= MIN_SLOPE_SPAN else None,  # too short to fit a slope
        "fds_constant": len(fd_values) == 1,
        "fds_released": fds_after_close <= fds_before,
        **({"gpu_growth": gpu_growth < gpu_bound_mb} if cuda else {}),
    }
    return report


def gpu_memory_mb(cuda: bool) -> dict[str, float]:
    """CUDA memory held by tensors and by the caching allocator, in MB (empty off CUDA)."""
    if not cuda:
        return {}
    import torch

    torch.cuda.synchronize()
    return {"gpu_allocated_mb": round(torch.cuda.memory_allocated() / 2**20, 2),
            "gpu_reserved_mb": round(torch.cuda.memory_reserved() / 2**20, 2)}


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


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
    overrides = [*(TINY if args.model == "tiny" else SMOLLM2), *(() if args.big_world else SMALL_WORLD),
                 f"train.save_every={args.save_every}", f"train.eval_every={args.save_every}", "train.eval_states=4",
                 "train.keep_last=2", f"train.output_dir={args.runs_dir}", f"model.device={args.device}", *args.overrides]
    report = soak(overrides, seconds=seconds, steps=args.steps, sample_every=args.sample_every, warmup=args.warmup,
                  rss_bound_mb=args.rss_bound_mb, slope_bound_mb=args.slope_bound_mb, gpu_bound_mb=args.gpu_bound_mb,
                  progress=True)
    report["command"] = " ".join(["python", *sys.argv])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    r, f = report["rss_mb"], report["fds"]
    print(f"{report['steps']} steps in {report['duration_s'] / 60:.1f} min; RSS {r['start']:.0f} -> "
          f"{r['after_warmup']:.0f} (after warm-up) -> {r['end']:.0f} MB, growth after warm-up "
          f"{r['growth_after_warmup']:+.1f} MB (bound {args.rss_bound_mb:.0f}), slope "
          f"{r['slope_mb_per_1k_steps']:+.2f} MB/1k steps; fds {f['after_warmup']} -> {f['end']} "
          f"(after close {f['after_close']}, before {f['before']}); search cache "
          f"{report['search_cache']['entries']}/{report['search_cache']['bound']} queries")
    if "gpu_allocated_mb" in report:
        g = report["gpu_allocated_mb"]
        print(f"GPU allocated {g['after_warmup']:.0f} (after warm-up) -> {g['end']:.0f} MB, growth after warm-up "
              f"{g['growth_after_warmup']:+.1f} MB (bound {args.gpu_bound_mb:.0f}), slope "
              f"{g['slope_mb_per_1k_steps']:+.2f} MB/1k steps")
    print(f"passed: {report['passed']}  report: {args.out}")
    return 0 if all(v is not False for v in report["passed"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
