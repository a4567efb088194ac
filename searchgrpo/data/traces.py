"""The multi-agent checkpoint format (the training-data contract) and the state loader.

Layout, as in `docs/traces.md`:

    traces/<question>/run_XXX/meta.json               question, answers, rounds
    traces/<question>/run_XXX/round_NNN.json           the state after round NNN

`load_states` turns every SEARCH round into a training state whose context is the *previous*
round's checkpoint (round_000.json, or empty tables, for round 1) and whose baseline clues are the
round's own. Malformed files are reported by path and reason and skipped (`strict`: raised); the
loader never crashes on bad data. Unknown fields are ignored. Extensions to the seed's format, all
optional: `meta.json` may list `gold_docids` (the question's evidence, IMPORTANT to the gold checker).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.fileio import atomic_write_json

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
    return {"state_id": state.state_id, "question_id": state.question_id, "question": state.question,
            "answers": list(state.answers), "round": state.round, "before": state.before.to_json(),
            "original_clues": list(state.original_clues), "source": state.source}


def state_from_json(obj: dict[str, Any]) -> SearchState:
    """The training state `state_to_json` wrote; raises SchemaError naming a bad field."""
    if not isinstance(obj, dict):
        raise SchemaError("expected a JSON object")
    return SearchState(_get(obj, "state_id", str, ""), _get(obj, "question_id", str, ""), _get(obj, "question", str, ""),
                       _str_list(obj, "answers", ""), _get(obj, "round", int, ""), parse_round(obj.get("before")),
                       _str_list(obj, "original_clues", ""), _get(obj, "source", str, "", default=""))


@dataclass
class LoadedStates:
    """What `load_states` found."""

    states: list[SearchState]
    labels: dict[str, QuestionLabels]
    issues: IssueLog
    runs_read: int = 0
    rounds_skipped_few_clues: int = 0
    states_capped: int = 0
    initial: dict[str, RoundState] = field(default_factory=dict)
    """Each question's state before round 1 (its first run's round_000.json, else empty tables with
    the sub-goals and open goals the run's rounds carry): where an episode of it starts."""
    answers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each question's answers, as meta.json gives them."""

    @property
    def question_ids(self) -> list[str]:
        return sorted({s.question_id for s in self.states})


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


def _read_json(path: Path, root: Path) -> Any:
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


def _safe_child(run_dir: Path, name: str) -> Path:
    if not name or Path(name).is_absolute() or ".." in Path(name).parts or "/" in name or "\\" in name:
        raise SchemaError(f"checkpoint name {name!r} must be a plain file name in the run folder")
    return run_dir / name


# --------------------------------------------------------------------------- loading


def find_runs(root: Path) -> list[Path]:
    """Every `<question>/run_*/` folder under root, in sorted order."""
    runs = []
    for qdir in sorted(p for p in root.iterdir() if p.is_dir()):
        runs.extend(sorted(p for p in qdir.iterdir() if p.is_dir() and p.name.startswith("run_")))
    return runs


