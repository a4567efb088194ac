"""Eval and merge jobs as the console runs them in worker threads.

The core's `searchgrpo.evaluate.round_eval` and `searchgrpo.export.merge` (and torch behind them) are imported
only here, inside the worker, so the console opens at once. Requests travel as plain dicts of
`EvalRequest` / `MergeRequest` fields.
"""

from __future__ import annotations

import threading
from typing import Any

from searchgrpo.config import Config
from searchgrpo.events import EventSink


def run_eval_job(cfg: Config, request: dict[str, Any], sink: EventSink, stop: threading.Event) -> str:
    """Score the requested policies; returns the JSON report's path."""
    from searchgrpo import runs
    from searchgrpo.evaluate.inputs import EvalRequest

    return str(runs.evaluate(cfg, EvalRequest(**request), sink, stop))


def run_merge_job(cfg: Config, request: dict[str, Any], sink: EventSink, stop: threading.Event) -> list[str]:
    """Merge the requested checkpoints; returns the model folders written."""
    from searchgrpo import runs
    from searchgrpo.export.merge import MergeRequest

    return [str(p) for p in runs.merge(cfg, MergeRequest(**request), sink, stop)]


def existing_outputs(error: BaseException) -> list[str] | None:
    """The folders named by merge's `OutputExists`, or None for any other error."""
    try:
        from searchgrpo.export.merge import OutputExists
    except ImportError:
        return None
    return list(error.paths) if isinstance(error, OutputExists) else None
