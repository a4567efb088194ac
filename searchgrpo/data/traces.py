"""Traces: the multi-agent system's checkpoint format (the training-data contract), read and written.

Layout, as in `docs/traces.md`:

    traces/<question>/run_XXX/meta.json               question, answers, rounds
    traces/<question>/run_XXX/round_NNN.json           the state after round NNN

This module holds the records, their validation (`parse_round`, `parse_meta`: a malformed field
raises `SchemaError` naming it; unknown fields are ignored) and `RunWriter`; `states.py` turns a
traces folder into training states. Extensions to the seed's format, all optional: `meta.json` may
list `gold_docids` (the question's evidence, IMPORTANT to the gold checker).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from searchgrpo.fileio import atomic_write_json
from searchgrpo.jsonl import long_integer_reason

MAX_FILE_BYTES = 32 * 1024 * 1024
STRATEGIES = ("SEARCH", "EXTRACT", "ANSWER")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Entity:
    name: str
    type: str = ""
    facts: tuple[str, ...] = ()
    source_docids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Goal:
    id: str
    text: str
    status: str = "open"
    answer: str | None = None


@dataclass(frozen=True)
class DocumentRecord:
    docid: str
    title: str = ""
    verdict: str = ""
    note: str = ""
    round: int = 0


@dataclass(frozen=True)
class RoundState:
    """The multi-agent system's state after one round (round_NNN.json)."""

    round: int = 0
    strategy: str = ""
    sub_goals: tuple[str, ...] = ()
    entities: tuple[Entity, ...] = ()
    goals: tuple[Goal, ...] = ()
    documents: tuple[DocumentRecord, ...] = ()
    context: tuple[str, ...] = ()
    discovered_docids: tuple[str, ...] = ()
    clues: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RoundRef:
    round: int
    strategy: str
    checkpoint: str


@dataclass(frozen=True)
class RunMeta:
    """meta.json: one attempt at one question."""

    question_id: str
    question: str
    answers: tuple[str, ...] = ()
    rounds: tuple[RoundRef, ...] = ()
    gold_docids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.gold_docids:
            out.pop("gold_docids")
        return out


@dataclass(frozen=True)
class SearchState:
    """One training state: the context before a SEARCH round, and the clues written in it."""

    state_id: str
    question_id: str
    question: str
    answers: tuple[str, ...]
    round: int
    before: RoundState
    original_clues: tuple[str, ...]
    source: str = ""

    @property
    def discovered(self) -> frozenset[str]:
        return frozenset(self.before.discovered_docids)

    @property
    def sub_goals(self) -> tuple[str, ...]:
        return self.before.sub_goals


def state_to_json(state: SearchState) -> dict[str, Any]:
    """A training state as JSON (read back by `state_from_json`)."""
    return {
        "state_id": state.state_id,
        "question_id": state.question_id,
        "question": state.question,
        "answers": list(state.answers),
        "round": state.round,
        "before": state.before.to_json(),
        "original_clues": list(state.original_clues),
        "source": state.source,
    }


def state_from_json(obj: dict[str, Any]) -> SearchState:
    """The training state `state_to_json` wrote; raises SchemaError naming a bad field."""
    if not isinstance(obj, dict):
        raise SchemaError("expected a JSON object")
    return SearchState(
        _get(obj, "state_id", str, ""),
        _get(obj, "question_id", str, ""),
        _get(obj, "question", str, ""),
        _str_list(obj, "answers", ""),
        _get(obj, "round", int, ""),
        parse_round(obj.get("before")),
        _str_list(obj, "original_clues", ""),
        _get(obj, "source", str, "", default=""),
    )


# --------------------------------------------------------------------------- parsing


class SchemaError(ValueError):
    """A field of a checkpoint file has the wrong shape; the message names it."""


