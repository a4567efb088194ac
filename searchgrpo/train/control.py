"""Requests from another thread to a running job: stop, pause, checkpoint now.

Kept apart from `trainer.py` (which imports torch) so that the console can build one at once,
before the trainer's heavy imports have happened. `agreed_requests` and `wait_if_paused` are how
the trainer honours them between steps, every rank alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from searchgrpo.train.distributed import Dist


@dataclass
class TrainerControl:
    """Requests from another thread, honoured between steps."""

    stop: threading.Event = field(default_factory=threading.Event)
    """Save a checkpoint and end the run."""
    pause: threading.Event = field(default_factory=threading.Event)
    """While set, wait before the next step."""
    save_now: threading.Event = field(default_factory=threading.Event)
    """Write a checkpoint after the current step."""


def agreed_requests(control: TrainerControl, dist: Dist) -> tuple[bool, bool, bool]:
    """(stop, pause, save_now) as agreed by every rank: set where any rank has it set."""
    flags = dist.sum([control.stop.is_set(), control.pause.is_set(), control.save_now.is_set()])
    return flags[0] > 0, flags[1] > 0, flags[2] > 0


def wait_if_paused(
    control: TrainerControl,
    dist: Dist,
    *,
    paused: Callable[[], None],
    resumed: Callable[[], None],
    save: Callable[[], object],
) -> bool:
    """Block while paused (calling `paused` as the wait starts, `save` for each checkpoint asked
    for meanwhile and `resumed` as it ends); False if a stop was requested."""
    stop, pause, _ = agreed_requests(control, dist)
    if stop:
        return False
    if not pause:
        return True
    paused()
    while True:
        stop, pause, save_now = agreed_requests(control, dist)
        if stop or not pause:
            break
        if save_now:
            control.save_now.clear()
            save()
        time.sleep(0.05)
    if stop:
        return False
    resumed()
    return True
