"""Training checkpoints: written atomically, found and validated on resume.

    runs/<run_id>/checkpoints/step-000020/
        adapter/adapter_model.safetensors   the LoRA weights (peft format, loadable by peft)
        adapter/adapter_config.json
        optimizer.pt, scheduler.pt          torch state dicts, loaded with weights_only=True
        rng.safetensors                     torch CPU (and CUDA) RNG states
        trainer_state.json                  step, epoch, run id, base model, metric history
        sampling_weights.safetensors        (pipelined runs) the adapter the next step's samples
                                            are drawn with: the weights before the last update

A checkpoint folder is filled under a temporary name and renamed when complete, so a crash
(SIGKILL, a full disk) never leaves a folder named `step-*` that is incomplete; old checkpoints are
renamed away before they are deleted, for the same reason. A write that fails (a full disk) raises
`CheckpointWriteError`, one line naming the folder, the reason and the checkpoint still intact.
A full disk is told by the disk, not by the library's words: torch reports one as "unexpected pos
576 vs 534", with no errno, so the free space is measured when a write fails (before the partial
folder is removed) and compared with what the checkpoint's tensors need; a disk without room for
them is refused before anything is written. Adapter weights that are not all finite are never
written (`NonFiniteWeights`): the run stops at that checkpoint and names the steps in question.

`resume_candidates` lists every `step-*` folder newest first with the reason a damaged one cannot
be used, so that the trainer can announce a fall back to an older checkpoint, naming both.
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
SAMPLING_WEIGHTS = "sampling_weights.safetensors"
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
    sampling_weights: dict[str, Any] | None = None,
) -> Path:
    """Write checkpoint `step` atomically, then delete all but the newest `keep_last`.
    `sampling_weights`: the adapter the next step's samples are drawn with, where it is not the
    current one (`StepRunner.sampling_weights`)."""
    import torch
    from safetensors.torch import save_file

    root = run_dir / CHECKPOINT_DIR
    target = root / checkpoint_name(step)
    _check_finite(run_dir, step, model)
    needed = _tensor_bytes(model, optimizer)
    root.mkdir(parents=True, exist_ok=True)
    if free_bytes(root) < needed:
        raise CheckpointWriteError(
            _write_failure(
                run_dir, target, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), needed=needed, free=free_bytes(root)
            )
        )
    free_at_failure: list[int] = []
    try:
        with atomic_dir(target, overwrite=True) as tmp:
            try:
                model.save_pretrained(tmp / "adapter", safe_serialization=True)
                torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
                torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
                rng = {"torch_cpu": torch.get_rng_state()}
                if torch.cuda.is_available():
                    for i, cuda_state in enumerate(torch.cuda.get_rng_state_all()):
                        rng[f"torch_cuda_{i}"] = cuda_state
                save_file(rng, str(tmp / "rng.safetensors"))
                if sampling_weights is not None:
                    save_file({k: v.contiguous() for k, v in sampling_weights.items()}, str(tmp / SAMPLING_WEIGHTS))
                state = dict(trainer_state, step=step, format_version=FORMAT_VERSION)
                (tmp / STATE_FILE).write_text(json.dumps(state, indent=2))
            except Exception:
                free_at_failure.append(free_bytes(tmp))  # while the partial files still fill the disk
                raise
    except Exception as exc:  # a full disk, a quota, permissions: the folder was not written
        free = free_at_failure[0] if free_at_failure else free_bytes(root)
        raise CheckpointWriteError(_write_failure(run_dir, target, exc, needed=needed, free=free)) from exc
    for old in list_checkpoints(run_dir)[:-keep_last]:
        _delete(old.path)
    return target


class CheckpointWriteError(UserError):
    """A checkpoint could not be written; the previous complete checkpoint is untouched."""


class NonFiniteWeights(UserError):
    """The adapter weights hold NaN or inf: the checkpoint is not written and the run stops."""


def free_bytes(path: Path) -> int:
    """Bytes this process may still write on the file system holding `path` (a huge number when it
    cannot be told)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 1 << 62
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail  # root may write into reserved blocks
    return blocks * st.f_frsize


def _tensor_bytes(model: Any, optimizer: Any) -> int:
    """What a checkpoint's tensors take at least: the trainable weights and the optimizer's state."""
    total = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    for state in optimizer.state.values():
        for value in state.values():
            if hasattr(value, "element_size"):
                total += value.numel() * value.element_size()
    return total


def _check_finite(run_dir: Path, step: int, model: Any) -> None:
    import torch

    weights = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    bad = [n for n, p in weights if not bool(torch.isfinite(p.detach()).all())]
    if bad:
        kept = list_checkpoints(run_dir)
        since = (
            f"after step {kept[-1].step} (the newest complete checkpoint, {kept[-1].path.name})"
            if kept
            else "since the start"
        )
        raise NonFiniteWeights(
            f"step {step}: {len(bad)} of {len(weights)} adapter tensors hold NaN or inf (first: {bad[0]}); they went "
            f"bad {since} and by step {step}; checkpoint {checkpoint_name(step)} not written, the run stops here; "
            "resume from the newest checkpoint with a lower train.lr or train.max_grad_norm (--allow-changes)"
        )


