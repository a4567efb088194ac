"""Running the trainer's steps one after another, optionally pipelined (`train.pipeline`).

`StepRunner.run(index)` takes step `index`'s states from the pool, seeds its sampling, runs the
rollout (`rollouts.start_rollout` / `finish_rollout`) and the update (`step.update`), and reports
the checker's counters of the step and, given a `JudgeRadar`, the hack radar's metrics of the
documents the step's groups retrieved. Pipelined, it starts step `index + 1`'s rollout (its samples
drawn now, its verdicts computed on a scoring thread) before step `index`'s update, so that the
checker works while the loss runs; the next `run` finishes it. `settle()` waits for verdicts in
flight before anything else uses the environment (an eval, a replay, a checkpoint), and `close()`
stops the scoring thread.

With episode credit (`grpo.credit: episode`) the runner pays every sampling round's groups their
branch returns (`episode_credit.EpisodeCredit`) in `finish_rollout`, on this thread: pipelined,
the next step's continuations run after this step's update, with the weights of then. After each
rollout the pool learns what each sampled state taught (`StatePool.observe`), before the next
step's states are drawn.

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
from searchgrpo.train.episode_credit import EpisodeCredit
from searchgrpo.train.judge_radar import JudgeRadar
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
        radar: JudgeRadar | None = None,
    ) -> None:
        self.cfg, self.policy, self.env = cfg, policy, env
        self.optimizer, self.scheduler, self.pool = optimizer, scheduler, pool
        self.prompt_of, self.dist, self.sampler, self.total_steps = prompt_of, dist, sampler, total_steps
        self.radar = radar
        self.pipelined = cfg.train.pipeline
        self._scorer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scorer") if self.pipelined else None
        self._pending: tuple[int, PendingRollout] | None = None
        self.credit = EpisodeCredit(cfg, policy, env) if cfg.grpo.credit == "episode" else None

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
            credit=self._credit_hook(watch),
        )
        self.pool.observe(index, rollouts.outcomes)  # before the next step's states are drawn
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
        if self.credit is not None:
            outcome.metrics.update(self.credit.step_metrics(self.dist))
            step_time = outcome.metrics.get("time/step", 0.0)
            outcome.metrics["credit/continuation_time_share"] = (
                outcome.metrics.get("time/continuation", 0.0) / step_time if step_time > 0 else 0.0
            )
        after = checker_stats(self.env.checker)
        if before is not None and after is not None:
            keys = sorted(after)  # counters summed over ranks: the step's, then since the start
            summed = self.dist.sum([after[k] - before.get(k, 0.0) for k in keys] + [after[k] for k in keys])
            step, running = dict(zip(keys, summed[: len(keys)])), dict(zip(keys, summed[len(keys) :]))
            outcome.metrics.update(stats_delta({}, step, running))
        if self.radar is not None:
            outcome.metrics.update(self.radar.step_metrics(outcome.groups, self.dist))
        return epoch, outcome

    def _credit_hook(self, watch: Stopwatch) -> Any:
        """Episode credit's payment of a sampling round's groups, timed in this step's `watch`."""
        credit = self.credit
        if credit is None:
            return None
        return lambda groups: credit.pay(groups, watch)

    def settle(self) -> None:
        """Wait for verdicts in flight: the environment is then free for other work."""
        if self._pending is not None:
            self._pending[1].settle()

    def discard(self) -> None:
        """Drop a started rollout (a stop, a resume, a changed pool), once its scoring has ended."""
        self.settle()
        self._pending = None

    def close(self) -> None:
        self.discard()
        if self._scorer is not None:
            self._scorer.shutdown(wait=True)
            self._scorer = None
