"""Opening the console: `launch_console` is what `searchgrpo tui` and `searchgrpo train` call."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgrpo.config import Config, load_config
from searchgrpo.errors import UserError, one_line
from tui.format import printable
from tui.sources import events_file


def launch_console(
    cfg: Config,
    source: str,
    *,
    start: bool,
    run_dir: Path | None = None,
    resume: bool = False,
    attach: Path | None = None,
    replay: Path | Sequence[Path] | None = None,
) -> int:
    """Run the console until the user quits; returns the process exit code.

    `source` names where `cfg` came from. With `attach` or `replay` (a run folder or its
    events.jsonl) the console follows that run instead of training, and shows the run's own
    config.yaml when there is one. Several `replay` runs are compared: the first is shown in
    full, the others' curves are drawn over its own.
    """
    from tui.app import ConsoleApp

    replays = [replay] if isinstance(replay, (str, Path)) else list(replay or [])
    if attach and replays:
        raise UserError("--attach and --replay are exclusive")
    if attach is None and not replays:
        app = ConsoleApp(cfg, source, start=start, run_dir=run_dir, resume=resume)
        code = run_console(app)
        print_resume_hint(app)
        return code
    paths = [events_file(p) for p in ([attach] if attach else replays)]
    for path in paths[1:] if attach else paths:
        if not path.is_file():
            raise UserError(f"{path}: no events file to replay")
    if attach and not paths[0].is_file() and not paths[0].parent.is_dir():
        raise UserError(f"{paths[0].parent}: no such run folder")
    path = paths[0]
    run_config = path.parent / "config.yaml"
    notice = ""
    if run_config.is_file():
        try:
            cfg, source = load_config(run_config), str(run_config)
        except UserError as exc:  # a run written by another version of the config: its events still show
            notice = (
                f"{run_config}: not a config this version reads ({one_line(exc, 300)}); its events are shown, "
                f"the Config tab shows {source} instead"
            )
    app = ConsoleApp(
        cfg, source, source="attach" if attach else "replay", events_path=path, run_dir=path.parent, compare=paths[1:]
    )
    if notice:
        app.model.note("warning", notice)
    return run_console(app)


def run_console(app: Any, **run_kwargs: Any) -> int:
    """Run the app (SIGTERM and SIGHUP stop its run with a checkpoint: `tui.signals`); its exit
    code: the one it chose, or 1 when it crashed (an exception that Textual caught and printed: the
    process must not report success after it)."""
    app.handle_stop_signals = True
    code = app.run(**run_kwargs)
    if app.return_code:
        return app.return_code
    return code if isinstance(code, int) else 0


def print_resume_hint(app: Any) -> None:
    """After a live console closes on an unfinished run: the command that continues it."""
    run = app.model.run
    if run.info is None or run.status == "completed":
        return
    run_id, run_dir = printable(run.info.run_id, one_line=True), printable(run.info.run_dir, one_line=True)
    with contextlib.suppress(OSError):  # the terminal hung up (SIGHUP): the run's checkpoint is what matters
        print(
            f"run {run_id} {run.status} at step {run.step}/{run.total_steps}; continue it with:\n"
            f"  searchgrpo tui --resume --run-dir {run_dir}",
            file=sys.stderr,
        )
