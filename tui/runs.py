"""Finding runs and their checkpoints on disk, for the eval and merge panes (read-only)."""

from __future__ import annotations

from pathlib import Path

from searchgrpo.train_checkpoints import list_checkpoints


def newest_run(output_dir: str | Path) -> Path | None:
    """The most recently written run folder under `output_dir` (one with a config.yaml)."""
    out = Path(output_dir)
    runs = [p for p in out.glob("*") if (p / "config.yaml").is_file()] if out.is_dir() else []
    return max(runs, key=lambda p: (p / "config.yaml").stat().st_mtime) if runs else None


def checkpoints(run_dir: Path | None) -> list[tuple[str, str]]:
    """(name, path) of the run's complete checkpoints, oldest first.

    Uses `list_checkpoints`, which only reads: `latest_checkpoint` would also delete temporary
    folders, and the run may be writing one right now.
    """
    if run_dir is None:
        return []
    return [(info.path.name, str(info.path)) for info in list_checkpoints(Path(run_dir))]
