"""Evaluation: the fine-tuned Executor against the baseline, per round and per episode.

`run_eval` is the one entry: per round (`round_eval.py`) or, with `request.episodes`, whole
multi-agent episodes (`episode_eval.py`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from searchgrpo.config import Config
    from searchgrpo.evaluate.inputs import EvalRequest
    from searchgrpo.events import EventSink


def run_eval(
    cfg: Config, request: EvalRequest, sink: EventSink | None = None, stop: threading.Event | None = None
) -> Path:
    """Evaluate per round, or per episode with `request.episodes`; returns the report's path."""
    request = request.validated()
    if request.episodes:
        from searchgrpo.evaluate.episode_eval import run_episode_eval

        return run_episode_eval(cfg, request, sink, stop)
    from searchgrpo.evaluate.round_eval import run_round_eval

    return run_round_eval(cfg, request, sink, stop)
