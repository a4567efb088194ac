"""Scripted, deterministic events of a plausible run (fixed times, seeded numbers) for console tests,
snapshots and the benchmark: `run_started`, `step_events` (a step's groups, samples and metrics) and
`scripted_run` (a whole run). `tests/helpers/scripted.py` plays them."""

from __future__ import annotations

import random
from typing import Any

from searchgrpo.env.clue_credit import clue_credit
from searchgrpo.events import (
    CheckpointSaved,
    DocView,
    EvalFinished,
    GroupScored,
    LogMessage,
    RunFinished,
    RunStarted,
    SampleView,
    StepFinished,
)

T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC
QUESTIONS = [
    (
        "Which river flows through the city where the composer of the Harbour Suite was born?",
        ["Harbour Suite composer", "composer birthplace city", "river through Vellmar"],
    ),
    (
        "What year was the bridge designed by the architect of the Old Exchange completed?",
        ["Old Exchange architect", "bridges designed by Anna Lind", "Lind bridge completion year"],
    ),
    (
        "Who founded the observatory on the island where the poet Tarquin Hale died?",
        ["Tarquin Hale death place", "observatory Skerrow island", "founder of Skerrow observatory"],
    ),
]
COMPONENTS = (
    "new_important",
    "new_relevant",
    "irrelevant",
    "already_discovered",
    "duplicate_clue",
    "unparsable",
    "clue_count_out_of_bounds",
)
WEIGHTS = (1.0, 0.2, -0.05, -0.1, -0.25, -1.0, -0.5)
LABELS = ("IMPORTANT", "RELEVANT", "IRRELEVANT")


def _sample(rng: random.Random, index: int, clues: list[str], skill: float) -> SampleView:
    docs, counts = [], dict.fromkeys(COMPONENTS, 0.0)
    for ci, clue in enumerate(clues):
        for rank in range(3):
            roll = rng.random()
            label = LABELS[0] if roll < skill * 0.4 else LABELS[1] if roll < 0.3 + skill * 0.3 else LABELS[2]
            new = rng.random() < 0.75
            docid = f"d{rng.randrange(1000):04d}"
            docs.append(
                DocView(
                    docid,
                    f"{clue.split()[0].title()} — entry {docid}",
                    f"{clue} appears in this passage, with dates and places around it.",
                    label,
                    f"{'mentions' if label != 'IRRELEVANT' else 'does not mention'} {clue.split()[-1]}",
                    new,
                    ci,
                    rank,
                )
            )
            if not new:
                counts["already_discovered"] += 1
            elif label == "IMPORTANT":
                counts["new_important"] += 1
            elif label == "RELEVANT":
                counts["new_relevant"] += 1
            else:
                counts["irrelevant"] += 1
    weighted = {k: w * counts[k] for k, w in zip(COMPONENTS, WEIGHTS)}
    reward = round(sum(weighted.values()), 6)
    completion = "{" + ", ".join(f'"{c}"' for c in clues) + "}"
    values = {d.docid: (1.0 if d.label == "IMPORTANT" else 0.2 if d.label == "RELEVANT" else 0.0) * d.new for d in docs}
    credit = clue_credit([[d.docid for d in docs if d.clue_index == i] for i in range(len(clues))], values)
    return SampleView(
        index,
        completion,
        clues,
        reward,
        0.0,
        weighted,
        counts,
        docs,
        False,
        8 + 3 * len(clues),
        clue_marginals=list(credit.marginals),
        clue_shares=list(credit.shares),
    )


