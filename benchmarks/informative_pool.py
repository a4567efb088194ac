"""Does the informative state pool spend sampling where it teaches? (issue 23 item 3)

    python benchmarks/informative_pool.py                       # the tiny model, 120 steps each
    python benchmarks/informative_pool.py --model smollm2 --steps 60 --late-from 30
    python benchmarks/informative_pool.py --set grpo.credit=episode        # any config override, both runs

Trains twice on the demo world, the same seed and settings, one after the other in this process:
`train.state_sampler=epoch` (the old sampler: a permutation per epoch, refills at random) and
`informative` (`searchgrpo.train.informative_pool`), with dynamic sampling on and
`grpo.dynamic_filter=finds` (the production setting), and compares them at the same steps:

- sampled groups per step (`dynamic/sampled_groups`), and sampled groups per informative group in
  the batch (the batch's groups times 1 - `dynamic/frac_uninformative_batch`): what one useful
  group costs in sampling, BM25 and checker calls;
- the share of the batch that teaches nothing, and of the sampled groups with zero variance or
  the same finds;
- each over all steps and over the late steps (`--late-from` on), with the paired difference per
  step (informative - epoch) and its bootstrap 95% CI over steps.

The tiny model learns little; what the pool exploits is that some states keep teaching nothing
(nothing left to find, or clue sets that all find the same): the comparison measures that part.
Writes --out (default benchmarks/results/informative_pool_<model>.json) and prints a table.

`--simulate` replaces training by a simulation of the step's sampling alone, on the default demo
world (160 questions), for many steps in seconds: the "policy" is a stochastic rule Executor
(each of the K = 4 clue sets picks 2-3 of the state's candidate clues at random: the question's
keywords, its names with the open goal, each known entity's name with the goal, the goal alone;
seeded by state, step and sample, so both samplers see the same group for the same state at the
same step), each group is scored by the real environment (BM25, the gold checker, the reward),
judged as dynamic sampling judges it (`ScoredGroup.usefulness`, the `finds` filter), and the
step's refills follow `rollouts.finish_rollout`'s rule; the pools are the trainer's own. It
measures the sampler where a state's informativeness is a property of the state and a policy
that does not learn (`benchmarks/results/informative_pool_simulated.json`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.evaluate.stats import mean_ci  # noqa: E402
from searchgrpo.events import StepFinished  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402

MODELS = {
    "tiny": [
        "model.base=tiny",
        "grpo.num_generations=4",
        "grpo.max_new_tokens=16",
        "grpo.max_prompt_tokens=384",
        "train.lr=1e-2",
    ],
    "smollm2": [
        "model.base=embedded:smollm2",
        "model.dtype=float32",
        "grpo.num_generations=4",
        "grpo.max_new_tokens=32",
    ],
}
COMMON = [
    "model.device=cpu",
    "grpo.dynamic_sampling=true",
    "grpo.dynamic_filter=finds",
    "grpo.dynamic_max_retries=2",
    "grpo.beta=0.0",
    "train.states_per_step=2",
    "train.eval_every=0",
    "train.save_every=0",
    "train.epochs=50",
    "train.seed=0",
]
SAMPLERS = ("epoch", "informative")


def per_step(m: dict[str, float], target: int) -> dict[str, float]:
    informative = target * (1.0 - m["dynamic/frac_uninformative_batch"])
    return {
        "sampled_groups": m["dynamic/sampled_groups"],
        "sampled_per_informative": m["dynamic/sampled_groups"] / informative if informative else float("nan"),
        "uninformative_batch": m["dynamic/frac_uninformative_batch"],
        "zero_std_sampled": m["dynamic/frac_zero_std_sampled"],
        "same_finds_sampled": m["dynamic/frac_same_finds_sampled"],
        "step_s": m["time/step"],
    }


def train(sampler: str, args: argparse.Namespace, work: Path) -> list[dict[str, float]]:
    from searchgrpo.train.trainer import Trainer

    cfg = load_config(
        None,
        [
            *MODELS[args.model],
            *COMMON,
            f"train.max_steps={args.steps}",
            f"train.state_sampler={sampler}",
            f"train.output_dir={work / sampler}",
            *args.overrides,
        ],
    )
    steps: list[dict[str, float]] = []

    def on_event(event: object) -> None:
        if isinstance(event, StepFinished):
            steps.append(per_step(event.metrics, cfg.train.states_per_step))
            if event.step % 10 == 0:
                recent = statistics.fmean(s["sampled_groups"] for s in steps[-10:])
                print(f"  {sampler} step {event.step}: {recent:.2f} sampled groups per step (last 10)", flush=True)

    Trainer(cfg, sink=on_event).train()
    return steps


def simulate(sampler: str, args: argparse.Namespace) -> list[dict[str, float]]:
    """Every step's sampling, with a stochastic rule Executor (see the module docstring)."""
    import math
    import random

    from searchgrpo.agents.rules import keywords, names_in
    from searchgrpo.train.informative_pool import make_pool
    from searchgrpo.train.rollouts import ScoredGroup, choose_batch
    from searchgrpo.world import load_dataset, make_env

    cfg = load_config(None, [*COMMON, f"train.state_sampler={sampler}", "grpo.num_generations=4", *args.overrides])
    dataset = load_dataset(cfg)
    env = make_env(cfg, dataset)
    pool = make_pool(dataset.train, cfg)
    target, g = cfg.train.states_per_step, cfg.grpo

    same: dict[tuple[int, int], bool] = {}

    def usefulness(state: Any, step: int, key: tuple[int, int]) -> int:
        before = state.before
        goal = next((x.text for x in before.goals if x.status != "done"), "")
        candidates = [keywords(state.question), " ".join([*names_in(state.question), keywords(goal)]).strip()]
        candidates += [f"{e.name} {keywords(goal)}".strip() for e in before.entities[-4:]]
        candidates += [keywords(goal)] if goal else []
        candidates = list(dict.fromkeys(c for c in candidates if c))
        sets = []
        for k in range(g.num_generations):
            rng = random.Random(f"{state.state_id}:{step}:{k}")
            sets.append(rng.sample(candidates, min(len(candidates), rng.choice((2, 3)))))
        results = env.score_group(state, sets)
        group = ScoredGroup(key, state, [], [], results, len({r.reward.total for r in results}) == 1)
        same[key] = group.same_finds
        return group.usefulness(g.dynamic_filter)

    out = []
    for step in range(args.steps):
        states = pool.states_for_step(step)[1]
        same.clear()
        flags = {(0, i): usefulness(s, step, (0, i)) for i, s in enumerate(states)}
        ids = {(0, i): s.state_id for i, s in enumerate(states)}
        seen, attempt = {s.state_id for s in states}, 0
        while g.dynamic_sampling and attempt < g.dynamic_max_retries:
            informative = sum(1 for f in flags.values() if f == 0)
            need = target - informative
            if need <= 0:
                break
            attempt += 1
            rate = max(informative / len(flags), 0.25)
            fresh = pool.refill(step, attempt, min(math.ceil(need / rate), 4 * need), seen)
            if not fresh:
                break
            seen.update(s.state_id for s in fresh)
            for i, s in enumerate(fresh):
                flags[(attempt, i)], ids[(attempt, i)] = usefulness(s, step, (attempt, i)), s.state_id
        chosen = choose_batch(flags, target)
        pool.observe(step, [(ids[k], flags[k]) for k in sorted(flags)])
        out.append(
            {
                "sampled_groups": float(len(flags)),
                "sampled_per_informative": len(flags) / sum(1 for k in chosen if flags[k] == 0)
                if any(flags[k] == 0 for k in chosen)
                else float("nan"),
                "uninformative_batch": sum(1 for k in chosen if flags[k]) / len(chosen),
                "zero_std_sampled": sum(1 for f in flags.values() if f == 2) / len(flags),
                "same_finds_sampled": sum(same.values()) / len(flags),
                "step_s": 0.0,
            }
        )
    return out


