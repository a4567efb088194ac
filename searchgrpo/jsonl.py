"""Reading JSONL files of records (corpora, question sets) without ever crashing on a bad line.

Each line is decoded and parsed; invalid UTF-8, invalid JSON, a record the parser rejects, a
repeated key and a line longer than `MAX_LINE_BYTES` are each reported as `path:line: reason` and
skipped (or raised under `strict`). A long line is read in bounded pieces and dropped as it comes,
never held whole: memory stays within the cap whatever the file holds.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from searchgrpo.errors import IssueLog

T = TypeVar("T")
MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line read (a corpus document, a question with its documents); longer ones are skipped."""
_SKIP_CHUNK = 1024 * 1024


def _lines(fh: BinaryIO, cap: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, line, length) of each line; the line is None when it is longer than `cap`
    (its bytes are read in pieces and discarded, only counted)."""
    lineno = 0
    while True:
        raw = fh.readline(cap + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) <= cap or raw.endswith(b"\n"):  # whole (the newline may be the cap's one extra byte)
            yield lineno, raw, len(raw)
            continue
        length = len(raw)
        while not raw.endswith(b"\n"):
            raw = fh.readline(_SKIP_CHUNK)
            if not raw:
                break
            length += len(raw)
        yield lineno, None, length


def long_integer_reason() -> str:
    """Why a JSON text whose integer Python refused to read (a ValueError that is no JSONDecodeError)
    is skipped, in our words."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    return f"holds an integer of more than {limit} digits, too long to read"


def decode_json_line(raw: bytes) -> object:
    """One JSON value; a ValueError in our words for an integer Python will not read (over 4,300 digits)."""
    text = raw.decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise ValueError(long_integer_reason()) from None


def parsed_lines(path: Path, parse: Callable[[object], T], issues: IssueLog) -> Iterator[tuple[str, T]]:
    """(`path:line`, record) of every line `parse` accepts; blank lines are passed over, every other
    line that cannot be read or parsed is reported (`path:line: reason`) and skipped.

    `parse` raises ValueError naming the bad field.
    """
    with path.open("rb") as fh:
        for lineno, raw, length in _lines(fh, MAX_LINE_BYTES):
            where = f"{path}:{lineno}"
            if raw is None:
                issues.record(
                    where, f"line of {length / 2**20:.1f} MiB, above the {MAX_LINE_BYTES / 2**20:g} MiB limit; skipped"
                )
                continue
            if not raw.strip():
                continue
            try:
                record = parse(decode_json_line(raw))
            except UnicodeDecodeError:
                issues.record(where, "not valid UTF-8")
                continue
            except json.JSONDecodeError as exc:
                issues.record(where, f"invalid JSON ({exc.msg})")
                continue
            except RecursionError:
                issues.record(where, "JSON nested too deeply")
                continue
            except ValueError as exc:
                issues.record(where, str(exc))
                continue
            yield where, record


def read_records(
    path: Path, parse: Callable[[object], T], key: Callable[[T], str], what: str, issues: IssueLog
) -> list[T]:
    """The valid records of `path`, first occurrence of each key kept.

    `parse` raises ValueError naming the bad field; `what` names the key in messages ("docid").
    """
    out: list[T] = []
    seen: set[str] = set()
    for where, record in parsed_lines(path, parse, issues):
        k = key(record)
        if k in seen:
            issues.record(where, f"duplicate {what} {k!r} (the first one is kept)")
            continue
        seen.add(k)
        out.append(record)
    return out
