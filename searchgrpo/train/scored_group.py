"""What a rollout yields: `ScoredGroup`, one state's K samples with their scores (rewards, or
branch returns under episode credit, and how useful the group is to train on), and `Rollouts`,
a rank's groups of one step (`rollouts.py` makes them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgrpo.data.traces import SearchState
from searchgrpo.env.search_round import StepResult
from searchgrpo.policy.sampling import Completion
from searchgrpo.train.group_scoring import zero_variance
from searchgrpo.train.returns import BranchReturn


@dataclass
class ScoredGroup:
    """One state's K samples and what they scored."""

    key: tuple[int, int]
    """(sampling round, position in that round): the group's place in the step, on every rank."""
    state: SearchState
    prompt: list[int]
    completions: list[Completion]
    results: list[StepResult]
    zero_std: bool
    """All K rewards equal: the group has no learning signal."""
    in_batch: bool = True
    """Trained on; False for a group that dynamic sampling replaced."""
    old_logp: Any = None
    """[K, T] log-probs of the completions under the weights they were sampled with (`keep_old`)."""
    credit: list[BranchReturn] | None = None
    """Episode credit (`grpo.credit: episode`): each sample's branch return; None under round credit."""

    @property
    def rewards(self) -> list[float]:
        """What the advantages are computed on: the returns under episode credit, else the rewards."""
        return [b.total for b in self.credit] if self.credit is not None else [r.reward.total for r in self.results]

    @property
    def judged(self) -> bool:
        """The checker labelled its documents (False: deferred by lazy judging)."""
        return all(r.judged for r in self.results)

    @property
    def documents(self) -> int:
        """Distinct documents its K clue sets retrieved: what one checker batch of it asks for."""
        return len({d.docid for r in self.results for d in r.docs})

    @property
    def same_finds(self) -> bool:
        """Every clue set found the same worth of new documents (new_important + new_relevant as weighted
        in the reward; episode credit: over the branch, discounted): the rest is costs and guards."""
        if self.credit is not None:
            return zero_variance([b.finds for b in self.credit])
        weighted = [r.reward.weighted for r in self.results]
        return zero_variance([w.get("new_important", 0.0) + w.get("new_relevant", 0.0) for w in weighted])

    def set_credit(self, returns: Sequence[BranchReturn]) -> None:
        """Pay the samples their branch returns: advantages, `zero_std` and usefulness follow them."""
        self.credit = list(returns)
        self.zero_std = zero_variance(self.rewards)

    def usefulness(self, dynamic_filter: str) -> int:
        """0: informative; 1: its rewards differ only by costs and guards and `dynamic_filter` is
        `finds` (replaced, but preferred to 2 as a filler); 2: zero reward variance."""
        if self.zero_std:
            return 2
        return 1 if dynamic_filter == "finds" and self.same_finds else 0


@dataclass
class Rollouts:
    """This rank's groups of the step and what dynamic sampling did (global counts)."""

    batch: list[ScoredGroup]
    """This rank's groups to train on, in step order."""
    sampled: list[ScoredGroup]
    """Every group this rank sampled (the batch and the replaced ones), in step order."""
    target: int
    """Groups in the step's batch, over all ranks."""
    stats: dict[str, float] = field(default_factory=dict)
    outcomes: list[tuple[str, int]] = field(default_factory=list)
    """Every rank's sampled groups as (state id, usefulness), in step order (`StatePool.observe`)."""