def summary(steps: dict[str, list[dict[str, float]]], first: int) -> dict[str, Any]:
    """Means over steps `first`+ (1-based) per sampler, and the paired per-step difference."""
    out: dict[str, Any] = {}
    for key in (
        "sampled_groups",
        "sampled_per_informative",
        "uninformative_batch",
        "zero_std_sampled",
        "same_finds_sampled",
    ):
        rows = {s: [x[key] for x in steps[s][first - 1 :]] for s in SAMPLERS}
        means = {s: float(np.nanmean(v)) for s, v in rows.items()}
        diff = np.array(rows["informative"]) - np.array(rows["epoch"])
        diff = diff[np.isfinite(diff)]
        lo, hi = mean_ci(diff) if len(diff) > 1 else (float("nan"), float("nan"))
        out[key] = {**means, "diff": float(diff.mean()) if len(diff) else float("nan"), "ci": [lo, hi]}
    return out


def table(results: dict[str, Any]) -> str:
    lines = [
        "| steps | figure | epoch | informative | informative - epoch (95% CI over steps) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for part, label in (("all", "all"), ("late", f"{results['late_from']}+")):
        for key, d in results[part].items():
            lines.append(
                f"| {label} | {key} | {d['epoch']:.3f} | {d['informative']:.3f} | "
                f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=tuple(MODELS), default="tiny")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--late-from", type=int, default=None, help="first late step (default: the second half)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], help="config override (both runs)")
    p.add_argument("--simulate", action="store_true", help="the sampling alone, a stochastic rule policy")
    args = p.parse_args()
    import torch

    quiet_libraries()
    torch.set_num_threads(args.threads)
    late = args.late_from or args.steps // 2 + 1
    started = time.time()
    steps = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sampler in SAMPLERS:
            print(f"{sampler}: {args.steps} steps", flush=True)
            steps[sampler] = simulate(sampler, args) if args.simulate else train(sampler, args, Path(tmp))
    results = {
        "command": "python " + " ".join(sys.argv),
        "model": "simulated (stochastic rule Executor)" if args.simulate else args.model,
        "settings": [*([] if args.simulate else MODELS[args.model]), *COMMON, *args.overrides],
        "steps": args.steps,
        "late_from": late,
        "wall_s": time.time() - started,
        "uptime_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "all": summary(steps, 1),
        "late": summary(steps, late),
        "per_step": {k: [{m: round(v, 4) for m, v in x.items()} for x in rows] for k, rows in steps.items()},
    }
    name = "simulated" if args.simulate else args.model
    out = args.out or ROOT / "benchmarks" / "results" / f"informative_pool_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(table(results))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
