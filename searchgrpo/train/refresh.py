"""On-policy states: replay training questions with the current adapter as the Executor.

The traces' states after round 1 depend on the old Executor's earlier clues. To train on the states
its own clues lead to, the trainer plays a seeded sample of training questions through the whole
multi-agent loop (`searchgrpo.episodes.play`: the rule Planner and EntityManager, BM25, the run's
checker) with the policy writing clues greedily, and keeps each SEARCH round as a training state.
The episodes are also a measurement: the evidence recall they reach is logged.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from searchgrpo.agents.rules import RuleEntityManager, RulePlanner
from searchgrpo.config import Config
from searchgrpo.data.dataset import Dataset
from searchgrpo.data.traces import SearchState
from searchgrpo.episodes.play import play, question_starts
from searchgrpo.events import LogMessage
from searchgrpo.policy.executor import PolicyExecutor
from searchgrpo.seeding import derive_seed
from searchgrpo.train.state_pool import StatePool

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


def replay_training_questions(
    cfg: Config, policy: Policy, env: Any, dataset: Dataset, step: int
) -> tuple[list[SearchState], dict[str, float]]:
    """(the new states, `refresh/*` metrics) of a replay after step `step`."""
    started = time.perf_counter()
    t = cfg.train
    qids = sorted({s.question_id for s in dataset.train})
    if t.refresh_questions and t.refresh_questions < len(qids):
        rng = np.random.default_rng(derive_seed(t.seed, "refresh", step))
        qids = sorted(qids[i] for i in rng.choice(len(qids), size=t.refresh_questions, replace=False))
    executor = PolicyExecutor(cfg, policy, use_adapter=True, seed=t.seed)
    episodes = play(
        question_starts(dataset, qids, dataset.train),
        planner=RulePlanner(t.refresh_rounds),
        executor=executor,
        entity_manager=RuleEntityManager(),
        retriever=env.retriever,
        checker=env.checker,
        top_k=cfg.env.top_k,
    )
    states = []
    for e in episodes:
        for s in e.search_states():
            if len(s.original_clues) >= cfg.data.min_clues_per_round:
                states.append(replace(s, state_id=f"{s.question_id}/refresh-{step:06d}/r{s.round:03d}"))
    recalls = [
        len(e.discovered_after(t.refresh_rounds) & e.start.gold) / len(e.start.gold) for e in episodes if e.start.gold
    ]
    metrics = {
        "refresh/questions": float(len(episodes)),
        "refresh/states": float(len(states)),
        "refresh/evidence_recall": float(np.mean(recalls)) if recalls else 0.0,
        "refresh/fallbacks": float(executor.fallbacks),
        "refresh/time_s": time.perf_counter() - started,
    }
    return states, metrics


def refresh_pool(
    cfg: Config,
    policy: Policy,
    env: Any,
    dataset: Dataset,
    pool: StatePool,
    step: int,
    run_dir: Path,
    dist: Any,
    sink: Any,
) -> dict[str, float]:
    """The trainer's refresh after `step`: rank 0 replays, saves the states in the run folder and
    says so; every rank then trains on them. Returns the `refresh/*` metrics (empty off rank 0)."""
    metrics: dict[str, float] = {}
    if dist.is_main:  # rank 0 plays and saves; the others read what it saved
        states, metrics = replay_training_questions(cfg, policy, env, dataset, step)
        pool.set_refreshed(states, step)
        path = pool.save_refreshed(run_dir)
        sink(
            LogMessage(
                "info",
                f"step {step}: replayed {int(metrics['refresh/questions'])} training questions "
                f"with the current adapter: {len(states)} states ({metrics['refresh/time_s']:.0f} s) "
                f"-> {path}",
            )
        )
    dist.barrier()
    if not dist.is_main:
        pool.load_refreshed(run_dir, step)
    return metrics