def _group(
    rng: random.Random, step: int, epoch: int, qi: int, k: int, skill: float, time: float, zero: bool
) -> GroupScored:
    question, base = QUESTIONS[qi % len(QUESTIONS)]
    samples = []
    for i in range(k):
        clues = base[: 2 + (i % 2)] if not zero else base[:2]
        samples.append(
            _sample(random.Random(0) if zero else rng, i, [f"{c} {i}" if i > 1 else c for c in clues], skill)
        )
    rewards = [s.reward for s in samples]
    mean = sum(rewards) / k
    std = 0.0 if len(set(rewards)) == 1 else (sum((r - mean) ** 2 for r in rewards) / (k - 1)) ** 0.5
    samples = [SampleView(**{**s.__dict__, "advantage": 0.0 if std == 0 else (s.reward - mean) / std}) for s in samples]
    return GroupScored(
        step,
        epoch,
        f"q{qi:03d}-r{1 + step % 3}",
        question,
        1 + step % 3,
        samples,
        mean,
        std,
        std == 0,
        list(base[:2]),
        time=time,
    )


def run_started(total: int = 12, start_step: int = 0, run_id: str = "20260101-000000") -> RunStarted:
    return RunStarted(
        run_id,
        f"runs/{run_id}",
        "tiny",
        "cpu",
        total,
        6,
        2,
        12,
        4,
        start_step,
        {"model": {"base": "tiny"}},
        T0 + start_step,
    )


def step_events(
    step: int, total: int = 12, k: int = 4, groups: int = 2, seed: int = 0, zero_every: int = 5
) -> list[Any]:
    """The GroupScored events and StepFinished of one step (1-based)."""
    rng = random.Random(seed * 1000 + step)
    time = T0 + 10.0 * step
    skill = min(0.2 + step / max(total, 1), 1.0)
    epoch = (step - 1) // 6
    out: list[Any] = [
        _group(rng, step, epoch, step * groups + g, k, skill, time, zero_every and step % zero_every == 0 and g == 0)
        for g in range(groups)
    ]
    rewards = [s.reward for grp in out for s in grp.samples]
    mean = sum(rewards) / len(rewards)
    metrics = {
        "reward/mean": mean,
        "reward/std": (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5,
        "reward/min": min(rewards),
        "reward/max": max(rewards),
        "reward/frac_zero_std": sum(g.zero_std for g in out) / groups,
        "loss/total": 0.02 * rng.uniform(-1, 1),
        "loss/kl": 0.001 * step,
        "loss/clip_frac": 0.01 * rng.random(),
        "loss/clip_low": 0.0,
        "loss/clip_high": 0.0,
        "grad/norm": 0.5 + rng.random(),
        "train/lr": 5e-5,
        "time/step": 10.0,
        "time/generate": 6.0,
        "time/score": 1.0,
        "time/loss": 3.0,
        "tokens/completion": 96.0,
        "rollout/clues": 2.5,
        "rollout/docs": 7.5,
    }
    for name in COMPONENTS:
        metrics[f"reward/{name}"] = sum(s.components[name] for grp in out for s in grp.samples) / len(rewards)
    out.append(StepFinished(step, epoch, total, metrics, time + 5))
    return out


def scripted_run(
    steps: int = 12, total: int = 12, k: int = 4, eval_every: int = 4, save_every: int = 4, finish: bool = True
) -> list[Any]:
    """A whole run's events, as the trainer would send them."""
    events: list[Any] = [
        LogMessage("warning", "skipped checkpoints/q999/run_001/meta.json: not JSON", T0),
        run_started(total),
    ]
    for step in range(1, steps + 1):
        events += step_events(step, total, k)
        if eval_every and step % eval_every == 0:
            events.append(
                EvalFinished(
                    step,
                    {"eval/reward_mean": 0.1 * step, "eval/important_discovery": 0.05 * step, "eval/states": 4.0},
                    T0 + 10.0 * step + 6,
                )
            )
        if save_every and step % save_every == 0:
            events.append(
                CheckpointSaved(step, f"runs/20260101-000000/checkpoints/step-{step:06d}", T0 + 10.0 * step + 7)
            )
    if finish:
        events.append(RunFinished(steps, "completed", T0 + 10.0 * steps + 8))
    return events
