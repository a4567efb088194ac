"""Running the trainer's steps one after another, optionally pipelined (`train.pipeline`).

`StepRunner.run(index)` takes step `index`'s states from the pool, seeds its sampling, runs the
rollout (`rollouts.start_rollout` / `finish_rollout`) and the update (`step.update`), and reports
the checker's counters of the step. Pipelined, it starts step `index + 1`'s rollout (its samples
drawn now, its verdicts computed on a scoring thread) before step `index`'s update, so that the
checker works while the loss runs; the next `run` finishes it. `settle()` waits for verdicts in
flight before anything else uses the environment (an eval, a checkpoint); a refresh of the state
pool `discard()`s the drawn samples, as their states come from the pool of before; `close()`
stops the scoring thread.

Off, the numbers of a run are exactly those of an unpipelined trainer; on, each step trains on
samples drawn one update earlier (their old log-probs kept from then), so they differ, and a
resumed run starts its first step afresh.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searchgrpo.agents.checker import checker_stats, stats_delta
from searchgrpo.config import Config
from searchgrpo.seeding import derive_seed
from searchgrpo.train.distributed import Dist
from searchgrpo.train.rollouts import PendingRollout, finish_rollout, start_rollout
from searchgrpo.train.state_pool import StatePool
from searchgrpo.train.step import StepOutcome, update
from searchgrpo.train.timing import Stopwatch


class StepRunner:
    """See the module docstring."""

    def __init__(
        self,
        cfg: Config,
        policy: Any,
        env: Any,
        optimizer: Any,
        scheduler: Any,
        pool: StatePool,
        *,
        prompt_of: Any,
        dist: Dist,
        sampler: Any = None,
        total_steps: int,
    ) -> None:
        self.cfg, self.policy, self.env = cfg, policy, env
        self.optimizer, self.scheduler, self.pool = optimizer, scheduler, pool
        self.prompt_of, self.dist, self.sampler, self.total_steps = prompt_of, dist, sampler, total_steps
        self.pipelined = cfg.train.pipeline
        self._scorer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scorer") if self.pipelined else None
        self._pending: tuple[int, PendingRollout] | None = None

    def _seed_of(self, index: int) -> Any:
        seed = self.cfg.train.seed

        def seed_of(state: Any, round_no: int) -> int:
            parts = (seed, "sample", index, state.state_id) + ((round_no,) if round_no else ())
            return derive_seed(*parts)

        return seed_of

    def _start(self, index: int, watch: Stopwatch) -> PendingRollout:
        _, states = self.pool.states_for_step(index)
        return start_rollout(
            self.cfg.grpo,
            self.policy,
            self.env,
            states,
            prompt_of=self.prompt_of,
            seed_of=self._seed_of(index),
            dist=self.dist,
            watch=watch,
            sampler=self.sampler,
            scorer=self._scorer,
            keep_old=self.pipelined,
        )

    def run(self, index: int, *, next_wanted: bool = True) -> tuple[int, StepOutcome]:
        """Step `index` (0-based): (epoch, outcome). `next_wanted`: start the next step's rollout
        (pipelined only; pass False when the run is about to stop)."""
        import torch

        cfg, watch = self.cfg, Stopwatch()
        epoch, _ = self.pool.states_for_step(index)
        torch.manual_seed(derive_seed(cfg.train.seed, "step", index))
        before = checker_stats(self.env.checker)
        if self._pending is not None and self._pending[0] == index:
            pending = self._pending[1]
        else:
            self.discard()
            pending = self._start(index, watch)
        self._pending = None
        rollouts = finish_rollout(
            pending,
            cfg.grpo,
            self.policy,
            self.env,
            prompt_of=self.prompt_of,
            seed_of=self._seed_of(index),
            dist=self.dist,
            watch=watch,
            sampler=self.sampler,
            refill=lambda attempt, n, exclude: self.pool.refill(index, attempt, n, exclude),
            keep_old=self.pipelined,
        )
        if self.pipelined and next_wanted and index + 1 < self.total_steps:
            self._pending = (index + 1, self._start(index + 1, watch))  # its verdicts come while the loss runs
        outcome = update(
            cfg,
            self.policy,
            self.optimizer,
            self.scheduler,
            rollouts,
            dist=self.dist,
            watch=watch,
            sampler=self.sampler,
        )
        after = checker_stats(self.env.checker)
        if before is not None and after is not None:
            keys = sorted(after)  # counters summed over ranks
            outcome.metrics.update(
                stats_delta({}, dict(zip(keys, self.dist.sum([after[k] - before.get(k, 0.0) for k in keys]))))
            )
        return epoch, outcome

    def settle(self) -> None:
        """Wait for verdicts in flight: the environment is then free for other work."""
        if self._pending is not None:
            self._pending[1].settle()

    def discard(self) -> None:
        """Drop a started rollout, once its scoring has ended: a stop, a resume, or a refresh of
        the pool (its states were drawn from the pool of before; the next step samples afresh)."""
        self.settle()
        self._pending = None

    def close(self) -> None:
        self.discard()
        if self._scorer is not None:
            self._scorer.shutdown(wait=True)
            self._scorer = None
