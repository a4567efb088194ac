"""What every command shares: the `--config` and `--set` options, loading the config they name
(a run's own config.yaml on --resume), and ending after Ctrl-C with what was kept said."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from searchgrpo.config import Config, load_config
from searchgrpo.errors import printable

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config (default: ./config.yaml if present).")
]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="Override a key: --set grpo.beta=0.0 (repeatable).")
]


def resolve_config_path(path: Path | None) -> Path | None:
    if path is not None:
        return path
    default = Path("config.yaml")
    return default if default.is_file() else None


def load(config: Path | None, overrides: list[str] | None, extra: tuple[str, ...] = ()) -> tuple[Config, str]:
    path = resolve_config_path(config)
    cfg = load_config(path, [*extra, *(overrides or [])])
    return cfg, str(path) if path else "built-in defaults"


def load_run(
    config: Path | None, overrides: list[str] | None, extra: tuple[str, ...], resume: bool, run_dir: Path | None
) -> tuple[Config, str, Path | None]:
    """(config, its source, run folder): with `resume`, the run's own config.yaml plus the overrides."""
    cfg, source = load(config, overrides, extra)
    if not resume:
        return cfg, source, run_dir
    from searchgrpo.runs import find_run_to_resume

    run_dir = find_run_to_resume(cfg, run_dir)
    return load_config(run_dir / "config.yaml", [*extra, *(overrides or [])]), str(run_dir / "config.yaml"), run_dir


def interrupted(note: str) -> None:
    """After Ctrl-C: say what was kept, then end as an abort does (exit 130, `main`)."""
    typer.secho(printable(note), fg=typer.colors.YELLOW, err=True)
    raise KeyboardInterrupt
