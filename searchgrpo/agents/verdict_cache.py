"""The on-disk verdict cache of the LLM DocumentChecker (SQLite from the standard library).

The checker is frozen, so the verdict for one (question, document, checker model, prompt) never
changes: a group's overlapping documents, the other states of a question and every later epoch are
answered from here. The key holds digests of everything the prompt shows: the question (its text
and sub-goals), the document (its title and the text as shown, `doc_key`), and the prompt itself
(`prompt_version` names it and carries a digest of its wording), so an edited document, a
longer `max_doc_chars` or a reworded prompt is labelled again, never answered from an old row.
A row also keeps the verdict's label probabilities when it has them (`Verdict.probs`; JSON text).
(Rows of the first table, `verdicts`, had no document digest; they are not read. Rows of the second,
`verdicts_v2`, have no probabilities: a key missing from the current table is still answered from
there, without them, which is all a hard label needs; new rows go to the current table only, so an
older searchgrpo sharing the file keeps working.)

One connection in WAL mode, shared by the checker's threads under a lock; several processes may
use the same file (SQLite locks it; writers wait up to `busy_timeout`). Rows are plain text
columns: nothing is pickled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.errors import UserError, one_line, printable

TABLE = "verdicts_v3"
PREVIOUS_TABLE = "verdicts_v2"
"""Read for keys the current table lacks (no probabilities); never written."""
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    question_key   TEXT NOT NULL,
    docid          TEXT NOT NULL,
    doc_key        TEXT NOT NULL,
    model          TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    label          TEXT NOT NULL,
    reason         TEXT NOT NULL DEFAULT '',
    probs          TEXT,
    created        REAL NOT NULL,
    PRIMARY KEY (question_key, docid, doc_key, model, prompt_version)
) WITHOUT ROWID
"""
_CHUNK = 400  # keys per SELECT: far below SQLite's limit on bound parameters


def question_key(question: str, sub_goals: Sequence[str]) -> str:
    """A digest of the question as the checker sees it: its text and its sub-goals."""
    text = question.strip() + "\n" + "\n".join(g.strip() for g in sub_goals)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def document_key(title: str, shown_text: str) -> str:
    """A digest of a document as the checker sees it: its title and the text the prompt shows."""
    return hashlib.sha256((title.strip() + "\n" + shown_text).encode("utf-8")).hexdigest()[:32]


def probs_text(probs: Sequence[float] | None) -> str | None:
    """Label probabilities as the `probs` column stores them (None: the verdict has none)."""
    return None if probs is None else json.dumps([float(p) for p in probs])


def probs_from_text(text: object) -> tuple[float, float, float] | None:
    """The `probs` column read back; None for a row without (or with unreadable) probabilities.

    >>> probs_from_text("[0.5, 0.25, 0.25]"), probs_from_text(None), probs_from_text("[1, 2]")
    ((0.5, 0.25, 0.25), None, None)
    """
    try:
        values = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(values, list) or len(values) != 3:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return None
    return (float(values[0]), float(values[1]), float(values[2]))


@dataclass(frozen=True)
class CachedVerdict:
    """One row: the label, its reason and, where the verdict had them, its label probabilities."""

    label: str
    reason: str
    probs: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class CacheKey:
    question_key: str
    docid: str
    model: str
    prompt_version: str
    doc_key: str = ""
    """`document_key` of the document's title and shown text."""


class VerdictCache:
    """(question, document, model, prompt) -> (label, reason), persisted in SQLite."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise self._unusable("is a folder")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, check_same_thread=False, isolation_level=None
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(SCHEMA)
            self._previous = bool(
                self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (PREVIOUS_TABLE,)
                ).fetchone()
            )
        except (OSError, sqlite3.Error) as exc:
            raise self._unusable(getattr(exc, "strerror", None) or str(exc)) from None

    def _unusable(self, why: str) -> UserError:
        """One line for a cache that cannot be opened or written: the file, why, and what moves it."""
        return UserError(
            f"{printable(self.path)}: the verdict cache cannot be used ({one_line(why, 200)}); point "
            "checker.cache_path at a new file (or set checker.cache = false); by default it is "
            "{cache root}/verdicts.sqlite, moved by paths.cache_root or SEARCHGRPO_HOME"
        )

    def get_many(self, keys: Iterable[CacheKey]) -> dict[CacheKey, tuple[str, str]]:
        """The cached (label, reason) of every key that has one."""
        return {k: (row.label, row.reason) for k, row in self.get_rows(keys).items()}

    def get_rows(self, keys: Iterable[CacheKey]) -> dict[CacheKey, CachedVerdict]:
        """The cached verdict of every key that has one (from the previous table, without
        probabilities, for keys the current one lacks)."""
        keys = list(keys)
        with self._lock:
            found = self._select(TABLE, keys, with_probs=True)
            if self._previous:
                found.update(self._select(PREVIOUS_TABLE, [k for k in keys if k not in found], with_probs=False))
        return found

    def _select(self, table: str, keys: list[CacheKey], *, with_probs: bool) -> dict[CacheKey, CachedVerdict]:
        by_group: dict[tuple[str, str], list[CacheKey]] = {}
        for k in keys:
            by_group.setdefault((k.model, k.prompt_version), []).append(k)
        found: dict[CacheKey, CachedVerdict] = {}
        probs = "probs" if with_probs else "NULL"
        for (model, version), group in by_group.items():
            for start in range(0, len(group), _CHUNK):
                chunk = group[start : start + _CHUNK]
                wanted = {(k.question_key, k.docid, k.doc_key): k for k in chunk}
                marks = ",".join("(?, ?, ?)" for _ in chunk)
                rows = self._db.execute(
                    f"SELECT question_key, docid, doc_key, label, reason, {probs} FROM {table} WHERE model = ? AND "
                    f"prompt_version = ? AND (question_key, docid, doc_key) IN (VALUES {marks})",
                    [model, version, *(v for k in chunk for v in (k.question_key, k.docid, k.doc_key))],
                ).fetchall()
                for qkey, docid, dkey, label, reason, row_probs in rows:
                    found[wanted[(qkey, docid, dkey)]] = CachedVerdict(label, reason, probs_from_text(row_probs))
        return found

    def put_many(self, items: Iterable[tuple[CacheKey, str, str]]) -> None:
        """Store (key, label, reason) rows in one transaction; an existing row is kept."""
        self.put_rows((k, CachedVerdict(label, reason)) for k, label, reason in items)

    def put_rows(self, items: Iterable[tuple[CacheKey, CachedVerdict]]) -> None:
        """Store (key, verdict) rows, probabilities included, in one transaction; an existing row is kept."""
        now = time.time()
        rows = [
            (k.question_key, k.docid, k.doc_key, k.model, k.prompt_version, v.label, v.reason, probs_text(v.probs), now)
            for k, v in items
        ]
        if not rows:
            return
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        f"INSERT OR IGNORE INTO {TABLE} (question_key, docid, doc_key, model, prompt_version, label, "
                        "reason, probs, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        rows,
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:  # a full disk ("database or disk is full"), a read-only file
                raise self._unusable(str(exc)) from None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