def _is_full_disk(exc: BaseException, needed: int, free: int) -> bool:
    """ENOSPC/EDQUOT anywhere in the exception's chain, or a disk left without room for the
    checkpoint's tensors when the write failed (torch says only "unexpected pos ...")."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(words in str(seen) for words in ("No space left", "Disk quota exceeded", "StorageFull")):
            return True
        seen = seen.__cause__ or seen.__context__
    return free < max(needed, 1 << 20)


def _write_failure(run_dir: Path, target: Path, exc: Exception, *, needed: int, free: int) -> str:
    full = _is_full_disk(exc, needed, free)
    if full:
        reason = "No space left on device"
        if free < needed:
            reason += f": {free / 2**20:.2f} MiB free, its tensors alone need {needed / 2**20:.2f} MiB"
    elif isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror
    else:
        reason = one_line(f"{type(exc).__name__}: {exc}", 200)
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


def inspect_checkpoint(path: Path) -> CheckpointInfo | str:
    """The checkpoint in `path`, or why it cannot be one (a damaged or incomplete folder)."""
    m = _STEP_DIR.match(path.name)
    if not m or not path.is_dir() or path.is_symlink():
        return "not a step-N folder"
    try:
        state = json.loads((path / STATE_FILE).read_text())
    except (OSError, ValueError) as exc:
        return f"{STATE_FILE}: {one_line(exc, 120)}"
    if not isinstance(state, dict) or state.get("step") != int(m.group(1)):
        return f"{STATE_FILE} does not name step {int(m.group(1))}"
    required = [
        path / "adapter" / "adapter_config.json",
        path / "adapter" / "adapter_model.safetensors",
        path / "optimizer.pt",
        path / "scheduler.pt",
        path / "rng.safetensors",
    ]
    missing = [str(p.relative_to(path)) for p in required if not p.is_file()]
    if missing:
        return f"{missing[0]} is missing"
    return CheckpointInfo(path, int(m.group(1)), state)


def _read(path: Path) -> CheckpointInfo | None:
    info = inspect_checkpoint(path)
    return info if isinstance(info, CheckpointInfo) else None


def resume_candidates(run_dir: Path) -> list[tuple[Path, CheckpointInfo | str]]:
    """Every step-N folder of the run, newest first, with its checkpoint or why it is unusable."""
    root = run_dir / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    numbered = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name))]
    numbered.sort(key=lambda item: item[0], reverse=True)
    return [(p, inspect_checkpoint(p)) for _, p in numbered]


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
        raise UserError(
            f"{info.path}: checkpoint could not be loaded ({one_line(f'{type(exc).__name__}: {exc}', 300)})"
        ) from None
    torch.set_rng_state(rng["torch_cpu"])
    if torch.cuda.is_available():
        cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)


def load_sampling_weights(info: CheckpointInfo) -> dict[str, Any] | None:
    """The checkpoint's `sampling_weights` (None when it has none: the next step samples with the
    checkpoint's adapter)."""
    from safetensors.torch import load_file

    path = info.path / SAMPLING_WEIGHTS
    if not path.is_file():
        return None
    try:
        return load_file(str(path))
    except Exception as exc:
        raise UserError(f"{path}: could not be loaded ({one_line(f'{type(exc).__name__}: {exc}', 300)})") from None


def check_base_model(info: CheckpointInfo, base_model: str) -> None:
    """Refuse a checkpoint trained on another base model (one line naming both)."""
    trained_on = info.state.get("base_model")
    if trained_on not in (None, base_model):
        raise UserError(f"{info.path}: checkpoint was trained on {trained_on!r}, but model.base = {base_model!r}")


def newest_usable(run_dir: Path) -> CheckpointInfo | None:
    """The newest checkpoint that looks complete (read-only: nothing is loaded)."""
    return next((info for _, info in resume_candidates(run_dir) if isinstance(info, CheckpointInfo)), None)


def load_newest_checkpoint(
    run_dir: Path, *, model: Any, optimizer: Any, scheduler: Any, base_model: str
) -> tuple[CheckpointInfo | None, str]:
    """Load the newest checkpoint that loads, newest first. Returns it (None when the run has none
    yet) and a notice naming the damaged ones passed over and the one used ('' when none was
    skipped). When none loads, raises the newest one's error (one line)."""
    candidates = resume_candidates(run_dir)
    skipped: list[str] = []
    first_error: UserError | None = None
    for path, info in candidates:
        if isinstance(info, str):
            skipped.append(f"{path.name} ({info})")
            continue
        check_base_model(info, base_model)
        try:
            load_training_state(info, model=model, optimizer=optimizer, scheduler=scheduler)
        except UserError as exc:
            first_error = first_error or exc
            skipped.append(f"{path.name} ({one_line(exc, 160)})")
            continue
        note = (f"{'; '.join(skipped)}: damaged; resuming from the older {info.path.name} instead") if skipped else ""
        return info, note
    if first_error is not None and len(skipped) == 1:
        raise first_error
    if skipped:
        raise UserError(
            f"{run_dir}: none of its checkpoints can be loaded ({'; '.join(skipped[:3])}); "
            "move the damaged step-* folders away to start the run over"
        )
    return None, ""


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
        raise UserError(
            f"{flag} {p}: no adapter_model.safetensors (adapters are loaded from safetensors "
            "only, never from pickled .bin files)"
        )
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
