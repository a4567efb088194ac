"""Opening the console: `launch_console` is what `searchgrpo tui` and `searchgrpo train` call."""

from __future__ import annotations

from pathlib import Path

from searchgrpo.config import Config, load_config
from searchgrpo.errors import UserError
from tui.sources import events_file


def launch_console(
    cfg: Config,
    source: str,
    *,
    start: bool,
    run_dir: Path | None = None,
    resume: bool = False,
    attach: Path | None = None,
    replay: Path | None = None,
) -> int:
    """Run the console until the user quits; returns the process exit code.

    `source` names where `cfg` came from. With `attach` or `replay` (a run folder or its
    events.jsonl) the console follows that run instead of training, and shows the run's own
    config.yaml when there is one.
    """
    from tui.app import ConsoleApp

    follow = attach or replay
    if attach and replay:
        raise UserError("--attach and --replay are exclusive")
    if follow is None:
        app = ConsoleApp(cfg, source, start=start, run_dir=run_dir, resume=resume)
    else:
        path = events_file(follow)
        if replay and not path.is_file():
            raise UserError(f"{path}: no events file to replay")
        if attach and not path.is_file():
            if not path.parent.is_dir():
                raise UserError(f"{path.parent}: no such run folder")
        run_config = path.parent / "config.yaml"
        if run_config.is_file():
            cfg, source = load_config(run_config), str(run_config)
        app = ConsoleApp(cfg, source, source="attach" if attach else "replay", events_path=path,
                         run_dir=path.parent)
    code = app.run()
    return code if isinstance(code, int) else 0
