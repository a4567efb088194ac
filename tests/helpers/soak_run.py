"""The soak harness: train under given overrides for a time or step budget while sampling this
process's resident memory (VmRSS), open file descriptors, threads and, on CUDA, allocated GPU
memory; then close everything, count the descriptors again, and judge the bounds. The fast version
is tests/reliability/test_soak.py; the hour-long run is `benchmarks/soak.py`, which calls this.

Linux only (it reads /proc)."""

from __future__ import annotations

import contextlib
import os
import platform
import time
from pathlib import Path
from typing import Any

MIN_SLOPE_SPAN = 1000
"""Steps after warm-up below which the RSS slope is not judged (noise dominates a short fit)."""


def rss_mb() -> float:
    """This process's resident set size in MB (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fd_targets() -> dict[int, str]:
    """Each open descriptor and what it points at (a file's path, `socket:[inode]`, ...)."""
    targets = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
            targets[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return targets


def open_fds() -> int:
    return len(open_fd_targets())


def thread_ids() -> set[int]:
    """The kernel ids of this process's live threads, Python's and native ones alike."""
    return {int(tid) for tid in os.listdir("/proc/self/task")}


def thread_names(ids: set[int]) -> list[str]:
    """`id name` of each thread in `ids` still alive (its kernel name, /proc/self/task/<id>/comm)."""
    names = []
    for tid in sorted(ids):
        with contextlib.suppress(OSError):  # ended since
            names.append(f"{tid} {Path(f'/proc/self/task/{tid}/comm').read_text().strip()}")
    return names


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
    # Beside each sample: which threads and descriptors were open. Counts alone mislead: a thread
    # an earlier test of the same process left behind (a tracker's abandoned request, a server
    # winding down) may end or close a socket during the run and hide a leak or fake one. A leak
    # is a thread or descriptor opened after warm-up and still open at the end.
    sampled_thread_ids: list[set[int]] = []
    sampled_fds: list[set[tuple[int, str]]] = []
    start = time.monotonic()

    def sample(step: int) -> None:
        sampled_thread_ids.append(thread_ids())
        sampled_fds.append(set(open_fd_targets().items()))
        samples.append(
            {
                "step": step,
                "elapsed_s": round(time.monotonic() - start, 2),
                "rss_mb": round(rss_mb(), 2),
                "fds": len(sampled_fds[-1]),
                "threads": len(sampled_thread_ids[-1]),
                **gpu_memory_mb(cuda),
            }
        )
        if progress:
            s = samples[-1]
            gpu = f"  gpu {s['gpu_allocated_mb']:8.1f} MB" if cuda else ""
            print(
                f"step {step:>6}  {s['elapsed_s']:>8.0f}s  rss {s['rss_mb']:8.1f} MB  fds {s['fds']:>4}  "
                f"threads {s['threads']:>3}{gpu}",
                flush=True,
            )

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
    steady = samples[cut - 1 :] if len(samples) > 1 else samples
    rss_steady = [(s["step"], s["rss_mb"]) for s in steady]
    growth = steady[-1]["rss_mb"] - steady[0]["rss_mb"]
    slope = _slope_per_1k(rss_steady)
    fd_values = {s["fds"] for s in steady}
    first_steady = len(samples) - len(steady)
    fds_leaked = sorted(sampled_fds[-1] - sampled_fds[first_steady])
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
        "fds": {
            "before": fds_before,
            "after_warmup": steady[0]["fds"],
            "end": samples[-1]["fds"],
            "min_after_warmup": min(fd_values),
            "max_after_warmup": max(fd_values),
            "after_close": fds_after_close,
            "opened_after_warmup_open_at_end": [f"{fd} -> {target}" for fd, target in fds_leaked],
        },
        "threads": {
            "after_warmup": steady[0]["threads"],
            "end": samples[-1]["threads"],
            "started_after_warmup_alive_at_end": thread_names(
                sampled_thread_ids[-1] - sampled_thread_ids[first_steady]
            ),
        },
        "search_cache": search_cache,
        **(
            {
                "gpu_allocated_mb": {
                    "after_warmup": steady[0]["gpu_allocated_mb"],
                    "end": samples[-1]["gpu_allocated_mb"],
                    "max": max(s["gpu_allocated_mb"] for s in samples),
                    "growth_after_warmup": round(gpu_growth, 2),
                    "slope_mb_per_1k_steps": round(
                        _slope_per_1k([(s["step"], s["gpu_allocated_mb"]) for s in steady]), 3
                    ),
                }
            }
            if cuda
            else {}
        ),
        "bounds": {
            "rss_growth_after_warmup_mb": rss_bound_mb,
            "rss_slope_mb_per_1k_steps": slope_bound_mb,
            "gpu_allocated_growth_after_warmup_mb": gpu_bound_mb,
            "fds": "none opened after warm-up still open at the end; back to the start once closed",
            "warmup_fraction": warmup,
        },
        "samples": samples,
    }
    span = steady[-1]["step"] - steady[0]["step"]
    report["passed"] = {
        "rss_growth": growth < rss_bound_mb,
        "rss_slope": slope < slope_bound_mb if span >= MIN_SLOPE_SPAN else None,  # too short to fit a slope
        "fds_no_leak": not fds_leaked,
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
    return {
        "gpu_allocated_mb": round(torch.cuda.memory_allocated() / 2**20, 2),
        "gpu_reserved_mb": round(torch.cuda.memory_reserved() / 2**20, 2),
    }


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()
