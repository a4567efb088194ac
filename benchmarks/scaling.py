"""Benchmark: data-parallel scaling, 1 process against N, same global batch and seed (issue #8).

    python benchmarks/scaling.py --model /path/to/model --processes 1 2            # GPUs: one process each
    python benchmarks/scaling.py --model tiny --device cpu --processes 1 2 --steps 3  # a CPU dry run (gloo)

Each run is `searchgrpo train --headless --num-processes N` (torchrun) with the same config and
seed; `--accelerate` adds one run under `accelerate launch --num_processes N -m searchgrpo train`.
From every run's `events.jsonl` it compares, step by step, against the 1-process run:

- the sampled clue sets (each state's K samples come from a generator seeded by state and step,
  so they match until float differences between batch shapes flip a token);
- reward/mean, loss/total, loss/kl and grad/norm (absolute differences);
- throughput: steps per second between the first and the last StepFinished (the first step,
  with its one-time costs, is left out), and the speed-up over 1 process.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0). Results: a table, and
benchmarks/results/scaling.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.sinks import read_events  # noqa: E402

CURVES = ("reward/mean", "loss/total", "loss/kl", "grad/norm")


def settings(args: argparse.Namespace, run_name: str) -> list[str]:
    sets = {
        "model.base": args.model,
        "model.device": args.device,
        "model.gradient_checkpointing": "true" if args.gradient_checkpointing else "false",
        "grpo.num_generations": args.k,
        "grpo.max_new_tokens": args.max_new_tokens,
        "grpo.beta": args.beta,
        "train.states_per_step": args.states,
        "train.micro_batch_size": args.k,
        "train.max_steps": args.steps,
        "train.eval_every": 0,
        "train.save_every": 0,
        "train.seed": args.seed,
        "train.output_dir": str(Path(args.workdir) / "runs"),
        "train.run_name": run_name,
        **dict(s.split("=", 1) for s in args.set),
    }
    return [x for key, value in sets.items() for x in ("--set", f"{key}={value}")]


def launch(args: argparse.Namespace, processes: int, launcher: str) -> dict[str, Any]:
    name = f"{launcher}-{processes}"
    if launcher == "torchrun":
        cmd = [
            sys.executable,
            "-m",
            "searchgrpo",
            "train",
            "--headless",
            *settings(args, name),
            "--num-processes",
            str(processes),
        ]
    else:
        extra = ["--cpu"] if args.device == "cpu" else ["--multi_gpu"]
        cmd = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            *extra,
            "-m",
            "searchgrpo",
            "train",
            "--headless",
            *settings(args, name),
        ]
    env = {
        **os.environ,
        "NCCL_NVLS_ENABLE": "0",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    print(f"{name}: {' '.join(cmd[1:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=args.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    if args.log:
        with open(args.log, "a") as fh:
            fh.write(f"\n===== {name}\n{proc.stdout}")
    run_dir = Path(args.workdir) / "runs" / name
    if proc.returncode != 0:
        print(f"  failed ({proc.returncode}): {' | '.join(proc.stdout.strip().splitlines()[-5:])}", flush=True)
        return {"name": name, "processes": processes, "launcher": launcher, "error": proc.stdout[-3000:]}
    events = list(read_events(run_dir / "events.jsonl"))
    steps = [e for e in events if type(e).__name__ == "StepFinished"]
    groups = [e for e in events if type(e).__name__ == "GroupScored"]
    timed = steps[1:]
    span = timed[-1].time - steps[0].time if len(timed) >= 1 else float("nan")
    out = {
        "name": name,
        "processes": processes,
        "launcher": launcher,
        "wall_s": round(wall, 1),
        "steps": len(steps),
        "steps_per_s": round(len(timed) / span, 4) if timed else None,
        "step_s_median": round(statistics.median(s.metrics["time/step"] for s in timed), 3) if timed else None,
        "phases_s": {
            k: round(statistics.median(s.metrics[f"time/{k}"] for s in timed), 3) for k in ("generate", "score", "loss")
        }
        if timed
        else None,
        "curves": {key: [s.metrics[key] for s in steps] for key in CURVES},
        "clues": {f"{g.step}:{g.state_id}": [s.clues for s in g.samples] for g in groups},
    }
    print(f"  {out['steps']} steps, {out['steps_per_s']} steps/s, {out['wall_s']} s wall", flush=True)
    return out


def compare(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    keys = sorted(set(base["clues"]) & set(other["clues"]))
    samples = [(a, b) for key in keys for a, b in zip(base["clues"][key], other["clues"][key])]
    same = sum(a == b for a, b in samples)
    diffs = {
        key: max((abs(a - b) for a, b in zip(base["curves"][key], other["curves"][key])), default=None)
        for key in CURVES
    }
    scale = {key: max((abs(a) for a in base["curves"][key]), default=0.0) for key in CURVES}
    return {
        "identical_clue_sets": f"{same}/{len(samples)}",
        "identical_fraction": round(same / len(samples), 4) if samples else None,
        "max_abs_diff": {k: (round(v, 6) if v is not None else None) for k, v in diffs.items()},
        "max_abs_value": {k: round(v, 6) for k, v in scale.items()},
        "speedup": round(other["steps_per_s"] / base["steps_per_s"], 3)
        if other.get("steps_per_s") and base.get("steps_per_s")
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="model.base (a folder, tiny, embedded:smollm2)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--accelerate", action="store_true", help="also run the largest N under accelerate launch")
    parser.add_argument("--states", type=int, default=8, help="global states per step")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--beta", type=float, default=0.04)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--set", action="append", default=[], help="extra config override, key=value")
    parser.add_argument("--workdir", default="scaling-runs")
    parser.add_argument("--log", default=None)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scaling.json"))
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    args.workdir = str(Path(args.workdir).resolve())

    runs = [launch(args, n, "torchrun") for n in args.processes]
    if args.accelerate:
        runs.append(launch(args, max(args.processes), "accelerate"))
    ok = [r for r in runs if "error" not in r]
    base = next((r for r in ok if r["processes"] == 1), None)
    table = []
    for r in runs:
        row = {k: v for k, v in r.items() if k not in ("clues",)}
        if base is not None and r is not base and "error" not in r:
            row["vs_1_process"] = compare(base, r)
        table.append(row)
    import torch

    meta = {
        "args": vars(args),
        "torch": torch.__version__,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "runs": table}, indent=1))

    print(
        f"\n{'run':14s} {'steps/s':>8s} {'s/step':>7s} {'speed-up':>8s} {'same clues':>11s}  max |diff| "
        f"reward / loss / kl"
    )
    for row in table:
        if "error" in row:
            print(f"{row['name']:14s} failed")
            continue
        c = row.get("vs_1_process", {})
        d = c.get("max_abs_diff", {})
        diff = " / ".join(f"{d.get(k, 0):.2e}" for k in ("reward/mean", "loss/total", "loss/kl")) if d else "-"
        print(
            f"{row['name']:14s} {row['steps_per_s']:8.4f} {row['step_s_median']:7.2f} "
            f"{c.get('speedup', '1.0')!s:>8s} {c.get('identical_clue_sets', '-'):>11s}  {diff}"
        )
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
