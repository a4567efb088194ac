"""Reading JSONL files of records (corpora, question sets) without ever crashing on a bad line.

Each line is decoded and parsed; invalid UTF-8, invalid JSON, a record the parser rejects and a
repeated key are each reported as `path:line: reason` and skipped (or raised under `strict`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, TypeVar

from searchgrpo.errors import IssueLog

T = TypeVar("T")


def read_records(path: Path, parse: Callable[[object], T], key: Callable[[T], str], what: str,
                 issues: IssueLog) -> list[T]:
    """The valid records of `path`, first occurrence of each key kept.

    `parse` raises ValueError naming the bad field; `what` names the key in messages ("docid").
    """
    out: list[T] = []
    seen: set[str] = set()
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = parse(json.loads(raw.decode("utf-8")))
            except UnicodeDecodeError:
                issues.report(where, "not valid UTF-8")
                continue
            except json.JSONDecodeError as exc:
                issues.report(where, f"invalid JSON ({exc.msg})")
                continue
            except ValueError as exc:
                issues.report(where, str(exc))
                continue
            k = key(record)
            if k in seen:
                issues.report(where, f"duplicate {what} {k!r} (the first one is kept)")
                continue
            seen.add(k)
            out.append(record)
    return out