def _get(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = ...) -> Any:
    if key not in obj or obj[key] is None:
        if default is ...:
            raise SchemaError(f"{where}{key}: missing")
        return default
    value = obj[key]
    if isinstance(value, bool) and kind in (int, (int, float)):
        raise SchemaError(f"{where}{key}: expected {_kind_name(kind)}, got {type(value).__name__}")
    if not isinstance(value, kind):
        raise SchemaError(f"{where}{key}: expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", list: "a list", dict: "an object", float: "a number"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def _str_list(obj: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    items = _get(obj, key, list, where, default=[])
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise SchemaError(f"{where}{key}[{i}]: expected a string, got {type(item).__name__}")
    return tuple(items)


def _objects(obj: dict[str, Any], key: str, where: str) -> list[tuple[str, dict[str, Any]]]:
    items = _get(obj, key, list, where, default=[])
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise SchemaError(f"{where}{key}[{i}]: expected an object, got {type(item).__name__}")
        out.append((f"{key}[{i}].", item))
    return out


def parse_round(obj: Any) -> RoundState:
    """Validate a decoded round_NNN.json."""
    if not isinstance(obj, dict):
        raise SchemaError("expected a JSON object")
    entities = tuple(
        Entity(
            name=_get(e, "name", str, w),
            type=_get(e, "type", str, w, default=""),
            facts=_str_list(e, "facts", w),
            source_docids=_str_list(e, "source_docids", w),
        )
        for w, e in _objects(obj, "entities", "")
    )
    goals = tuple(
        Goal(
            id=str(_get(g, "id", (str, int), w, default=f"g{i + 1}")),
            text=_get(g, "text", str, w),
            status=_get(g, "status", str, w, default="open"),
            answer=_get(g, "answer", str, w, default=None),
        )
        for i, (w, g) in enumerate(_objects(obj, "goals", ""))
    )
    documents = tuple(
        DocumentRecord(
            docid=_get(d, "docid", str, w),
            title=_get(d, "title", str, w, default=""),
            verdict=_get(d, "verdict", str, w, default=""),
            note=_get(d, "note", str, w, default=""),
            round=_get(d, "round", int, w, default=0),
        )
        for w, d in _objects(obj, "documents", "")
    )
    return RoundState(
        round=_get(obj, "round", int, "", default=0),
        strategy=_get(obj, "strategy", str, "", default=""),
        sub_goals=_str_list(obj, "sub_goals", ""),
        entities=entities,
        goals=goals,
        documents=documents,
        context=_str_list(obj, "context", ""),
        discovered_docids=_str_list(obj, "discovered_docids", ""),
        clues=_str_list(obj, "clues", ""),
    )


def parse_meta(obj: Any) -> RunMeta:
    """Validate a decoded meta.json."""
    if not isinstance(obj, dict):
        raise SchemaError("expected a JSON object")
    rounds = []
    for w, r in _objects(obj, "rounds", ""):
        rounds.append(
            RoundRef(
                round=_get(r, "round", int, w),
                strategy=_get(r, "strategy", str, w).upper(),
                checkpoint=_get(r, "checkpoint", str, w),
            )
        )
    question_id = _get(obj, "question_id", (str, int), "")
    return RunMeta(
        question_id=str(question_id),
        question=_get(obj, "question", str, ""),
        answers=_str_list(obj, "answers", ""),
        rounds=tuple(rounds),
        gold_docids=_str_list(obj, "gold_docids", ""),
    )


def read_trace_file(path: Path, root: Path) -> Any:
    """Read a JSON file inside `root`; raises SchemaError with the reason otherwise."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise SchemaError("file is missing") from None
    if not real.is_relative_to(root):
        raise SchemaError("points outside the traces folder (symlink?); refused")
    if not real.is_file():
        raise SchemaError("not a regular file")
    size = real.stat().st_size
    if size > MAX_FILE_BYTES:
        raise SchemaError(f"file is {size / 2**20:.0f} MiB, above the {MAX_FILE_BYTES // 2**20} MiB limit")
    raw = real.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not valid UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})") from None
    except RecursionError:
        raise SchemaError("JSON nested too deeply") from None
    except ValueError:  # Python refuses to read integers of more than 4,300 digits
        raise SchemaError(long_integer_reason()) from None


def trace_child(run_dir: Path, name: str) -> Path:
    if not name or Path(name).is_absolute() or ".." in Path(name).parts or "/" in name or "\\" in name:
        raise SchemaError(f"checkpoint name {name!r} must be a plain file name in the run folder")
    return run_dir / name


# --------------------------------------------------------------------------- writing


@dataclass
class RunWriter:
    """Writes one run folder in the contract's format; meta.json is written last."""

    run_dir: Path
    question_id: str
    question: str
    answers: tuple[str, ...] = ()
    gold_docids: tuple[str, ...] = ()
    rounds: list[RoundRef] = field(default_factory=list)

    def write_initial(self, state: RoundState) -> None:
        """round_000.json: the state before round 1 (not listed in meta.json's rounds)."""
        atomic_write_json(self.run_dir / "round_000.json", replace(state, round=0).to_json())

    def add_round(self, state: RoundState) -> None:
        name = f"round_{state.round:03d}.json"
        atomic_write_json(self.run_dir / name, state.to_json())
        self.rounds.append(RoundRef(state.round, state.strategy, name))

    def finish(self) -> None:
        meta = RunMeta(self.question_id, self.question, self.answers, tuple(self.rounds), self.gold_docids)
        atomic_write_json(self.run_dir / "meta.json", meta.to_json())
