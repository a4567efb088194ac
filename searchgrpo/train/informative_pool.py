"""Spend sampling where it teaches (`train.state_sampler: informative`).

Late in training most sampled groups teach nothing: their K clue sets score alike (zero
variance) or find the same documents, and dynamic sampling draws group after group to fill a
batch. This pool remembers, for each training state, whether its last group taught anything
(`StatePool.observe`, fed with every rank's `Rollouts.outcomes` after each step's rollout) and
draws states by weight:

- a state never sampled, or whose last group was informative, weighs 1;
- a state whose last group was uninformative (usefulness above 0: zero variance, or with
  `grpo.dynamic_filter: finds` the same finds) weighs `train.informative_weight` (0.1) until
  `train.informative_retry` steps (100) have passed since; then it weighs 1 again and is retried
  (the policy has moved on, and the state may teach again); an informative retry clears it.

Both the step's states and dynamic sampling's refills are drawn this way: a weighted random order
(Efraimidis-Spirakis: each state's key u^(1/w), u uniform, largest first), seeded by (train.seed,
step[, sampling round]), so every data-parallel rank draws the same states from the same memory,
and the memory is saved in each checkpoint (`state_dict`), so a resumed run draws what an
uninterrupted one would. On-policy states (`train.refresh_mix`) are mixed in as the epoch pool
mixes them, drawn by the same weights. Epochs are nominal here: `steps_per_epoch` steps each.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.errors import UserError
from searchgrpo.seeding import derive_seed
from searchgrpo.train.state_pool import StatePool


def weighted_order(rng: np.random.Generator, weights: Sequence[float]) -> list[int]:
    """A random order of len(weights) items in which item i comes first with probability
    proportional to weights[i] (and so on for the rest): sorted by log(u_i) / w_i, largest first.

    >>> weighted_order(np.random.default_rng(0), [1.0, 1e-9, 1.0])[-1]
    1
    """
    w = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore"):
        keys = np.log(rng.random(len(w))) / w
    return [int(i) for i in np.argsort(-keys, kind="stable")]


class InformativePool(StatePool):
    """See the module docstring."""

    def __init__(
        self,
        train: Sequence[SearchState],
        states_per_step: int,
        seed: int,
        mix: float = 0.0,
        *,
        weight: float = 0.1,
        retry: int = 100,
    ) -> None:
        super().__init__(train, states_per_step, seed, mix)
        self.weight = weight
        self.retry = retry
        self.missed_at: dict[str, int] = {}
        """State id -> the step whose group of it taught nothing (absent: informative or unseen)."""

    def weight_of(self, state_id: str, index: int) -> float:
        last = self.missed_at.get(state_id)
        return self.weight if last is not None and index - last < self.retry else 1.0

    def _order(self, rng: np.random.Generator, states: Sequence[SearchState], index: int) -> list[int]:
        return weighted_order(rng, [self.weight_of(s.state_id, index) for s in states])

    def states_for_step(self, index: int) -> tuple[int, list[SearchState]]:
        rng = np.random.default_rng(derive_seed(self.seed, "informative", index))
        states = [self.original[i] for i in self._order(rng, self.original, index)[: self.per]]
        if self.refreshed and self.mix > 0:
            swap = rng.random(len(states)) < self.mix
            picks = self._order(rng, self.refreshed, index)
            states = [self.refreshed[picks[i % len(picks)]] if swap[i] else s for i, s in enumerate(states)]
        return index // self.steps_per_epoch, states

    REFILL_SEED = "informative-refill"

    def _refill_order(self, rng: np.random.Generator, states: Sequence[SearchState], index: int) -> list[int]:
        return self._order(rng, states, index)[::-1]  # popped from the end: the most informative first

    def observe(self, index: int, outcomes: Sequence[tuple[str, int]]) -> dict[str, float]:
        for state_id, usefulness in outcomes:
            if usefulness:
                self.missed_at[state_id] = index
            else:
                self.missed_at.pop(state_id, None)
        return super().observe(index, outcomes)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "missed_at": dict(sorted(self.missed_at.items()))}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict`'s memory; a value of the wrong shape raises ValueError."""
        super().load_state_dict(state)
        missed = (state or {}).get("missed_at", {})
        if not isinstance(missed, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in missed.values()
        ):
            raise ValueError("missed_at must map state ids to step numbers")
        self.missed_at = {str(k): v for k, v in missed.items()}


def make_pool(train: Sequence[SearchState], cfg: Config) -> StatePool:
    """The pool `train.state_sampler` names, for the run's training states."""
    t = cfg.train
    if t.state_sampler == "informative":
        return InformativePool(
            train, t.states_per_step, t.seed, t.refresh_mix, weight=t.informative_weight, retry=t.informative_retry
        )
    return StatePool(train, t.states_per_step, t.seed, t.refresh_mix)


def restore_pool(pool: StatePool, trainer_state: dict[str, Any], checkpoint: Path) -> None:
    """Give `pool` the memory a checkpoint saved (`trainer_state["state_pool"]`; none in older
    checkpoints); a malformed one is refused in one line naming the file."""
    try:
        pool.load_state_dict(trainer_state.get("state_pool", {}))
    except (TypeError, ValueError, AttributeError) as exc:
        raise UserError(
            f"{checkpoint / 'trainer_state.json'}: state_pool cannot be read ({exc}); remove the key to resume "
            "with the state pool's memory empty"
        ) from None
