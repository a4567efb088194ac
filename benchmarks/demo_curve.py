"""The demo's learning curve against the clock (issue 26.4): reward and held-out recall per second.

    python benchmarks/demo_curve.py [--config configs/demo.yaml] [--minutes 30] [--threads N] [--set key=value ...]
    python benchmarks/demo_curve.py --plot-only benchmarks/results/demo_curve.json

Trains what `make demo` trains (`searchgrpo train --headless --config configs/demo.yaml`: the
same `run_training` in this process, events.jsonl in its run folder, no progress display) and records,
at every step and every in-training evaluation, the wall-clock seconds since the start (model
loading included), the process's CPU seconds (all threads; on a shared machine the steadier
clock) and the 1-minute load average, with the step's reward (`reward/mean`, 2 states x K
samples: noisy, so the plot adds a moving mean over --window steps) and the evaluation's
fixed-budget recall (`eval/recall_at_B` for each `eval.budgets` B, on `train.eval_states`
held-out states, greedy; with `train.eval_at_start` the first point is the base model's). Stops
at the config's last step or after --minutes of wall clock (with a checkpoint), whichever comes
first. Writes --out (JSON, rewritten after every event, so an interrupted run keeps its points)
and the PNG beside it (`--clock cpu`: `<out>_cpu.png`, against CPU time; the top panel also shows
the evaluations' held-out reward, `eval/reward_mean`), and prints when reward and recall first
stood visibly above their start: the moving mean of reward above the mean of the first --window
steps by more than twice its spread (the steps' standard deviation over the first window divided
by sqrt(window)), and an evaluation's headline recall above the first evaluation's by more than
one held-out state's share (1 / `eval/states`: 0.031 over 32 states), so that one state's change is
not a gain.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.events import EvalFinished, RunFinished, StepFinished  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "demo_curve.json"


def load1() -> float:
    return os.getloadavg()[0]


def moving_mean(values: list[float], window: int) -> list[float]:
    """Mean of each value and up to window - 1 before it."""
    out = []
    for i in range(len(values)):
        part = values[max(0, i - window + 1) : i + 1]
        out.append(sum(part) / len(part))
    return out


def first_visible_gain(result: dict[str, Any], window: int) -> dict[str, Any]:
    """When reward's moving mean and an evaluation's headline recall first stood above their start."""
    steps, evals = result["steps"], result["evals"]
    out: dict[str, Any] = {"reward": None, "recall": None}
    rewards = [s["reward"] for s in steps if s["reward"] is not None]
    if window >= 2 and len(rewards) >= 2 * window:
        start = statistics.fmean(rewards[:window])
        spread = statistics.stdev(rewards[:window]) / math.sqrt(window)
        out["reward_start"], out["reward_threshold"] = start, start + 2 * spread
        smooth = moving_mean(rewards, window)
        for i in range(2 * window - 1, len(steps)):
            if smooth[i] > start + 2 * spread:
                out["reward"] = {k: steps[i][k] for k in ("step", "wall_s", "cpu_s")} | {"moving_mean": smooth[i]}
                break
    key = result.get("headline")
    if key and evals:
        start_recall = evals[0].get(key)
        out["recall_start"] = start_recall
        if start_recall is not None:
            # One held-out state's whole recall moves the mean by 1/states: a gain must be larger.
            threshold = start_recall + 1.0 / (evals[0].get("eval/states") or 1)
            out["recall_threshold"] = threshold
            for e in evals[1:]:
                if e.get(key) is not None and e[key] > threshold:
                    out["recall"] = {k: e[k] for k in ("step", "wall_s", "cpu_s", key)}
                    break
    return out


def png_path(json_path: Path, clock: str) -> Path:
    """demo_curve.png against wall clock, demo_curve_cpu.png against CPU time."""
    return json_path.with_suffix(".png") if clock == "wall" else json_path.with_name(f"{json_path.stem}_cpu.png")


def plot(result: dict[str, Any], path: Path, window: int, clock: str = "wall") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, evals, key = result["steps"], result["evals"], result.get("headline")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    x = f"{clock}_s"
    minutes = [s[x] / 60 for s in steps]
    rewards = [s["reward"] for s in steps]
    top.plot(minutes, rewards, ".", color="0.7", label="reward per step")
    top.plot(minutes, moving_mean(rewards, window), "-", color="C0", label=f"moving mean ({window} steps)")
    ex = [e[x] / 60 for e in evals if e.get("eval/reward_mean") is not None]
    ey = [e["eval/reward_mean"] for e in evals if e.get("eval/reward_mean") is not None]
    top.plot(ex, ey, "s-", color="C3", label="held-out reward (in-training eval)")
    top.set_ylabel("reward")
    top.legend(loc="lower right")
    for budget_key in result.get("recall_keys", []):
        xs = [e[x] / 60 for e in evals if e.get(budget_key) is not None]
        ys = [e[budget_key] for e in evals if e.get(budget_key) is not None]
        bottom.plot(xs, ys, "o-", label=budget_key.replace("eval/", "held-out "), lw=2 if budget_key == key else 1)
    bottom.set_ylabel("held-out recall (in-training eval)")
    bottom.set_xlabel(
        "wall-clock minutes since start (model loading included)"
        if clock == "wall"
        else f"process CPU minutes since start ({result['threads']} torch thread(s); model loading included)"
    )
    bottom.legend(loc="lower right")
    for ax in (top, bottom):
        ax.axvline(10, color="0.5", ls=":", lw=1)
        ax.grid(alpha=0.3)
    loads = [s["load1"] for s in steps]
    fig.suptitle(
        f"{result['title']}\n{len(steps)} steps in {result.get('total_wall_s', 0) / 60:.1f} min wall, "
        f"{result.get('total_cpu_s', 0) / 60:.1f} min CPU ({result['threads']} torch thread(s)); "
        f"load average {min(loads, default=0):.1f}-{max(loads, default=0):.1f} on {result['cpu_count']} cores",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="key=value (repeatable)")
    ap.add_argument("--minutes", type=float, default=None, help="stop (with a checkpoint) after this much wall clock")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="the PNG's x axis")
    ap.add_argument("--window", type=int, default=10, help="steps in the reward's moving mean")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--plot-only", type=Path, default=None, help="redraw the PNG of this JSON")
    args = ap.parse_args()
    if args.plot_only:
        result = json.loads(args.plot_only.read_text())
        plot(result, png_path(args.plot_only, args.clock), result.get("window", args.window), args.clock)
        return

    import torch

    from searchgrpo.runs import quiet_libraries
    from searchgrpo.runs import train as run_training

    if args.threads:
        torch.set_num_threads(args.threads)
    quiet_libraries()
    overrides = [f"train.output_dir={args.out.parent / 'demo_curve_runs'}", *args.overrides]
    cfg = load_config(args.config, overrides)
    budgets = cfg.eval.budgets
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "title": f"demo curve: {Path(args.config).name} {' '.join(args.overrides)}".strip(),
        "config": args.config,
        "overrides": args.overrides,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "window": args.window,
        "headline": f"eval/recall_at_{budgets[-1]}",
        "recall_keys": [f"eval/recall_at_{b}" for b in budgets],
        "load1_at_start": load1(),
        "steps": [],
        "evals": [],
    }
    wall0, cpu0 = time.perf_counter(), time.process_time()
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def clocks() -> dict[str, float]:
        return {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0, "load1": load1()}

    def write() -> None:
        result["gain"] = first_visible_gain(result, args.window)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.out)

    trainer: Any = None

    def on_event(event: object) -> None:
        if isinstance(event, StepFinished):
            m = event.metrics
            result["steps"].append(
                {
                    "step": event.step,
                    **clocks(),
                    "reward": m.get("reward/mean"),
                    "step_s": m.get("time/step"),
                    "generate_s": m.get("time/generate"),
                    "loss_s": m.get("time/loss"),
                    "sampled_groups": m.get("dynamic/sampled_groups"),
                }
            )
            write()
            if args.minutes and clocks()["wall_s"] > args.minutes * 60 and trainer is not None:
                trainer.control.stop.set()
        elif isinstance(event, EvalFinished):
            result["evals"].append({"step": event.step, **clocks(), **event.metrics})
            write()
        elif isinstance(event, RunFinished):
            result["reason"] = event.reason

    def keep(t: Any) -> None:
        nonlocal trainer
        trainer = t

    summary = run_training(cfg, on_event, on_trainer=keep).summary
    result["total_wall_s"], result["total_cpu_s"] = time.perf_counter() - wall0, time.process_time() - cpu0
    result["load1_at_end"] = load1()
    result["run_dir"] = str(summary.run_dir)
    write()
    plot(result, png_path(args.out, args.clock), args.window, args.clock)
    gain = result["gain"]
    print(json.dumps({k: result[k] for k in ("total_wall_s", "total_cpu_s", "threads")} | {"gain": gain}, indent=1))


if __name__ == "__main__":
    main()
