"""Finding runs and their checkpoints on disk, for the eval and merge panes (read-only)."""

from __future__ import annotations

from pathlib import Path

from searchgrpo import runs


def newest_run(output_dir: str | Path) -> Path | None:
    """The newest run folder under `output_dir` (`searchgrpo.runs.newest_run`)."""
    return runs.newest_run(output_dir)


def checkpoints(run_dir: Path | None) -> list[tuple[str, str]]:
    """(name, path) of the run's complete checkpoints, oldest first."""
    return [(info.path.name, str(info.path)) for info in runs.run_checkpoints(run_dir)]
