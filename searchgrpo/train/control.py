"""Requests from another thread to a running job: stop, pause, checkpoint now.

Kept apart from `trainer.py` (which imports torch) so that the console can build one at once,
before the trainer's heavy imports have happened.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class TrainerControl:
    """Requests from another thread, honoured between steps."""

    stop: threading.Event = field(default_factory=threading.Event)
    """Save a checkpoint and end the run."""
    pause: threading.Event = field(default_factory=threading.Event)
    """While set, wait before the next step."""
    save_now: threading.Event = field(default_factory=threading.Event)
    """Write a checkpoint after the current step."""
