"""Scoring a step's groups: BM25, the checker and the reward, judging lazily where the batch cannot
depend on the verdicts (`grpo.lazy_judging`).

Retrieval is deterministic, so a group whose K clue sets retrieve the same set of documents has
the same verdict-paid reward components in every sample, whatever the checker says. With dynamic
sampling on and lazy judging on, such a group is scored without the checker
(`SearchRoundEnv.score_group(defer_same_docs=True)`: labels None, counted as IRRELEVANT) when its
usefulness is already certain: with the `finds` filter it is uninformative whatever the verdicts;
with `reward` only when its costs and guards are equal too (zero reward variance), otherwise it is
judged at once. The flags dynamic sampling computes from it are therefore the ones judging would
give, so the batch is the same; `rollouts.finish_rollout` judges a deferred group that ends up in
the batch before its rewards are used.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from searchgrpo.config import GRPOConfig
from searchgrpo.data.traces import SearchState
from searchgrpo.env.search_round import SearchRoundEnv, StepResult
from searchgrpo.policy.sampling import Completion
from searchgrpo.train.grpo import zero_std_groups


def zero_variance(rewards: Sequence[float]) -> bool:
    """One group's `grpo.zero_std_groups`: the test `group_advantages` zeroes a group by."""
    return bool(zero_std_groups(torch.tensor([list(rewards)], dtype=torch.float64))[0])


def score(
    env: SearchRoundEnv,
    states: Sequence[SearchState],
    groups: Sequence[Sequence[Completion]],
    lazy_filter: str | None = None,
) -> list[list[StepResult]]:
    """Each group through BM25, the checker (one deduplicated batch per group) and the reward.
    `lazy_filter` (the dynamic filter, when judging is lazy): defer the checker for groups whose
    usefulness does not depend on it (see the module docstring)."""
    return [score_one(env, s, grp, lazy_filter) for s, grp in zip(states, groups)]


def score_one(
    env: SearchRoundEnv, state: SearchState, group: Sequence[Completion], lazy_filter: str | None = None
) -> list[StepResult]:
    """One group's results; judged unless `lazy_filter` lets its verdicts wait (module docstring)."""
    texts, cut = [c.text for c in group], [c.truncated for c in group]
    results = env.score_group(state, texts, cut, defer_same_docs=lazy_filter is not None)
    if (
        results
        and not results[0].judged
        and lazy_filter != "finds"
        and not zero_variance([r.reward.total for r in results])
    ):
        # Same documents but different costs or guards: informative under the reward filter.
        results = env.score_group(state, texts, cut)
    return results


def lazy_filter_of(g: GRPOConfig) -> str | None:
    """The filter lazy judging defers for, or None when every group is judged at once. Episode
    credit judges every group: its branches play on from the round's verdicts (the EntityManager
    reads the IMPORTANT documents), so the same documents need not mean the same return."""
    if g.credit == "episode":
        return None
    return g.dynamic_filter if g.lazy_judging and g.dynamic_sampling else None
