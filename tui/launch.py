"""Opening the console: `launch_console` is what `searchgrpo tui` and `searchgrpo train` call."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
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


def run_console(app: Any, *, exit_process: Callable[[int], None] = os._exit, **run_kwargs: Any) -> int:
    """Run the app (SIGTERM and SIGHUP stop its run with a checkpoint: `tui.signals`); its exit
    code: the one it chose, or 1 when it crashed (an exception that Textual caught and printed: the
    process must not report success after it).

    The app runs on a loop of its own, which is closed without waiting for the loop's worker
    threads (asyncio.run would wait for them: the screen went blank while a merge finished, and a
    Ctrl-C then left a traceback and an abort). `let_go` then waits for them as long as the user's
    choice allows, and ends the process itself if they do not stop."""
    app.handle_stop_signals = True
    loop = asyncio.new_event_loop()
    try:
        code = app.run(loop=loop, **run_kwargs)
    finally:
        loop.close()  # the default executor is shut down without waiting
    result = app.return_code if app.return_code else (code if isinstance(code, int) else 0)
    let_go(app, result, exit_process=exit_process)
    return result


LET_GO_S = 2.0
"""After `q` and "quit now" (or cancel the job and quit): how long the jobs' threads are given to
stop (they check their cancel flag between decode steps) before the process ends anyway."""


def let_go(app: Any, code: int, *, exit_process: Callable[[int], None] = os._exit, grace_s: float = LET_GO_S) -> None:
    """Wait for the console's training and jobs to return once it has closed (the terminal is
    restored by then).

    After "quit now" they are given `grace_s`; one still running then is left behind: the process
    ends at once (`os._exit`: a thread in native code at interpreter exit aborts the process with
    "terminate called without an active exception"), after saying what was kept. Otherwise (a stop
    with a checkpoint: the step is finishing) the wait is as long as the step takes, and a Ctrl-C
    ends it the same way. Nothing is lost either way: checkpoints, reports and merged folders are
    written atomically, and the run's lock is released with the process."""
    work = app.unfinished_work()
    if not work:
        return
    names = " and ".join(dict.fromkeys(name for name, _ in work))
    deadline = time.monotonic() + grace_s if app.quit_now else None
    if deadline is None:
        _say(f"waiting for the {names} to finish its step and write its checkpoint (Ctrl-C: quit now)")
    try:
        for _, ended in work:
            ended.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
    except KeyboardInterrupt:
        pass
    left = [name for name, ended in work if not ended.is_set()]
    if not left:
        return
    _say(f"quit while the {' and '.join(dict.fromkeys(left))} ran: {kept_note(app, left)}")
    print_resume_hint(app)
    with contextlib.suppress(OSError):
        sys.stdout.flush()
        sys.stderr.flush()
    exit_process(code)


def kept_note(app: Any, left: list[str]) -> str:
    """What a console that quit without waiting for `left` (training, eval, ...) kept, in words."""
    run = app.model.run
    parts = []
    if "training" in left:
        newest = f"{run.checkpoints[-1].path}" if run.checkpoints else "none"
        parts.append(f"training's newest checkpoint is kept ({newest}); the step in progress is not")
    parts += [f"the {name} in progress wrote nothing" for name in left if name != "training"]
    return "; ".join(parts)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # the terminal hung up
        print(printable(text, one_line=True), file=sys.stderr, flush=True)


def print_resume_hint(app: Any) -> None:
    """After a live console closes on an unfinished run: the command that continues it."""
    run = app.model.run
    if run.info is None or run.status == "completed":
        return
    run_id, run_dir = printable(run.info.run_id, one_line=True), printable(run.info.run_dir, one_line=True)
    state = f"quit during step {run.step + 1}" if run.active else f"{run.status} at step {run.step}"
    with contextlib.suppress(OSError):  # the terminal hung up (SIGHUP): the run's checkpoint is what matters
        print(
            f"run {run_id} {state}/{run.total_steps}; continue it with:\n  searchgrpo tui --resume --run-dir {run_dir}",
            file=sys.stderr,
        )
