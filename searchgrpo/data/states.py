"""From a traces folder to training states, and the train/eval split by question.

`load_states` turns every SEARCH round into a training state whose context is the *previous*
round's checkpoint (round_000.json, or empty tables, for round 1) and whose baseline clues are the
round's own. Malformed files are reported by path and reason and skipped (`strict`: raised); the
loader never crashes on bad data.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.traces import (
    RoundState,
    RunMeta,
    SchemaError,
    SearchState,
    parse_meta,
    parse_round,
    read_trace_file,
    trace_child,
)
from searchgrpo.errors import IssueLog, UserError


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
    folder_of: dict[str, Path] = {}
    """Each question id's folder: the first one that holds it (sorted order)."""
    for run_dir in find_runs(root_path):
        meta_path = run_dir / "meta.json"
        try:
            meta = parse_meta(read_trace_file(meta_path, root_real))
        except SchemaError as exc:
            issues.record(meta_path, str(exc))
            continue
        if not meta.rounds:
            issues.record(meta_path, "lists no rounds (an empty run)")
            continue
        problem = rounds_conflict(meta)
        if problem:
            issues.record(meta_path, f"{problem}; the run is skipped", conflict=True)
            continue
        owner = folder_of.setdefault(meta.question_id, run_dir.parent)
        if owner != run_dir.parent:
            issues.record(
                meta_path,
                f"question id {meta.question_id!r} is already the id of {owner}: two question folders would give "
                "their states the same ids; this folder is skipped (give each question its own id)",
                conflict=True,
            )
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
                raw = read_trace_file(trace_child(run_dir, ref.checkpoint), root_real)
                own = raw.get("round") if isinstance(raw, dict) else None
                if isinstance(own, int) and not isinstance(own, bool) and own != ref.round:
                    missing.add(ref.round)
                    issues.record(
                        path, f"says it is round {own}, but meta.json lists it as round {ref.round}", conflict=True
                    )
                    continue
                rounds[ref.round] = parse_round(raw)
            except SchemaError as exc:
                missing.add(ref.round)
                issues.record(path, str(exc))
        for round_state in rounds.values():
            for doc in round_state.documents:
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
    ids: set[str] = set()
    unique: list[SearchState] = []
    for state in out.states:  # ids that still meet (question ids holding '/') would share cached prompts
        if state.state_id in ids:
            issues.record(state.source, f"state id {state.state_id!r} is taken by another state", conflict=True)
            continue
        ids.add(state.state_id)
        unique.append(state)
    out.states = unique
    return out


def rounds_conflict(meta: RunMeta) -> str:
    """Why meta.json's round list cannot be read one way only ('' when it can): a round listed
    twice (two files, or one file twice, for one round) or a round number below 1 (round_000.json,
    not listed, is the state before round 1)."""
    seen: set[int] = set()
    for ref in meta.rounds:
        if ref.round < 1:
            return f"lists round {ref.round}: rounds are numbered from 1 (round_000.json is the state before round 1)"
        if ref.round in seen:
            return f"lists round {ref.round} twice"
        seen.add(ref.round)
    files = [ref.checkpoint for ref in meta.rounds]
    twice = next((f for f in files if files.count(f) > 1), None)
    return f"lists {twice!r} for two rounds" if twice else ""


def _initial_state(run_dir: Path, rounds: dict[int, RoundState], missing: set[int], root_real: Path) -> RoundState:
    """The state before round 1; issues with round_000.json are reported where states are built."""
    state = _state_before(run_dir, 1, rounds, missing, root_real, IssueLog()) or RoundState(round=0)
    if not state.sub_goals:
        planned = next((r for _, r in sorted(rounds.items()) if r.sub_goals), None)
        if planned is not None:
            state = replace(
                state,
                sub_goals=planned.sub_goals,
                goals=tuple(replace(g, status="open", answer=None) for g in planned.goals),
            )
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
            return parse_round(read_trace_file(zero, root_real))
        except SchemaError as exc:
            issues.record(zero, str(exc))
            return None
    issues.record(run_dir / "meta.json", f"round {round_no} is SEARCH but round {prev} is not listed")
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
