"""SIGTERM and SIGHUP to the console: the run stops the way `x` then `q` stop it.

A console that is told to end (SIGTERM from a scheduler or `kill`, SIGHUP when its terminal
closes) asks the trainer to stop after the current step with a checkpoint and quits once it has,
so the terminal leaves the alternate screen, `searchgrpo tui` prints the command that resumes the
run, and the run's lock is released. A second signal quits at once (the trainer still ends its
step and writes its checkpoint before the process exits: a thread cannot be killed). A console
that is not training (idle, attached, replaying) quits at once.

A terminal that hung up is gone: every write to it fails (EIO), and Textual, whose output thread
dies on the first failure, would block for ever on the next one. So on SIGHUP with the terminal
gone, the standard streams are pointed at /dev/null first; once the training thread has ended
(its checkpoint written, its lock released) the console is given `EXIT_GRACE_S` to close by
itself, and the process then ends with the run's exit code (`os._exit`: nothing is left to write).
It rarely closes by itself: once Textual's output queue has filled behind the dead thread, its
next write waits for ever (seen with py-spy: the main thread in `WriterThread.write`).

The handlers are installed on the console's own event loop (`install`, from `ConsoleApp.on_mount`
when `searchgrpo tui` launched it), so they run between the loop's callbacks, never inside one.
Everything about signals in the console is in this module; the keys (`x`, `q`, Ctrl-C) are the
app's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""The signals that stop the console's run with a checkpoint (SIGINT: `kill -INT`; a Ctrl-C typed
in the console is a key, which says how to quit)."""
EXIT_GRACE_S = 1.0
"""After a hang-up, how long the console may take to close by itself once training has ended. Short:
what mattered (the checkpoint, the lock) is done by then, and the output goes to /dev/null; it was
10 s, and a hung-up console always took those 10 s to end."""


def terminal_gone(fd: int = 2) -> bool:
    """Whether the terminal on `fd` hung up (a write of nothing fails with EIO)."""
    try:
        os.write(fd, b"")
    except OSError:
        return True
    return False


def detach_from_terminal() -> None:
    """Point stdin, stdout and stderr at /dev/null, so that no write blocks or fails any more."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)


def end_after_training(app: Any) -> None:
    """In a daemon thread: wait for the training thread (its checkpoint and lock), give the console
    EXIT_GRACE_S to close, then end the process with the run's exit code."""

    def watch() -> None:
        done: threading.Event | None = getattr(app, "training_done", None)
        if done is not None:
            done.wait()
        threading.Event().wait(EXIT_GRACE_S)
        os._exit(app.exit_code_for_run())

    threading.Thread(target=watch, name="console-hang-up", daemon=True).start()


def install(app: Any) -> Callable[[], None]:
    """Handle STOP_SIGNALS on the running loop for `app` (a `ConsoleApp`); returns the undo."""
    loop = asyncio.get_running_loop()
    received: list[str] = []

    def on_signal(name: str) -> None:
        received.append(name)
        if name == "SIGHUP" and terminal_gone() and len(received) == 1:
            detach_from_terminal()
            end_after_training(app)
        run = app.model.run
        if len(received) == 1 and app.source == "live" and run.active:
            app.model.note("warning", f"{name}: stopping after this step with a checkpoint, then quitting")
            app.stop_and_quit()
            return
        app.model.note("warning", f"{name}: quitting")
        if not run.active:  # an eval, merge or audit is cancelled: `launch.let_go` gives it seconds
            app.quit_now = True
        app.exit(app.exit_code_for_run())

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig.name)

    def remove() -> None:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    return remove
