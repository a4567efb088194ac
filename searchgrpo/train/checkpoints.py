"""Training checkpoints: written atomically, found and validated on resume.

    runs/<run_id>/checkpoints/step-000020/
        adapter/adapter_model.safetensors   the LoRA weights (peft format, loadable by peft)
        adapter/adapter_config.json
        optimizer.pt, scheduler.pt          torch state dicts, loaded with weights_only=True
        rng.safetensors                     torch CPU (and CUDA) RNG states
        trainer_state.json                  step, epoch, run id, base model, metric history

A checkpoint folder is filled under a temporary name and renamed when complete, so a crash
(SIGKILL, a full disk) never leaves a folder named `step-*` that is incomplete; old checkpoints are
renamed away before they are deleted, for the same reason. A write that fails (a full disk) raises
`CheckpointWriteError`, one line naming the folder, the reason and the checkpoint still intact. `latest_checkpoint`
still validates each candidate and falls back to an older one if a folder is damaged.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.errors import UserError, one_line
from searchgrpo.fileio import TMP_MARK, atomic_dir, remove_stale_temporaries

CHECKPOINT_DIR = "checkpoints"
_STEP_DIR = re.compile(r"^step-(\d+)$")
STATE_FILE = "trainer_state.json"
FORMAT_VERSION = 1


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    step: int
    state: dict[str, Any]

    @property
    def adapter_dir(self) -> Path:
        return self.path / "adapter"


def save_checkpoint(
    run_dir: Path,
    step: int,
    *,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    trainer_state: dict[str, Any],
    keep_last: int,
) -> Path:
    """Write checkpoint `step` atomically, then delete all but the newest `keep_last`."""
    import torch
    from safetensors.torch import save_file

    root = run_dir / CHECKPOINT_DIR
    target = root / checkpoint_name(step)
    try:
        with atomic_dir(target, overwrite=True) as tmp:
            model.save_pretrained(tmp / "adapter", safe_serialization=True)
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
            rng = {"torch_cpu": torch.get_rng_state()}
            if torch.cuda.is_available():
                for i, state in enumerate(torch.cuda.get_rng_state_all()):
                    rng[f"torch_cuda_{i}"] = state
            save_file(rng, str(tmp / "rng.safetensors"))
            state = dict(trainer_state, step=step, format_version=FORMAT_VERSION)
            (tmp / STATE_FILE).write_text(json.dumps(state, indent=2))
    except Exception as exc:  # a full disk, a quota, permissions: the folder was not written
        raise CheckpointWriteError(_write_failure(run_dir, target, exc)) from exc
    for old in list_checkpoints(run_dir)[:-keep_last]:
        _delete(old.path)
    return target


class CheckpointWriteError(UserError):
    """A checkpoint could not be written; the previous complete checkpoint is untouched."""


def _write_failure(run_dir: Path, target: Path, exc: Exception) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(f"{type(exc).__name__}: {exc}", 200)
    full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or "No space left" in str(exc)
    kept = list_checkpoints(run_dir)
    previous = f"the newest complete checkpoint, {kept[-1].path.name}, is intact" if kept else "no earlier checkpoint"
    fix = "free disk space" if full else "fix the cause"
    return f"{target}: checkpoint not written ({reason}); {previous}; {fix}, then continue with --resume"


def _delete(path: Path) -> None:
    """Delete a checkpoint folder: renamed out of the step-* namespace first, so that a kill during
    the deletion leaves a temporary (removed on resume), never a half-deleted step-* folder."""
    doomed = path.with_name(path.name + TMP_MARK + "deleted")
    shutil.rmtree(doomed, ignore_errors=True)
    try:
        os.replace(path, doomed)
    except OSError:
        return
    shutil.rmtree(doomed, ignore_errors=True)


def _read(path: Path) -> CheckpointInfo | None:
    m = _STEP_DIR.match(path.name)
    if not m or not path.is_dir() or path.is_symlink():
        return None
    try:
        state = json.loads((path / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    required = [path / "adapter" / "adapter_config.json", path / "adapter" / "adapter_model.safetensors",
                path / "optimizer.pt", path / "scheduler.pt", path / "rng.safetensors"]
    if not isinstance(state, dict) or state.get("step") != int(m.group(1)) or not all(p.is_file() for p in required):
        return None
    return CheckpointInfo(path, int(m.group(1)), state)


def list_checkpoints(run_dir: Path) -> list[CheckpointInfo]:
    """Complete checkpoints of a run, oldest first."""
    root = run_dir / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    found = [info for p in root.iterdir() if (info := _read(p)) is not None]
    return sorted(found, key=lambda c: c.step)


def latest_checkpoint(run_dir: Path) -> CheckpointInfo | None:
    """The newest complete checkpoint (read-only: safe while another process is writing one)."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def remove_interrupted_writes(run_dir: Path) -> list[Path]:
    """Delete leftovers of checkpoint writes that a killed process never finished.

    Only the process that owns the run may call this, before it starts writing."""
    return remove_stale_temporaries(run_dir / CHECKPOINT_DIR)


def load_training_state(info: CheckpointInfo, *, model: Any, optimizer: Any, scheduler: Any) -> None:
    """Restore adapter weights, optimizer, scheduler and RNG states from a checkpoint."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    try:
        weights = load_file(str(info.adapter_dir / "adapter_model.safetensors"))
        result = set_peft_model_state_dict(model, weights)
        unexpected = getattr(result, "unexpected_keys", [])
        if unexpected:
            raise UserError(f"{info.path}: adapter does not match the model ({len(unexpected)} unexpected weights)")
        optimizer.load_state_dict(torch.load(info.path / "optimizer.pt", weights_only=True, map_location="cpu"))
        scheduler.load_state_dict(torch.load(info.path / "scheduler.pt", weights_only=True, map_location="cpu"))
        rng = load_file(str(info.path / "rng.safetensors"))
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"{info.path}: checkpoint could not be loaded "
                        f"({one_line(f'{type(exc).__name__}: {exc}', 300)})") from None
    torch.set_rng_state(rng["torch_cpu"])
    if torch.cuda.is_available():
        cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)


def checkpoint_adapter(path: str | Path, base_model: str, *, flag: str = "--checkpoint") -> Path:
    """The adapter folder of a checkpoint (`runs/<id>/checkpoints/step-N`, or an adapter folder)
    that eval and merge may load; one clear line, naming `flag`, when it is not one or was trained
    on another base model than `base_model` (`model.base`)."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{flag} {p}: not found")
    adapter = p / "adapter" if (p / "adapter").is_dir() else p
    if not (adapter / "adapter_config.json").is_file():
        if (p / CHECKPOINT_DIR).is_dir():
            raise UserError(f"{flag} {p}: this is a run folder; give one of its checkpoints/step-* folders")
        raise UserError(f"{flag} {p}: not a checkpoint (no adapter/adapter_config.json)")
    if not (adapter / "adapter_model.safetensors").is_file():
        raise UserError(f"{flag} {p}: no adapter_model.safetensors (adapters are loaded from safetensors "
                        "only, never from pickled .bin files)")
    state_file = p / STATE_FILE
    if state_file.is_file():
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{state_file}: not valid JSON ({one_line(exc, 120)})") from None
        trained_on = state.get("base_model") if isinstance(state, dict) else None
        if trained_on is not None and trained_on != base_model:
            raise UserError(f"{flag} {p}: trained on base model {trained_on!r}, but model.base = {base_model!r}")
    return adapter
