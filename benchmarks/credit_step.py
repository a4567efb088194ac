"""What episode credit costs: a round-credit GRPO step against an episode-credit step (issue 23 item 4).

    python benchmarks/credit_step.py                                    # CPU: SmolLM2-135M (step_table.py's work)
    python benchmarks/credit_step.py --preset h200                      # one H200: a Qwen3-8B-shaped random model
    python benchmarks/credit_step.py --preset h200-quick --device cpu   # that path with a tiny Qwen3 shape, here
    python benchmarks/credit_step.py --preset tiny                      # the tiny random model: a smoke test

Two configurations on the same states and sampling seeds, one after another in this process (each
a fresh `Trainer`): `round` (today's reward) and `episode` (`grpo.credit=episode`,
`grpo.credit_horizon=--horizon`, default 2), both with the gold checker and dynamic sampling off,
so that both score exactly the step's groups. `--steps` timed steps after one warm-up step each.
Per configuration: median seconds per step and its phases, sampling (`time/generate`), scoring
(`time/score`), the continuations (`time/continuation`: every branch's later rounds, the current
policy's greedy clues for all branches of the step in one generation call per round of the loop,
their search and checker calls) and the loss, the continuations' share of the step, and the later
rounds played per branch; then the ratio of the episode step to the round step (issue 23's goal:
at most 2x on one H200).

Presets: `cpu` (SmolLM2-135M in float32 on CPU, 2 states x K=4, 64 new tokens, beta 0.04: the
work of `step_table.py`), `tiny` (the tiny random model, 16 new tokens), `h200` (a Qwen3-8B-shaped
random model, bf16 on CUDA, gradient checkpointing: 4 states x K=8, 128 new tokens, 1024 prompt
tokens, beta 0.04, as `grpo_vs_trl.py --preset h200`; made once in `--model-dir` with the embedded
model's tokenizer, or `--tokenizer`), `h200-quick` (the same path with the tiny Qwen3 shape, on
`--device`). A random model writes no parsable clue, so its later rounds search the rule
Executor's clues (`PolicyExecutor`'s fallback) after generating `max_new_tokens` tokens each: the
generation cost is the worst case. Writes --out (default
benchmarks/results/credit_step_<preset>.json) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from step_table import WORK as STEP_TABLE_WORK  # noqa: E402

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.events import StepFinished  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402

CPU_WORK = STEP_TABLE_WORK
"""step_table.py's work: the README's CPU preset (2 states x K=4, 64-token completions)."""

CONFIGURATIONS = {"round": ["grpo.credit=round"], "episode": ["grpo.credit=episode"]}
SAME = ["checker.backend=gold", "grpo.dynamic_sampling=false"]
"""Both configurations: the gold checker, and every step scores exactly its own groups."""

KEYS = (
    "time/step",
    "time/generate",
    "time/score",
    "time/loss",
    "time/continuation",
    "credit/continuation_time_share",
    "credit/continuation_rounds",
    "credit/branches",
    "tokens/completion",
)


def preset_work(args: argparse.Namespace) -> list[str]:
    """The work of `--preset` (see the module docstring)."""
    if args.preset == "cpu":
        return list(CPU_WORK)
    if args.preset == "tiny":
        return [*CPU_WORK[1:], "model.base=tiny", "grpo.max_new_tokens=16"]
    if args.preset in ("h200", "h200-quick"):
        from random_model import make_random_model

        from searchgrpo.policy.model import resolve_base

        shape = "qwen3-8b" if args.preset == "h200" else "qwen3-tiny"
        tokenizer = Path(args.tokenizer) if args.tokenizer else resolve_base(load_config(None, [])).path
        folder = make_random_model(Path(args.model_dir) / shape, tokenizer, shape)
        cuda = args.device.startswith("cuda")
        return [
            f"model.base={folder}",
            f"model.device={args.device}",
            f"model.dtype={'bfloat16' if cuda else 'float32'}",
            f"model.gradient_checkpointing={'true' if cuda else 'false'}",
            "train.states_per_step=4",
            "train.micro_batch_size=8",
            "grpo.num_generations=8",
            "grpo.max_new_tokens=128",
            "grpo.max_prompt_tokens=1024",
            "grpo.beta=0.04",
            "train.eval_every=0",
            "train.save_every=0",
            "train.seed=7",
        ]
    raise SystemExit(f"unknown preset {args.preset} (cpu, tiny, h200, h200-quick)")


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(name: str, overrides: list[str], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One configuration: warm-up + `--steps` timed steps; the medians of its step metrics."""
    from searchgrpo.train.trainer import Trainer

    cfg = load_config(
        None, [*args.work, *SAME, *overrides, f"train.max_steps={args.steps + 1}", f"train.output_dir={work / name}"]
    )
    steps: list[dict[str, float]] = []

    def on_event(event: object) -> None:
        if isinstance(event, StepFinished):
            steps.append(event.metrics)
            m = event.metrics
            print(
                f"  {name} step {event.step}: {m['time/step']:.2f} s (generate {m.get('time/generate', 0):.2f}, "
                f"continuation {m.get('time/continuation', 0):.2f}, loss {m['time/loss']:.2f})",
                flush=True,
            )

    before, start = load1(), time.perf_counter()
    Trainer(cfg, sink=on_event).train()
    timed = steps[1:]  # the first step is the warm-up
    row: dict[str, Any] = {
        "name": name,
        "overrides": overrides,
        "steps": timed,
        "wall_s": time.perf_counter() - start,
        "load1_before": before,
        "load1_after": load1(),
    }
    for key in KEYS:
        values = [m[key] for m in timed if key in m]
        row[key] = statistics.median(values) if values else float("nan")
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| credit | s/step | sampling | scoring | continuations | loss | continuation share | later rounds / branch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def cell(value: float, spec: str) -> str:
        return "" if math.isnan(value) else format(value, spec)

    for r in rows:
        lines.append(
            f"| {r['name']} | {r['time/step']:.2f} | {r['time/generate']:.2f} | {r['time/score']:.2f} | "
            f"{cell(r['time/continuation'], '.2f')} | {r['time/loss']:.2f} | "
            f"{cell(r['credit/continuation_time_share'], '.0%')} | {cell(r['credit/continuation_rounds'], '.2f')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu", help="cpu | tiny | h200 | h200-quick")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per configuration (after 1 warm-up)")
    parser.add_argument("--horizon", type=int, default=2, help="grpo.credit_horizon of the episode configuration")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--device", default="cuda", help="h200 presets: the device (cpu: a dry run)")
    parser.add_argument("--model-dir", default="/tmp/searchgrpo-models", help="h200 presets: the random models")
    parser.add_argument("--tokenizer", default=None, help="h200 presets: tokenizer folder (default: the embedded)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override (both)")
    args = parser.parse_args()
    import torch

    quiet_libraries()
    torch.set_num_threads(args.threads)
    args.work = [*preset_work(args), *args.overrides]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in CONFIGURATIONS.items():
            extra = [*overrides, f"grpo.credit_horizon={args.horizon}"]
            print(f"{name}: {' '.join(extra)} (load {load1():.2f})", flush=True)
            rows.append(run(name, extra, args, Path(tmp)))
    by = {r["name"]: r for r in rows}
    ratio = by["episode"]["time/step"] / by["round"]["time/step"]
    report = {
        "command": "python " + " ".join(sys.argv),
        "preset": args.preset,
        "work": [*args.work, *SAME],
        "horizon": args.horizon,
        "threads": args.threads,
        "uptime_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "rows": rows,
        "episode_over_round": ratio,
        "goal_at_most_2x": ratio <= 2.0,
    }
    out = args.out or ROOT / "benchmarks" / "results" / f"credit_step_{args.preset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(table(rows))
    print(f"episode credit (H={args.horizon}) / round credit, median s/step: {ratio:.2f}x (goal: at most 2x)")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