def load_states(
    root: str | os.PathLike[str],
    *,
    min_clues_per_round: int = 2,
    max_samples_per_question: int = 10,
    strict: bool = False,
    seed: int = 0,
) -> LoadedStates:
    """Read every run under `root` and return its SEARCH-round training states."""
    root_path = Path(root)
    if not root_path.is_dir():
        raise UserError(f"{root_path}: traces folder not found (data.traces)")
    root_real = root_path.resolve()
    issues = IssueLog(strict)
    out = LoadedStates(states=[], labels={}, issues=issues)
    per_question: dict[str, list[SearchState]] = {}
    for run_dir in find_runs(root_path):
        meta_path = run_dir / "meta.json"
        try:
            meta = parse_meta(_read_json(meta_path, root_real))
        except SchemaError as exc:
            issues.report(meta_path, str(exc))
            continue
        if not meta.rounds:
            issues.report(meta_path, "lists no rounds (an empty run)")
            continue
        out.runs_read += 1
        labels = out.labels.setdefault(meta.question_id, QuestionLabels(meta.question))
        for docid in meta.gold_docids:
            labels.labels[docid] = Label.IMPORTANT
        rounds: dict[int, RoundState] = {}
        missing: set[int] = set()
        for ref in meta.rounds:
            path = run_dir / ref.checkpoint
            try:
                rounds[ref.round] = parse_round(_read_json(_safe_child(run_dir, ref.checkpoint), root_real))
            except SchemaError as exc:
                missing.add(ref.round)
                issues.report(path, str(exc))
        for state in rounds.values():
            for doc in state.documents:
                lab = Label.parse(doc.verdict)
                if lab is not None and labels.labels.get(doc.docid) is not Label.IMPORTANT:
                    labels.labels[doc.docid] = lab
        if meta.question_id not in out.initial:
            out.initial[meta.question_id] = _initial_state(run_dir, rounds, missing, root_real)
            out.answers[meta.question_id] = meta.answers
        for ref in meta.rounds:
            if ref.strategy != "SEARCH" or ref.round in missing:
                continue
            after = rounds[ref.round]
            if len(after.clues) < min_clues_per_round:
                out.rounds_skipped_few_clues += 1
                continue
            before = _state_before(run_dir, ref.round, rounds, missing, root_real, issues)
            if before is None:
                continue
            per_question.setdefault(meta.question_id, []).append(
                SearchState(
                    state_id=f"{meta.question_id}/{run_dir.name}/r{ref.round:03d}",
                    question_id=meta.question_id,
                    question=meta.question,
                    answers=meta.answers,
                    round=ref.round,
                    before=before,
                    original_clues=after.clues,
                    source=str(run_dir / ref.checkpoint),
                )
            )
    for qid in sorted(per_question):
        states = per_question[qid]
        if len(states) > max_samples_per_question:
            rng = random.Random(f"{seed}:{qid}")
            kept = set(rng.sample(range(len(states)), max_samples_per_question))
            out.states_capped += len(states) - max_samples_per_question
            states = [s for i, s in enumerate(states) if i in kept]
        out.states.extend(states)
    return out


def _initial_state(run_dir: Path, rounds: dict[int, RoundState], missing: set[int], root_real: Path) -> RoundState:
    """The state before round 1; issues with round_000.json are reported where states are built."""
    state = _state_before(run_dir, 1, rounds, missing, root_real, IssueLog()) or RoundState(round=0)
    if not state.sub_goals:
        planned = next((r for _, r in sorted(rounds.items()) if r.sub_goals), None)
        if planned is not None:
            state = replace(state, sub_goals=planned.sub_goals,
                            goals=tuple(replace(g, status="open", answer=None) for g in planned.goals))
    return state


def _state_before(
    run_dir: Path,
    round_no: int,
    rounds: dict[int, RoundState],
    missing: set[int],
    root_real: Path,
    issues: IssueLog,
) -> RoundState | None:
    prev = round_no - 1
    if prev in rounds:
        return rounds[prev]
    if prev in missing:
        return None  # already reported
    if prev <= 0:
        zero = run_dir / "round_000.json"
        if not zero.exists() and not zero.is_symlink():
            return RoundState(round=0)
        try:
            return parse_round(_read_json(zero, root_real))
        except SchemaError as exc:
            issues.report(zero, str(exc))
            return None
    issues.report(run_dir / "meta.json", f"round {round_no} is SEARCH but round {prev} is not listed")
    return None


# --------------------------------------------------------------------------- splitting


def split_by_question(
    states: list[SearchState], eval_fraction: float, seed: int = 0
) -> tuple[list[SearchState], list[SearchState]]:
    """Split states into train and eval by question: no question lands in both.

    Questions are ordered by a seeded hash of their id and the first round(fraction * n) go to
    eval, so adding questions moves few others. With two or more questions and a fraction > 0,
    at least one question is held out.
    """
    qids = sorted({s.question_id for s in states})
    if not qids or eval_fraction <= 0:
        return list(states), []
    n_eval = round(eval_fraction * len(qids))
    if len(qids) >= 2:
        n_eval = min(max(n_eval, 1), len(qids) - 1)
    ranked = sorted(qids, key=lambda q: hashlib.sha1(f"{seed}:{q}".encode()).hexdigest())
    held_out = set(ranked[:n_eval])
    train = [s for s in states if s.question_id not in held_out]
    evals = [s for s in states if s.question_id in held_out]
    return train, evals


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

