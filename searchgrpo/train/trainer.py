"""The GRPO training loop: data order, steps, evaluation, checkpoints and control.

`Trainer(cfg, sink=..., control=...).train()` runs a whole run and publishes typed events to
`sink`. It never prints and never imports the console. `control` lets another thread pause,
resume, stop (with a checkpoint) or ask for a checkpoint now; every request is honoured between
steps.

Reproducibility: every state's K samples come from a generator seeded by (train.seed, step,
state, sampling round), the torch RNG is re-seeded from (train.seed, step) at the start of every
step, and the states of each step (`state_pool.py`: the epoch order, dynamic sampling's refills,
on-policy states) are seeded choices, and what the informative pool remembers of each state is
saved in every checkpoint. So a run resumed from a checkpoint replays exactly the numbers an
uninterrupted run produces (on CPU, bit for bit; with `train.pipeline` on too: the checkpoint
keeps the adapter its next step's samples are drawn with, see `step_runner.py`), and N
data-parallel processes sample the same clues as one.

Data parallelism (`distributed.py`): each rank samples and trains its share of every step's
groups; only rank 0 publishes events and writes checkpoints; stop, pause and save requests are
agreed on by all ranks.

Setting up (the checks, the loading, the claim of the run folder and resuming) is
`trainer_setup.TrainerSetup`'s, whose `__init__` declares every attribute a trainer has.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.config import Config
from searchgrpo.data.dataset import Dataset
from searchgrpo.data.traces import SearchState
from searchgrpo.events import (
    CheckpointSaved,
    EvalFinished,
    EventSink,
    LogMessage,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepFinished,
    TrainEvalProgress,
)
from searchgrpo.train.checkpoints import CheckpointInfo, list_checkpoints, save_checkpoint
from searchgrpo.train.control import TrainerControl, wait_if_paused
from searchgrpo.train.judge_radar import Drift, drift_stop_line
from searchgrpo.train.periodic_eval import evaluate_held_out
from searchgrpo.train.refresh import refresh_pool
from searchgrpo.train.run_lock import new_run_id
from searchgrpo.train.trainer_setup import TrainerSetup
from searchgrpo.train.views import step_events


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    step: int
    reason: str
    last_metrics: dict[str, float]
    last_eval: dict[str, float]


class Trainer(TrainerSetup):
    """GRPO + LoRA training of the Executor (see the module docstring)."""

    def __init__(
        self,
        cfg: Config,
        *,
        sink: EventSink | None = None,
        control: TrainerControl | None = None,
        run_dir: Path | None = None,
        resume: bool = False,
        dataset: Dataset | None = None,
        allow_changes: bool = False,
    ) -> None:
        super().__init__(
            cfg,
            sink=sink,
            control=control,
            run_dir=Path(run_dir) if run_dir else Path(cfg.train.output_dir) / (cfg.train.run_name or new_run_id()),
            fresh_id=run_dir is None and cfg.train.run_name is None,
            resume=resume,
            dataset=dataset,
            allow_changes=allow_changes,
        )

    # ------------------------------------------------------------------ data order

    def states_for_step(self, index: int) -> tuple[int, list[SearchState]]:
        """(epoch, states) of the 0-based step `index` (`StatePool.states_for_step`)."""
        assert self.pool is not None
        return self.pool.states_for_step(index)

    # ------------------------------------------------------------------ loop

    def train(self) -> RunSummary:
        """Run to the end (or until stopped). Emits RunFailed and re-raises on error."""
        try:
            self.setup()
            if self.finished is not None:
                return self._nothing_to_do(self.finished)
            return self._loop()
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.sink(RunFailed(self.step, error, traceback.format_exc()))
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Release what the runner, the checker and the sampler hold (the scoring thread, embedded
        servers, the verdict cache), and the run's lock."""
        if self.runner is not None:
            self.runner.close()
        if self.env is not None:
            self.env.checker.close()
        if self.sampler is not None:
            self.sampler.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def _nothing_to_do(self, info: CheckpointInfo) -> RunSummary:
        """A resumed run with no steps left: nothing is trained, evaluated or written."""
        self.step = info.step
        self.sink(
            LogMessage(
                "info",
                f"run {self.run_dir.name} already finished at step {info.step} of "
                f"{self.total_steps}; nothing to do (to train further, raise train.max_steps or "
                "train.epochs with --set and --allow-changes)",
            )
        )
        last_metrics, last_eval = info.state.get("last_metrics", {}), info.state.get("last_eval", {})
        return RunSummary(self.run_dir, info.step, "already finished", last_metrics, last_eval)

    def _loop(self) -> RunSummary:
        cfg, ds, dist, runner, env, radar = self.cfg, self.dataset, self.dist, self.runner, self.env, self.radar
        assert ds is not None and runner is not None and env is not None and radar is not None
        assert self.policy is not None
        self.sink(
            RunStarted(
                run_id=self.run_dir.name,
                run_dir=str(self.run_dir),
                base_model=cfg.model.base,
                device=str(self.policy.device),
                total_steps=self.total_steps,
                steps_per_epoch=self.steps_per_epoch,
                epochs=cfg.train.epochs,
                num_train_states=len(ds.train),
                num_eval_states=len(ds.eval),
                start_step=self.step,
                config=cfg.to_dict(),
            )
        )
        reason = "completed"
        if cfg.train.eval_at_start and cfg.train.eval_every and self.step == 0 and self.total_steps > 0:
            self.evaluate()
        while self.step < self.total_steps:
            if not self._wait_if_paused():
                reason = "stopped"
                break
            epoch, outcome = runner.run(self.step, next_wanted=not self.control.stop.is_set())
            self.step += 1
            groups = outcome.groups
            corpus, chars = env.retriever.corpus, cfg.env.snippet_chars
            for group in step_events(self.step, epoch, groups, outcome.advantages, corpus, chars, dist):
                self.sink(group)
            if outcome.nonfinite:
                self.sink(LogMessage("warning", f"step {self.step}: non-finite loss or gradient; update skipped"))
            refresh = cfg.train.refresh_states_every
            if refresh and self.step % refresh == 0 and self.step < self.total_steps:
                outcome.metrics.update(self.refresh_states())
            self.last_metrics = outcome.metrics
            self._note_missing_probs()
            self.sink(StepFinished(self.step, epoch, self.total_steps, outcome.metrics))
            drift = radar.started(outcome.metrics)
            if drift is not None and self._judge_drift(drift):
                reason = "stopped"
                break
            if cfg.train.eval_every and self.step % cfg.train.eval_every == 0:
                self.evaluate()
            save_every = cfg.train.save_every
            if (save_every and self.step % save_every == 0) or dist.any(self.control.save_now.is_set()):
                self.control.save_now.clear()
                self.save()
            if dist.any(self.control.stop.is_set()):
                reason = "stopped"
                break
        if reason == "completed" and cfg.train.eval_every and self.step % cfg.train.eval_every != 0:
            self.evaluate()
        if self.step != self.last_saved and self.step > 0:
            self.save()
        self.sink(RunFinished(self.step, reason))
        return RunSummary(self.run_dir, self.step, reason, self.last_metrics, self.last_eval)

    def _note_missing_probs(self) -> None:
        """With soft labels, say once that the checker's verdicts come without label probabilities
        (they then count as their labels): an `llm` server without logprobs, or whose labels' first
        tokens are not distinct."""
        assert self.env is not None
        note = self.env.checker.probs_note
        if self.cfg.reward.soft_labels and note and not self._probs_noted:
            self._probs_noted = True
            self.sink(
                LogMessage(
                    "warning",
                    f"reward.soft_labels: some of the {self.cfg.checker.backend} checker's verdicts have no label "
                    f"probabilities ({note}); they count as their labels",
                )
            )

    def refresh_states(self) -> dict[str, float]:
        """Replay training questions with the current adapter and train on their states from now on
        (`train.refresh_states_every`); returns the `refresh/*` metrics (on rank 0)."""
        assert self.dataset is not None and self.runner is not None and self.prompts is not None
        assert self.pool is not None and self.policy is not None and self.env is not None
        self.runner.discard()  # a pipelined step's samples were drawn from the pool of before
        self.prompts.forget(self.pool.refreshed)
        return refresh_pool(
            self.cfg, self.policy, self.env, self.dataset, self.pool, self.step, self.run_dir, self.dist, self.sink
        )

    def _wait_if_paused(self) -> bool:
        """Block while paused (`control.wait_if_paused`); False if a stop was requested."""
        return wait_if_paused(
            self.control,
            self.dist,
            paused=lambda: self.sink(RunPaused(self.step)),
            resumed=lambda: self.sink(RunResumed(self.step)),
            save=self.save,
        )

    # ------------------------------------------------------------------ eval and checkpoints

    def evaluate(self) -> dict[str, float]:
        """Score the eval states now (`periodic_eval`); {} when there are none."""
        assert self.runner is not None and self.policy is not None and self.env is not None
        assert self.prompts is not None and self.dataset is not None
        self.runner.settle()  # a pipelined step's verdicts may be in flight
        summary = evaluate_held_out(
            self.cfg, self.policy, self.env, self.prompts, self.dataset, self.dist, self._eval_progress
        )
        if summary is None:
            return {}
        self.last_eval, self.last_eval_step = summary, self.step
        self.sink(EvalFinished(self.step, self.last_eval))
        return self.last_eval

    def _eval_progress(self, done: int, total: int) -> None:
        self.sink(TrainEvalProgress(self.step, done, total))

    def _judge_drift(self, drift: Drift) -> bool:
        """Warn of judge drift; with `train.stop_on_judge_drift`, evaluate and save now, name the best
        checkpoint by held-out fixed-budget recall, and return True (the run stops)."""
        self.sink(LogMessage("warning", f"step {self.step}: judge drift: {drift.describe()}"))
        if not self.cfg.train.stop_on_judge_drift:
            return False
        if self.cfg.train.eval_every and self.last_eval_step != self.step:
            self.evaluate()
        path = self.save()
        if self.dist.is_main:
            checkpoints = list_checkpoints(self.run_dir)
            self.sink(LogMessage("warning", drift_stop_line(self.step, path, self.cfg.eval.budgets[-1], checkpoints)))
        return True

    def save(self) -> Path:
        """Rank 0 writes the checkpoint; every rank waits until it is complete."""
        path = self.run_dir / "checkpoints"
        if not self.dist.is_main:
            self.dist.barrier()
            self.last_saved = self.step
            return path
        assert self.policy is not None and self.pool is not None and self.runner is not None
        path = save_checkpoint(
            self.run_dir,
            self.step,
            model=self.policy.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            trainer_state={
                "run_id": self.run_dir.name,
                "total_steps": self.total_steps,
                "epoch": self.step // max(self.steps_per_epoch, 1),
                "base_model": self.cfg.model.base,
                "base_name": self.policy.base.name,
                "last_metrics": self.last_metrics,
                "last_eval": self.last_eval,
                "last_eval_step": self.last_eval_step,
                "state_pool": self.pool.state_dict(),
                "time": time.time(),
            },
            keep_last=self.cfg.train.keep_last,
            sampling_weights=self.runner.sampling_weights(self.step),
        )
        self.last_saved = self.step
        self.dist.barrier()
        self.sink(CheckpointSaved(self.step, str(path)))
        return path
