"""What a trainer writes and reads in its run folder as it starts, once it holds the folder.

`Trainer.setup` claims the folder first (`run_lock`); then `remove_leftovers` clears what an
interrupted checkpoint write left, `restore_newest` (on --resume) puts the newest checkpoint that
loads back in place (adapter, optimiser, schedule, the state pool's memory, the next step's
sampling weights) and `record_start` writes the run's config.yaml, its prompt
(`env.prompt_record`) and the start's entry in the run's history (`run_history`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgrpo.config import Config, to_yaml
from searchgrpo.data.traces import SearchState
from searchgrpo.env.prompt_record import PromptSizes, write_prompt_record
from searchgrpo.env.prompt_template import PromptTemplate
from searchgrpo.events import EventSink, LogMessage
from searchgrpo.fileio import atomic_write_text
from searchgrpo.train.checkpoints import (
    CheckpointInfo,
    load_newest_checkpoint,
    load_sampling_weights,
    remove_interrupted_writes,
)
from searchgrpo.train.informative_pool import restore_pool
from searchgrpo.train.run_history import append_history, is_free
from searchgrpo.train.state_pool import StatePool
from searchgrpo.train.step_runner import StepRunner

if TYPE_CHECKING:
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    from searchgrpo.policy.model import Policy


def remove_leftovers(run_dir: Path, sink: EventSink) -> None:
    """Remove what an interrupted checkpoint write or deletion left, saying so."""
    for leftover in remove_interrupted_writes(run_dir):
        sink(LogMessage("warning", f"removed {leftover.name}, left by an interrupted checkpoint write or deletion"))


def restore_newest(
    run_dir: Path,
    cfg: Config,
    *,
    policy: Policy,
    optimizer: Optimizer,
    scheduler: LRScheduler,
    pool: StatePool,
    runner: StepRunner,
    sink: EventSink,
) -> CheckpointInfo | None:
    """Load the newest checkpoint that loads into the policy, optimiser and schedule, and give the
    pool and the runner what it saved; None (and a warning) when the run has none yet."""
    info, note = load_newest_checkpoint(
        run_dir, model=policy.model, optimizer=optimizer, scheduler=scheduler, base_model=cfg.model.base
    )
    if note:
        sink(LogMessage("warning", note))
    if info is None:
        sink(LogMessage("warning", f"{run_dir}: no complete checkpoint yet; starting at step 0"))
        return None
    restore_pool(pool, info.state, info.path)
    runner.restore_sampling_weights(info.step, load_sampling_weights(info))
    refreshed = pool.load_refreshed(run_dir, info.step)
    if refreshed is not None:
        sink(LogMessage("info", f"training on the {len(pool.refreshed)} refreshed states of {refreshed.name}"))
    return info


def record_start(
    run_dir: Path,
    cfg: Config,
    template: PromptTemplate,
    *,
    step: int,
    fingerprint: dict[str, str],
    changes: list[tuple[str, Any, Any]],
    allow_changes: bool,
    train: list[SearchState],
) -> None:
    """Write config.yaml and the prompt record, and append this start to the run's history."""
    atomic_write_text(run_dir / "config.yaml", to_yaml(cfg))
    prompt = write_prompt_record(run_dir, template, PromptSizes.of(cfg))
    append_history(
        run_dir,
        step=step,
        config=cfg.to_dict(),
        data=fingerprint,
        changes=changes,
        allowed=allow_changes and any(not is_free(k) for k, _, _ in changes),
        train_questions=sorted({s.question_id for s in train}),
        prompt=prompt,
    )
