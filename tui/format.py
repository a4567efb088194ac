"""Small text helpers shared by the widgets: numbers, durations, sparklines, label colours."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from searchgrpo.errors import printable as core_printable

LABEL_STYLE = {"IMPORTANT": "bold green", "RELEVANT": "yellow", "IRRELEVANT": "red"}
"""The checker's verdicts, coloured the same everywhere."""
STATUS_STYLE = {
    "idle": "dim",
    "starting": "cyan",
    "running": "bold green",
    "evaluating": "bold magenta",
    "pausing": "yellow",
    "paused": "bold yellow",
    "stopping": "yellow",
    "completed": "bold cyan",
    "stopped": "cyan",
    "failed": "bold red",
}
SPARK = "▁▂▃▄▅▆▇█"


def fmt_value(key: str, value: float | None) -> str:
    """A metric value, formatted for its kind."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if key.endswith("/lr"):
        return f"{value:.2e}"
    if key.startswith("time/"):
        return f"{value:.2f}s"
    if key.startswith("tokens/"):
        return f"{value:,.0f}"
    if abs(value) >= 1000 or (value != 0 and abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:+.4f}" if key.startswith(("reward/", "eval/reward", "loss/total")) else f"{value:.4f}"


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def sparkline(values: Sequence[float], width: int = 16) -> str:
    """The last `width` values as block characters, scaled to their own range."""
    values = [v for v in values[-width:] if math.isfinite(v)]
    if not values:
        return ""
    low, high = min(values), max(values)
    if high == low:
        return SPARK[3] * len(values)
    scale = (len(SPARK) - 1) / (high - low)
    return "".join(SPARK[int((v - low) * scale)] for v in values)


def thin(points: Sequence[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
    """At most about `limit` evenly spaced points, always keeping the last (plots need no more)."""
    if len(points) <= limit:
        return list(points)
    stride = math.ceil(len(points) / limit)
    kept = list(points[::stride])
    if kept[-1] != points[-1]:
        kept.append(points[-1])
    return kept


def bar(done: int, total: int, width: int = 20) -> str:
    """A text progress bar: '██████░░░░ 3/5'."""
    filled = round(width * done / total) if total else 0
    return f"{'█' * filled}{'░' * (width - filled)} {done}/{total}"


def plain(value: Any) -> Any:
    """A string cell of a DataTable made literal: tables read strings as markup, and a path or an
    id from the data such as `data[/q]` would raise MarkupError and take the console down; control
    and format characters are escaped (see `printable`). Anything else is returned unchanged."""
    from rich.markup import escape

    return escape(printable(value, one_line=True)) if isinstance(value, str) else value


def printable(text: str, one_line: bool = False) -> str:
    """Model output and data made safe to draw with the core's one sanitiser
    (`searchgrpo.errors.printable`: a sampled ESC would move the terminal's cursor, U+202E would
    reverse the line, a zero-width space would hide a difference), keeping newlines and tabs; with
    `one_line`, newlines and tabs become ⏎ and a space first."""
    if one_line:
        return core_printable(text.replace("\n", "⏎").replace("\t", " "))
    return core_printable(text, keep="\n\t")


SMOOTHING = 0.8
"""Weight of the exponential moving average the plots apply when smoothing is on."""


def smooth(values: Sequence[float], weight: float = SMOOTHING) -> list[float]:
    """An exponential moving average, debiased as TensorBoard's is (so the first points are not
    pulled towards zero); non-finite values are passed through and skipped."""
    out, last, n = [], 0.0, 0
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        n += 1
        last = weight * last + (1 - weight) * v
        out.append(last / (1 - weight**n))
    return out
