"""Which states each step trains on.

- The epoch order: every epoch is a seeded permutation of the traces' training states, cut into
  steps of `train.states_per_step` (an incomplete last step is dropped; each epoch's order
  differs, so no state is left out for good).
- Refills: dynamic sampling's fresh states, drawn at random (seeded by step and round) from
  every state the pool holds, never one the step already has.
- On-policy states (`train.refresh_states_every`): the SEARCH-round states of training questions
  replayed with the current adapter as the Executor. Once there are some, each of a step's
  states is swapped, with probability `train.refresh_mix`, for one of them. They are saved in the
  run folder (`refreshed/step-N.json`) so a resumed run trains on the same ones.
- What each state's last group taught (`observe`): each step's sampled groups are counted by it
  (`HISTORY_KEYS`, logged with the step's metrics), and it is kept in each checkpoint.

Every choice is a function of (train.seed, step), so a resumed run and N data-parallel processes
see the same states as one uninterrupted process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgrpo.data.traces import SearchState, state_from_json, state_to_json
from searchgrpo.errors import UserError
from searchgrpo.fileio import atomic_write_json
from searchgrpo.seeding import derive_seed

REFRESH_DIR = "refreshed"

HISTORY_KEYS = tuple(
    f"dynamic/{what}_{kind}"
    for kind in ("first", "after_informative", "after_uninformative")
    for what in ("groups", "informative")
)
"""A step's sampled groups (`groups_*`) and the informative ones among them (`informative_*`), by
what the state's previous group taught: never sampled before, informative, uninformative. Summed
over a window of steps, informative_after_informative / groups_after_informative is how often a
state that taught teaches again; against the same for the other two, how much a sampler that draws
by history could save (issue 23 item 3)."""


class StatePool:
    """The training states and the order in which steps take them (see the module docstring)."""

    def __init__(self, train: Sequence[SearchState], states_per_step: int, seed: int, mix: float = 0.0) -> None:
        self.original = list(train)
        self.per = states_per_step
        self.seed = seed
        self.mix = mix
        self.refreshed: list[SearchState] = []
        self.refreshed_at: int | None = None
        """The step after which the current refreshed states were collected."""
        self.last_taught: dict[str, bool] = {}
        """State id -> whether its last sampled group was informative (absent: never sampled)."""

    @property
    def steps_per_epoch(self) -> int:
        return len(self.original) // self.per

    def states_for_step(self, index: int) -> tuple[int, list[SearchState]]:
        """(epoch, states) of the 0-based step `index`."""
        epoch, b = divmod(index, self.steps_per_epoch)
        order = np.random.default_rng(derive_seed(self.seed, "epoch", epoch)).permutation(len(self.original))
        states = [self.original[i] for i in order[b * self.per : (b + 1) * self.per]]
        if self.refreshed and self.mix > 0:
            rng = np.random.default_rng(derive_seed(self.seed, "mix", index))
            swap = rng.random(len(states)) < self.mix
            picks = rng.permutation(len(self.refreshed))
            states = [self.refreshed[picks[i % len(picks)]] if swap[i] else s for i, s in enumerate(states)]
        return epoch, states

    def refill(self, index: int, attempt: int, n: int, exclude: set[str]) -> list[SearchState]:
        """Up to `n` states for dynamic sampling's round `attempt` of step `index`, none in `exclude`,
        each from the refreshed states with probability `mix` (once there are some), as a step's own."""
        sources = [[s for s in pool if s.state_id not in exclude] for pool in (self.original, self.refreshed)]
        rng = np.random.default_rng(derive_seed(self.seed, self.REFILL_SEED, index, attempt))
        orders = [self._refill_order(rng, pool, index) for pool in sources]
        out: list[SearchState] = []
        for _ in range(max(n, 0)):
            want = 1 if self.refreshed and rng.random() < self.mix else 0
            source = want if orders[want] else 1 - want
            if not orders[source]:
                break
            out.append(sources[source][orders[source].pop()])
        return out

    REFILL_SEED = "refill"
    """The label of refill's seed (a subclass with another order draws from a stream of its own)."""

    def _refill_order(self, rng: np.random.Generator, states: Sequence[SearchState], index: int) -> list[int]:
        """Indices into `states` in the order refill takes them, popped from the end."""
        return list(rng.permutation(len(states)))

    # ------------------------------------------------------------------ what states taught

    def observe(self, index: int, outcomes: Sequence[tuple[str, int]]) -> dict[str, float]:
        """Step `index` sampled these (state id, usefulness) groups (`Rollouts.outcomes`, usefulness 0:
        informative). The epoch order does not draw by them (`informative_pool.InformativePool`
        does); every pool counts them by what the state's previous group taught (`HISTORY_KEYS`),
        the evidence for or against drawing by a state's history."""
        counts = dict.fromkeys(HISTORY_KEYS, 0.0)
        for state_id, usefulness in outcomes:
            before = self.last_taught.get(state_id)
            kind = "first" if before is None else "after_informative" if before else "after_uninformative"
            counts[f"dynamic/groups_{kind}"] += 1
            counts[f"dynamic/informative_{kind}"] += usefulness == 0
            self.last_taught[state_id] = usefulness == 0
        return counts

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must keep for a resumed run to go on as an uninterrupted one would: what
        each state's last group taught (the order itself is a function of the seed and the step)."""
        return {"last_taught": dict(sorted(self.last_taught.items()))}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (a resumed run; a checkpoint without it: nothing known);
        a value of the wrong shape raises ValueError."""
        taught = (state or {}).get("last_taught", {})
        if not isinstance(taught, dict) or not all(isinstance(v, bool) for v in taught.values()):
            raise ValueError("last_taught must map state ids to true or false")
        self.last_taught = {str(k): v for k, v in taught.items()}

    # ------------------------------------------------------------------ on-policy states

    def set_refreshed(self, states: Sequence[SearchState], step: int) -> None:
        self.refreshed, self.refreshed_at = list(states), step

    def save_refreshed(self, run_dir: Path) -> Path:
        """Write the current refreshed states to `run_dir/refreshed/step-N.json` (atomically)."""
        path = run_dir / REFRESH_DIR / f"step-{self.refreshed_at:06d}.json"
        atomic_write_json(path, {"step": self.refreshed_at, "states": [state_to_json(s) for s in self.refreshed]})
        return path

    def load_refreshed(self, run_dir: Path, step: int) -> Path | None:
        """Restore the newest refreshed states collected at or before `step` (a resumed run);
        returns their file, or None if there is none."""
        folder = run_dir / REFRESH_DIR
        files = sorted(folder.glob("step-*.json")) if folder.is_dir() else []
        usable = [(n, f) for f in files if (n := _step_of(f)) is not None and n <= step]
        if not usable:
            return None
        collected_at, path = usable[-1]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            states = [state_from_json(s) for s in data["states"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(
                f"{path}: refreshed states cannot be read ({type(exc).__name__}: {exc}); "
                "delete the file to train without them"
            ) from None
        self.set_refreshed(states, collected_at)
        return path


def _step_of(path: Path) -> int | None:
    try:
        return int(path.stem.removeprefix("step-"))
    except ValueError:
        return None
