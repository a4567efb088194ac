"""The GRPO training loop: data order, steps, evaluation, checkpoints, resume and control.

`Trainer(cfg, sink=..., control=...).train()` runs a whole run and publishes typed events to
`sink`. It never prints and never imports the console. `control` lets another thread pause,
resume, stop (with a checkpoint) or ask for a checkpoint now; every request is honoured between
steps.

Reproducibility: the torch RNG is re-seeded from (train.seed, step) at the start of every step and
the data order of each epoch is a seeded permutation, so a run resumed from a checkpoint replays
exactly the numbers an uninterrupted run produces (on CPU, bit for bit).
"""

from __future__ import annotations

import hashlib
import math
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.config import Config, to_yaml
from searchgrpo.control import TrainerControl
from searchgrpo.data import Dataset, load_dataset, make_env
from searchgrpo.scoring import score_policy, summarise
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
)
from searchgrpo.fileio import atomic_write_text
from searchgrpo.grpo_step import grpo_step
from searchgrpo.rollout import encode_prompt
from searchgrpo.train_checkpoints import latest_checkpoint, load_training_state, save_checkpoint

MAX_ISSUES_SHOWN = 20


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, stable across processes and Python versions."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big") >> 1


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


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
    ) -> None:
        self.cfg = cfg
        self.sink: EventSink = sink or (lambda event: None)
        self.control = control or TrainerControl()
        self.resume = resume
        self.run_dir = Path(run_dir) if run_dir else Path(cfg.train.output_dir) / (cfg.train.run_name or new_run_id())
        self.dataset = dataset
        self.step = 0
        self.last_saved = -1
        self.last_metrics: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self._prompts: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ setup

    def setup(self) -> None:
        import torch
        from transformers import get_scheduler

        cfg = self.cfg
        if self.dataset is None:
            self.dataset = load_dataset(cfg)
        ds = self.dataset
        shown = ds.issues.issues[:MAX_ISSUES_SHOWN]
        for issue in shown:
            self.sink(LogMessage("warning", f"skipped {issue}"))
        if len(ds.issues) > len(shown):
            self.sink(LogMessage("warning", f"... and {len(ds.issues) - len(shown)} more malformed inputs skipped"))
        self.env = make_env(cfg, ds)

        from searchgrpo.model import load_policy

        self.policy = load_policy(cfg)
        params = self.policy.trainable_parameters()
        self.optimizer = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        self.steps_per_epoch = math.ceil(len(ds.train) / cfg.train.states_per_step)
        total = self.steps_per_epoch * cfg.train.epochs
        self.total_steps = min(total, cfg.train.max_steps) if cfg.train.max_steps else total
        self.scheduler = get_scheduler(
            cfg.train.lr_scheduler,
            self.optimizer,
            num_warmup_steps=cfg.train.warmup_steps * cfg.grpo.num_iterations,
            num_training_steps=self.total_steps * cfg.grpo.num_iterations,
        )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.resume:
            info = latest_checkpoint(self.run_dir)
            if info is None:
                self.sink(LogMessage("warning", f"{self.run_dir}: no complete checkpoint yet; starting at step 0"))
            else:
                if info.state.get("base_model") not in (None, cfg.model.base):
                    from searchgrpo.errors import UserError

                    raise UserError(
                        f"{info.path}: checkpoint was trained on {info.state.get('base_model')!r}, "
                        f"but model.base = {cfg.model.base!r}"
                    )
                load_training_state(info, model=self.policy.model, optimizer=self.optimizer, scheduler=self.scheduler)
                self.step = self.last_saved = info.step
                self.last_eval = info.state.get("last_eval", {})
        atomic_write_text(self.run_dir / "config.yaml", to_yaml(cfg))

    # ------------------------------------------------------------------ data order

    def states_for_step(self, index: int) -> tuple[int, list[Any]]:
        """(epoch, states) of the 0-based step `index`: a seeded permutation per epoch."""
        import numpy as np

        train = self.dataset.train  # type: ignore[union-attr]
        per = self.cfg.train.states_per_step
        epoch, b = divmod(index, self.steps_per_epoch)
        order = np.random.default_rng(derive_seed(self.cfg.train.seed, "epoch", epoch)).permutation(len(train))
        return epoch, [train[i] for i in order[b * per:(b + 1) * per]]

    def prompt_ids(self, state: Any) -> list[int]:
        ids = self._prompts.get(state.state_id)
        if ids is None:
            ids = self._prompts[state.state_id] = encode_prompt(
                self.policy.tokenizer, state, max_rows=self.cfg.data.max_table_rows,
                max_tokens=self.cfg.grpo.max_prompt_tokens, min_clues=self.cfg.env.min_clues,
                max_clues=self.cfg.env.max_clues,
            )
        return ids

    # ------------------------------------------------------------------ loop

    def train(self) -> RunSummary:
        """Run to the end (or until stopped). Emits RunFailed and re-raises on error."""
        try:
            self.setup()
            return self._loop()
        except BaseException as exc:
            self.sink(RunFailed(self.step, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
            raise

    def _loop(self) -> RunSummary:
        import torch

        cfg, ds = self.cfg, self.dataset
        assert ds is not None
        self.sink(
            RunStarted(
                run_id=self.run_dir.name, run_dir=str(self.run_dir), base_model=cfg.model.base,
                device=str(self.policy.device), total_steps=self.total_steps, steps_per_epoch=self.steps_per_epoch,
                epochs=cfg.train.epochs, num_train_states=len(ds.train), num_eval_states=len(ds.eval),
                start_step=self.step, config=cfg.to_dict(),
            )
        )
        reason = "completed"
        while self.step < self.total_steps:
            if not self._wait_if_paused():
                reason = "stopped"
                break
            epoch, states = self.states_for_step(self.step)
            torch.manual_seed(derive_seed(cfg.train.seed, "step", self.step))
            prompts = [self.prompt_ids(s) for s in states]
            outcome = grpo_step(cfg, self.policy, self.env, self.optimizer, self.scheduler, states, prompts,
                                step=self.step + 1, epoch=epoch)
            self.step += 1
            for group in outcome.groups:
                self.sink(group)
            if outcome.nonfinite:
                self.sink(LogMessage("warning", f"step {self.step}: non-finite loss or gradient; update skipped"))
            self.last_metrics = outcome.metrics
            self.sink(StepFinished(self.step, epoch, self.total_steps, outcome.metrics))
            if cfg.train.eval_every and self.step % cfg.train.eval_every == 0:
                self.evaluate()
            if (cfg.train.save_every and self.step % cfg.train.save_every == 0) or self.control.save_now.is_set():
                self.control.save_now.clear()
                self.save()
            if self.control.stop.is_set():
                reason = "stopped"
                break
        if reason == "completed" and cfg.train.eval_every and self.step % cfg.train.eval_every != 0:
            self.evaluate()
        if self.step != self.last_saved and self.step > 0:
            self.save()
        self.sink(RunFinished(self.step, reason))
        return RunSummary(self.run_dir, self.step, reason, self.last_metrics, self.last_eval)

    def _wait_if_paused(self) -> bool:
        """Block while paused; False if a stop was requested."""
        if self.control.stop.is_set():
            return False
        if not self.control.pause.is_set():
            return True
        self.sink(RunPaused(self.step))
        while self.control.pause.is_set() and not self.control.stop.is_set():
            if self.control.save_now.is_set():
                self.control.save_now.clear()
                self.save()
            time.sleep(0.05)
        if self.control.stop.is_set():
            return False
        self.sink(RunResumed(self.step))
        return True

    # ------------------------------------------------------------------ eval and checkpoints

    def evaluate(self) -> dict[str, float]:
        ds = self.dataset
        assert ds is not None
        states = ds.eval[: self.cfg.train.eval_states] if self.cfg.train.eval_states else ds.eval
        if not states:
            return {}
        scored = score_policy(
            self.policy.model, self.policy.tokenizer, self.env, states, [self.prompt_ids(s) for s in states],
            ds.labels, max_new_tokens=self.cfg.grpo.max_new_tokens, device=self.policy.device,
            batch_size=self.cfg.train.micro_batch_size,
        )
        self.last_eval = summarise(scored)
        self.sink(EvalFinished(self.step, self.last_eval))
        return self.last_eval

    def save(self) -> Path:
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
                "time": time.time(),
            },
            keep_last=self.cfg.train.keep_last,
        )
        self.last_saved = self.step
        self.sink(CheckpointSaved(self.step, str(path)))
        return path
