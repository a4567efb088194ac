"""The GRPO training loop: data order, steps, evaluation, checkpoints, resume and control.

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

Setup checks everything it can before it writes anything or loads a weight: the data, the model's
sizes (`policy.preflight`), and on `--resume` the run's lock, config and data (`run_history`), so a
bad start leaves no run folder behind. The folder is claimed last (`run_lock`): a fresh run's id is
made unique with an exclusive mkdir, and the folder is locked for as long as the trainer writes it;
`on_claimed(run_dir)` is then called (the event log opens there). A resumed run that has no steps
left is a no-op that says so. The run folder holds the prompt the run trains with
(`prompt_template.jinja`, `prompt.json`: `env.prompt_record`), and each start's history entry its
digest: a resume with another template text is refused without --allow-changes.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.agents.llm_checker import PROMPT_VERSION, LLMChecker
from searchgrpo.config import Config, to_yaml
from searchgrpo.data.dataset import Dataset
from searchgrpo.data.fingerprint import data_fingerprint
from searchgrpo.env.prompt_record import PromptSizes, write_prompt_record
from searchgrpo.env.prompt_template import load_template
from searchgrpo.errors import UserError
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
from searchgrpo.fileio import atomic_write_text
from searchgrpo.policy.sampling import Prompts
from searchgrpo.policy.scoring import score_policy, state_summary, summarise
from searchgrpo.train.checkpoints import (
    CheckpointInfo,
    check_base_model,
    list_checkpoints,
    load_newest_checkpoint,
    load_sampling_weights,
    newest_usable,
    remove_interrupted_writes,
    save_checkpoint,
)
from searchgrpo.train.control import TrainerControl
from searchgrpo.train.distributed import Dist
from searchgrpo.train.informative_pool import make_pool, restore_pool
from searchgrpo.train.judge_radar import Drift, JudgeRadar, drift_stop_line
from searchgrpo.train.refresh import refresh_pool
from searchgrpo.train.run_history import append_history, check_prompt, check_resume, is_free
from searchgrpo.train.run_lock import RunLock, claim, new_run_id
from searchgrpo.train.schedule import make_scheduler
from searchgrpo.train.step_runner import StepRunner
from searchgrpo.train.views import step_events
from searchgrpo.world import load_dataset, make_env

MAX_ISSUES_SHOWN = 20


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    step: int
    reason: str
    last_metrics: dict[str, float]
    last_eval: dict[str, float]


class Trainer:
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
        self.cfg = cfg
        self.dist = Dist(cfg.model.device)
        self.sink: EventSink = sink or (lambda event: None)
        self.control = control or TrainerControl()
        self.resume = resume
        self.allow_changes = allow_changes
        """Resume even though the config or the data changed in ways that alter the optimisation."""
        self.run_dir = Path(run_dir) if run_dir else Path(cfg.train.output_dir) / (cfg.train.run_name or new_run_id())
        self._fresh_id = run_dir is None and cfg.train.run_name is None
        self.on_claimed: Callable[[Path], None] | None = None
        """Called with the run folder once this trainer holds it (the event log opens there)."""
        self.lock: RunLock | None = None
        self.finished: CheckpointInfo | None = None
        """On resume: the checkpoint of a run that has no steps left (then train() does nothing)."""
        self.dataset = dataset
        self.step = 0
        self.last_saved = -1
        self.last_metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self.last_eval_step: int | None = None
        """The step `last_eval` was measured at."""

    # ------------------------------------------------------------------ setup

    def setup(self) -> None:
        """Check, load and claim (see the module docstring): nothing is written before the claim."""
        import torch

        from searchgrpo.policy.model import load_policy, resolve_base
        from searchgrpo.policy.preflight import check_fits_model

        cfg, dist = self.cfg, self.dist
        if not dist.is_main:
            self.sink = lambda event: None  # rank 0 speaks for the job
        template = load_template(cfg.prompt.template, cfg.prompt.clue_format)  # a bad template: one line, at once
        with dist.main_first():  # rank 0 builds the demo world and converts the model once
            if self.dataset is None:
                self.dataset = load_dataset(cfg)
            base = resolve_base(cfg)
        check_fits_model(cfg, base)
        ds = self.dataset
        per = cfg.train.states_per_step
        if per < dist.world:
            raise UserError(f"train.states_per_step = {per} is below the {dist.world} processes: each needs a state")
        if len(ds.train) < per:
            raise UserError(f"{len(ds.train)} train states, fewer than train.states_per_step = {per}")
        self.pool = make_pool(ds.train, cfg)
        self.steps_per_epoch = self.pool.steps_per_epoch
        total = self.steps_per_epoch * cfg.train.epochs
        self.total_steps = min(total, cfg.train.max_steps) if cfg.train.max_steps else total
        for text in ds.issue_summary(MAX_ISSUES_SHOWN):
            self.sink(LogMessage("warning", text))
        fingerprint = data_fingerprint(ds)
        changes: list[tuple[str, Any, Any]] = []
        if self.resume:  # the refusals first, then the lock: a refused resume writes nothing
            changes, warnings = check_resume(self.run_dir, cfg, fingerprint, allow_changes=self.allow_changes)
            warnings += check_prompt(
                self.run_dir, template.digest, str(template.path), allow_changes=self.allow_changes
            )
            if dist.is_main:
                self._lock(self.run_dir)
            for text in warnings:
                self.sink(LogMessage("warning", text))
            newest = newest_usable(self.run_dir)
            if newest is not None:
                check_base_model(newest, cfg.model.base)
            if newest is not None and newest.step >= self.total_steps:
                self.finished = newest
                return
        with dist.main_first():
            self.policy = load_policy(cfg, device=dist.device(cfg.model.device))
        from searchgrpo.policy.samplers import make_sampler

        self.sampler = make_sampler(cfg, self.policy)  # grpo.sampler: local generate or a server
        self.prompts = Prompts(self.policy.tokenizer, cfg, template)
        self.env = make_env(  # a `base` checker judges with the policy's base weights
            cfg, ds, notice=lambda text: self.sink(LogMessage("info", text)), policy=self.policy
        )
        self.radar = JudgeRadar(ds.corpus, ds.labels)
        checker = self.env.checker
        if isinstance(checker, LLMChecker):
            self.sink(
                LogMessage(
                    "info",
                    f"checker: {checker.model} at {checker.client.base_url} "
                    f"({checker.structured_output} output, prompt {PROMPT_VERSION})",
                )
            )
        elif cfg.checker.backend == "base":
            self.sink(LogMessage("info", f"checker: {checker.describe()} on {self.policy.device}"))  # type: ignore[attr-defined]
        params = self.policy.trainable_parameters()
        self.optimizer = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.scheduler = make_scheduler(cfg, self.optimizer, self.total_steps)
        self.runner = StepRunner(
            cfg,
            self.policy,
            self.env,
            self.optimizer,
            self.scheduler,
            self.pool,
            prompt_of=self.prompts,
            dist=dist,
            sampler=self.sampler,
            total_steps=self.total_steps,
            radar=self.radar,
        )
        self._claim()
        if dist.is_main:
            for leftover in remove_interrupted_writes(self.run_dir):
                self.sink(
                    LogMessage(
                        "warning", f"removed {leftover.name}, left by an interrupted checkpoint write or deletion"
                    )
                )
        dist.barrier()
        if self.resume:
            info, note = load_newest_checkpoint(
                self.run_dir,
                model=self.policy.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                base_model=cfg.model.base,
            )
            if note:
                self.sink(LogMessage("warning", note))
            if info is None:
                self.sink(LogMessage("warning", f"{self.run_dir}: no complete checkpoint yet; starting at step 0"))
            else:
                self.step = self.last_saved = info.step
                self.last_eval = info.state.get("last_eval", {})
                self.last_eval_step = info.state.get("last_eval_step")
                restore_pool(self.pool, info.state, info.path)
                self.runner.restore_sampling_weights(info.step, load_sampling_weights(info))
                refreshed = self.pool.load_refreshed(self.run_dir, self.step)
                if refreshed is not None:
                    self.sink(
                        LogMessage(
                            "info", f"training on the {len(self.pool.refreshed)} refreshed states of {refreshed.name}"
                        )
                    )
        if dist.is_main:
            atomic_write_text(self.run_dir / "config.yaml", to_yaml(cfg))
            prompt = write_prompt_record(self.run_dir, template, PromptSizes.of(cfg))
            append_history(
                self.run_dir,
                step=self.step,
                config=cfg.to_dict(),
                data=fingerprint,
                changes=changes,
                allowed=self.allow_changes and any(not is_free(k) for k, _, _ in changes),
                train_questions=sorted({s.question_id for s in ds.train}),
                prompt=prompt,
            )

    def _lock(self, run_dir: Path) -> None:
        self.run_dir, self.lock = claim(run_dir, fresh_id=self._fresh_id and not self.resume, resume=self.resume)
        if self.lock.notice:
            self.sink(LogMessage("warning", self.lock.notice))

    def _claim(self) -> None:
        """Make the run folder this trainer's (`run_lock.claim`), on rank 0; every rank writes there."""
        if self.dist.is_main and self.lock is None:
            self._lock(self.run_dir)
        if self.dist.enabled:
            self.run_dir = Path(self.dist.gather_json(str(self.run_dir))[0])
        if self.on_claimed is not None:
            self.on_claimed(self.run_dir)

    # ------------------------------------------------------------------ data order

    def states_for_step(self, index: int) -> tuple[int, list[Any]]:
        """(epoch, states) of the 0-based step `index` (`StatePool.states_for_step`)."""
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
        """Release what the checker and the sampler hold (embedded servers, the verdict cache), and
        the run's lock."""
        runner = getattr(self, "runner", None)
        if runner is not None:
            runner.close()
        for owner in (getattr(getattr(self, "env", None), "checker", None), getattr(self, "sampler", None)):
            close = getattr(owner, "close", None)
            if callable(close):
                close()
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
        return RunSummary(
            self.run_dir,
            info.step,
            "already finished",
            info.state.get("last_metrics", {}),
            info.state.get("last_eval", {}),
        )

    def _loop(self) -> RunSummary:
        cfg, ds, dist = self.cfg, self.dataset, self.dist
        assert ds is not None
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
            epoch, outcome = self.runner.run(self.step, next_wanted=not self.control.stop.is_set())
            self.step += 1
            for group in step_events(
                self.step,
                epoch,
                outcome.groups,
                outcome.advantages,
                self.env.retriever.corpus,
                self.cfg.env.snippet_chars,
                self.dist,
            ):
                self.sink(group)
            if outcome.nonfinite:
                self.sink(LogMessage("warning", f"step {self.step}: non-finite loss or gradient; update skipped"))
            if (
                cfg.train.refresh_states_every
                and self.step % cfg.train.refresh_states_every == 0
                and self.step < self.total_steps
            ):
                outcome.metrics.update(self.refresh_states())
            self.last_metrics = outcome.metrics
            self._note_missing_probs()
            self.sink(StepFinished(self.step, epoch, self.total_steps, outcome.metrics))
            drift = self.radar.started(outcome.metrics)
            if drift is not None and self._judge_drift(drift):
                reason = "stopped"
                break
            if cfg.train.eval_every and self.step % cfg.train.eval_every == 0:
                self.evaluate()
            if (cfg.train.save_every and self.step % cfg.train.save_every == 0) or dist.any(
                self.control.save_now.is_set()
            ):
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
        note = getattr(self.env.checker, "probs_note", "")
        if self.cfg.reward.soft_labels and note and not getattr(self, "_probs_noted", False):
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
        assert self.dataset is not None
        self.runner.discard()  # a pipelined step's samples were drawn from the pool of before
        self.prompts.forget(self.pool.refreshed)
        return refresh_pool(
            self.cfg, self.policy, self.env, self.dataset, self.pool, self.step, self.run_dir, self.dist, self.sink
        )

    def _requests(self) -> tuple[bool, bool, bool]:
        """(stop, pause, save_now) as agreed by every rank."""
        c, d = self.control, self.dist
        flags = d.sum([c.stop.is_set(), c.pause.is_set(), c.save_now.is_set()])
        return flags[0] > 0, flags[1] > 0, flags[2] > 0

    def _wait_if_paused(self) -> bool:
        """Block while paused; False if a stop was requested."""
        stop, pause, _ = self._requests()
        if stop:
            return False
        if not pause:
            return True
        self.sink(RunPaused(self.step))
        while True:
            stop, pause, save_now = self._requests()
            if stop or not pause:
                break
            if save_now:
                self.control.save_now.clear()
                self.save()
            time.sleep(0.05)
        if stop:
            return False
        self.sink(RunResumed(self.step))
        return True

    # ------------------------------------------------------------------ eval and checkpoints

    def evaluate(self) -> dict[str, float]:
        self.runner.settle()  # a pipelined step's verdicts may be in flight
        ds = self.dataset
        assert ds is not None
        states = ds.eval[: self.cfg.train.eval_states] if self.cfg.train.eval_states else ds.eval
        if not states:
            return {}
        mine = self.dist.shard(states)
        scored = score_policy(
            self.policy.model,
            self.policy.tokenizer,
            self.env,
            mine,
            [self.prompts(s) for s in mine],
            ds.labels,
            max_new_tokens=self.cfg.grpo.max_new_tokens,
            device=self.policy.device,
            batch_size=self.cfg.train.micro_batch_size,
            budgets=self.cfg.eval.budgets,
            progress=lambda done, total: self.sink(TrainEvalProgress(self.step, done, total)),
        )
        rows = [row for part in self.dist.gather_json([state_summary(s) for s in scored]) for row in part]
        self.last_eval, self.last_eval_step = summarise(rows), self.step
        self.sink(EvalFinished(self.step, self.last_eval))
        return self.last_eval

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
