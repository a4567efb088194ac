"""Running the trainer's steps one after another, optionally pipelined (`train.pipeline`).

`StepRunner.run(index)` takes step `index`'s states from the pool, seeds its sampling, runs the
rollout (`rollouts.start_rollout` / `finish_rollout`) and the update (`step.update`), and reports
the checker's counters of the step and, given a `JudgeRadar`, the hack radar's metrics of the
documents the step's groups retrieved. Pipelined, it starts step `index + 1`'s rollout (its samples
drawn now, its verdicts computed on a scoring thread) before step `index`'s update, so that the
checker works while the loss runs; the next `run` finishes it. `settle()` waits for verdicts in
flight before anything else uses the environment (an eval, a checkpoint); a refresh of the state
pool `discard()`s the drawn samples, as their states come from the pool of before; `close()`
stops the scoring thread.

With episode credit (`grpo.credit: episode`) the runner pays every sampling round's groups their
branch returns (`episode_credit.EpisodeCredit`) in `finish_rollout`, on this thread: pipelined,
the next step's continuations run after this step's update, with the weights of then. After each
rollout the pool learns what each sampled state taught (`StatePool.observe`), before the next
step's states are drawn.

Off, the numbers of a run are exactly those of an unpipelined trainer; on, each step trains on
samples drawn one update earlier (their old log-probs kept from then), so they differ. A resumed
pipelined run still replays the uninterrupted run's numbers: before each update the runner keeps
a copy of the adapter that the next step's samples are drawn with (`sampling_weights`, written in
the checkpoint), and a resumed run draws its first step's samples with that copy, as the
uninterrupted run drew them one update earlier. After a refresh of the state pool the next step
samples afresh with the current weights (`discard`), resumed or not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from searchgrpo.agents.checker import stats_delta
from searchgrpo.config import Config
from searchgrpo.seeding import derive_seed
from searchgrpo.train.distributed import Dist
from searchgrpo.train.episode_credit import EpisodeCredit
from searchgrpo.train.judge_radar import JudgeRadar
from searchgrpo.train.rollouts import PendingRollout, finish_rollout, start_rollout
from searchgrpo.train.state_pool import StatePool
from searchgrpo.train.step import StepOutcome, update
from searchgrpo.train.timing import Stopwatch

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


class StepRunner:
    """See the module docstring."""

    def __init__(
        self,
        cfg: Config,
        policy: Policy,
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
        self._sampling: tuple[int, list[Any]] | None = None
        """(step index, adapter weights): the weights that step's samples are drawn with, when they
        are not the current ones (pipelined: the weights before the previous update)."""

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
        before = self.env.checker.stats()
        if self._pending is not None and self._pending[0] == index:
            pending = self._pending[1]
        else:
            sampling = self._sampling[1] if self._sampling is not None and self._sampling[0] == index else None
            self.discard()
            with self._weights(sampling):  # resumed pipelined: the weights the samples predate an update of
                pending = self._start(index, watch)
            if sampling is not None:  # as if drawn in the step before: the torch RNG as this step starts
                torch.manual_seed(derive_seed(cfg.train.seed, "step", index))
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
        history = self.pool.observe(index, rollouts.outcomes)  # before the next step's states are drawn
        if self.pipelined and index + 1 < self.total_steps:
            self._sampling = (index + 1, [p.detach().clone() for p in self.policy.trainable_parameters()])
            if next_wanted:
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
        outcome.metrics.update(history)
        if self.credit is not None:
            outcome.metrics.update(self.credit.step_metrics(self.dist))
            step_time = outcome.metrics.get("time/step", 0.0)
            outcome.metrics["credit/continuation_time_share"] = (
                outcome.metrics.get("time/continuation", 0.0) / step_time if step_time > 0 else 0.0
            )
        after = self.env.checker.stats()
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
        """Drop a started rollout, once its scoring has ended: a stop, a resume, or a refresh of
        the pool (its states were drawn from the pool of before; the next step samples afresh,
        with the current weights)."""
        self.settle()
        self._pending = None
        self._sampling = None

    def sampling_weights(self, index: int) -> dict[str, Any] | None:
        """The adapter weights step `index`'s samples are drawn with, by parameter name, when they
        are not the current ones (for the checkpoint written before step `index`)."""
        if self._sampling is None or self._sampling[0] != index:
            return None
        names = [name for name, p in self.policy.model.named_parameters() if p.requires_grad]
        return {name: w.cpu() for name, w in zip(names, self._sampling[1])}

    def restore_sampling_weights(self, index: int, weights: dict[str, Any] | None) -> None:
        """On resume at step `index`: the checkpoint's `sampling_weights` (None: sample with the
        current weights)."""
        if weights is None or not self.pipelined:
            self._sampling = None
            return
        named = [(name, p) for name, p in self.policy.model.named_parameters() if p.requires_grad]
        self._sampling = (index, [weights[name].to(p.device, p.dtype) for name, p in named])

    @contextlib.contextmanager
    def _weights(self, weights: list[Any] | None) -> Iterator[None]:
        """The adapter holds `weights` inside the block (None: the current ones), and its own after."""
        if weights is None:
            yield
            return
        import torch

        params = self.policy.trainable_parameters()
        current = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p, w in zip(params, weights):
                p.copy_(w)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, w in zip(params, current):
                    p.copy_(w)

    def close(self) -> None:
        self.discard()
        if self._scorer is not None:
            self._scorer.shutdown(wait=True)
            self._scorer = None
