"""A Python API for turning a multi-agent system's own logs into traces: feed agent events, write traces.

Your system's logs say, round by round, what each agent did; this module rebuilds from them the
per-round states of the traces format (docs/traces.md) and writes them:

    builder = TraceBuilder()
    q = builder.question("q1", "Which university did the director of Inception attend?",
                         answers=["University College London"], gold_docids=["wiki:Inception#0"])
    q.plan(1, "SEARCH", sub_goals=["find who directed Inception", "find where that person studied"])
    q.clues(1, ["Inception director", "Inception 2010 film"])       # the Executor
    q.search(1, ["wiki:Inception#0", "wiki:Interstellar#0"])        # the SearchOrchestrator
    q.verdicts(1, [DocumentRecord("wiki:Inception#0", "Inception", "IMPORTANT", "names the director")])
    q.plan(2, "EXTRACT")
    q.entities(2, [Entity("Christopher Nolan", "person", ("directed Inception",))])  # the EntityManager
    q.goals(2, [Goal("g1", "find who directed Inception", "done", "Christopher Nolan")])
    q.note(2, "round 2: the director is Christopher Nolan")
    report = builder.write("traces/")                              # atomically; `report.issues`

How events become states (each round's events apply in the order given; rounds in number order):

- `plan(r, strategy, sub_goals=, goals=)`: the Planner's choice for round r. Its sub-goals and goals
  are what the round's Executor sees, so they belong to the state *before* round r (written into
  round r-1's file, `round_000.json` for round 1). Without a plan, a round with clues is SEARCH and
  one without is EXTRACT.
- `clues(r, clues)`: the Executor's clues of round r (a SEARCH round's baseline clues).
- `search(r, docids)`: the documents the round retrieved, added to `discovered_docids`.
- `verdicts(r, documents)`: the DocumentChecker's labels, added to the documents table (a docid
  already in it keeps its first verdict, as the multi-agent loop does).
- `entities(r, entities)`: the EntityManager's entity table after round r (it replaces the table).
- `goals(r, goals)`: the goal table after round r (goals marked done or answered during the round).
- `note(r, text)`: a context note.

What cannot be right is refused as an issue and left out, never silently: a second `question` for
the same question and run, a second `clues` for one round, round numbers below 1 (a plan at round 0
is not needed: round 1's plan gives the state before it), a question with no rounds, and a gap in
the rounds (the rounds after it are left out: their state before is unknown).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from searchgrpo.data.traces import STRATEGIES, DocumentRecord, Entity, Goal, RoundState, RunWriter
from searchgrpo.errors import IssueLog


@dataclass
class _Round:
    """What the events of one round said."""

    strategy: str | None = None
    sub_goals: tuple[str, ...] | None = None
    goals: tuple[Goal, ...] | None = None
    clues: tuple[str, ...] | None = None
    docids: list[str] = field(default_factory=list)
    documents: list[DocumentRecord] = field(default_factory=list)
    entities: tuple[Entity, ...] | None = None
    goals_after: tuple[Goal, ...] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class QuestionLog:
    """The events of one attempt (run) at one question; add them with the methods below."""

    question_id: str
    question: str
    answers: tuple[str, ...] = ()
    gold_docids: tuple[str, ...] = ()
    run: int = 1
    where: str = ""
    """Where the question came from (a log's `file:line`), for issues."""
    issues: IssueLog = field(default_factory=IssueLog)
    rounds: dict[int, _Round] = field(default_factory=dict)

    def _round(self, r: int, where: str) -> _Round | None:
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            self.issues.record(where or self.where, f"round {r!r}: rounds are integers from 1; the event is left out")
            return None
        return self.rounds.setdefault(r, _Round())

    def plan(
        self,
        r: int,
        strategy: str,
        *,
        sub_goals: Sequence[str] | None = None,
        goals: Sequence[Goal] | None = None,
        where: str = "",
    ) -> None:
        """The Planner's choice for round r (SEARCH, EXTRACT or ANSWER), with the sub-goals and goals
        it hands the round (None: unchanged)."""
        rnd = self._round(r, where)
        if rnd is None:
            return
        if strategy.upper() not in STRATEGIES:
            self.issues.record(
                where or self.where, f"strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}; left out"
            )
            return
        rnd.strategy = strategy.upper()
        if sub_goals is not None:
            rnd.sub_goals = tuple(sub_goals)
        if goals is not None:
            rnd.goals = tuple(goals)

    def clues(self, r: int, clues: Sequence[str], *, where: str = "") -> None:
        """The Executor's clues in round r."""
        rnd = self._round(r, where)
        if rnd is None:
            return
        if rnd.clues is not None:
            self.issues.record(
                where or self.where, f"a second clues event for round {r} (the first is kept)", conflict=True
            )
            return
        rnd.clues = tuple(clues)

    def search(self, r: int, docids: Iterable[str], *, where: str = "") -> None:
        """Documents retrieved in round r (in the order they were retrieved)."""
        rnd = self._round(r, where)
        if rnd is not None:
            rnd.docids.extend(docids)

    def verdicts(self, r: int, documents: Iterable[DocumentRecord], *, where: str = "") -> None:
        """The checker's verdicts in round r (a record's `round` is set to r)."""
        rnd = self._round(r, where)
        if rnd is not None:
            rnd.documents.extend(replace(d, round=r) for d in documents)

    def entities(self, r: int, entities: Sequence[Entity], *, where: str = "") -> None:
        """The EntityManager's whole entity table after round r."""
        rnd = self._round(r, where)
        if rnd is not None:
            rnd.entities = tuple(entities)

    def goals(self, r: int, goals: Sequence[Goal], *, where: str = "") -> None:
        """The whole goal table after round r (a goal marked done or answered during the round)."""
        rnd = self._round(r, where)
        if rnd is not None:
            rnd.goals_after = tuple(goals)

    def note(self, r: int, text: str, *, where: str = "") -> None:
        """A context note of round r."""
        rnd = self._round(r, where)
        if rnd is not None:
            rnd.notes.append(text)

    # ------------------------------------------------------------------ states

    def states(self) -> tuple[RoundState, list[RoundState]]:
        """(the state before round 1, the state after each round 1..N), with any gap reported and cut."""
        numbers = sorted(self.rounds)
        contiguous = [r for i, r in enumerate(numbers) if r == i + 1]
        if len(contiguous) < len(numbers):
            gap = len(contiguous) + 1
            self.issues.record(
                self.where,
                f"question {self.question_id!r} run {self.run}: no events for round {gap}; rounds "
                f"{', '.join(str(r) for r in numbers if r > gap)} are left out (their state before is unknown)",
            )
        state = self._planned(RoundState(round=0), contiguous[0] if contiguous else None)
        out: list[RoundState] = []
        before = state
        for r in contiguous:
            rnd = self.rounds[r]
            strategy = rnd.strategy or ("SEARCH" if rnd.clues else "EXTRACT")
            known = {d.docid for d in before.documents}
            fresh = []
            for doc in rnd.documents:
                if doc.docid not in known:
                    known.add(doc.docid)
                    fresh.append(doc)
            after = replace(
                before,
                round=r,
                strategy=strategy,
                clues=rnd.clues or (),
                discovered_docids=tuple(dict.fromkeys((*before.discovered_docids, *rnd.docids))),
                documents=(*before.documents, *fresh),
                entities=rnd.entities if rnd.entities is not None else before.entities,
                goals=rnd.goals_after if rnd.goals_after is not None else before.goals,
                context=(*before.context, *rnd.notes),
            )
            after = self._planned(after, r + 1 if r + 1 in self.rounds else None)
            out.append(after)
            before = after
        return state, out

    def _planned(self, state: RoundState, next_round: int | None) -> RoundState:
        """`state` with the sub-goals and goals the next round's plan hands it."""
        rnd = self.rounds.get(next_round) if next_round is not None else None
        if rnd is None:
            return state
        if rnd.sub_goals is not None:
            state = replace(state, sub_goals=rnd.sub_goals)
        if rnd.goals is not None:
            state = replace(state, goals=rnd.goals)
        return state


@dataclass
class BuildReport:
    """What `TraceBuilder.write` wrote and left out."""

    questions: int = 0
    runs: int = 0
    rounds: int = 0
    search_rounds: int = 0
    issues: IssueLog = field(default_factory=IssueLog)


class TraceBuilder:
    """Collects `QuestionLog`s and writes them as a traces folder (see the module docstring)."""

    def __init__(self, issues: IssueLog | None = None) -> None:
        self.issues = issues if issues is not None else IssueLog()
        self.logs: dict[tuple[str, int], QuestionLog] = {}

    def question(
        self,
        question_id: str,
        question: str,
        *,
        answers: Sequence[str] = (),
        gold_docids: Sequence[str] = (),
        run: int = 1,
        where: str = "",
    ) -> QuestionLog | None:
        """Start a question's run; None (and an issue) when that run was started already."""
        key = (question_id, run)
        if key in self.logs:
            first = self.logs[key].where or "an earlier event"
            self.issues.record(
                where,
                f"question {question_id!r} run {run} was already started at {first}; "
                "this one is left out with its events",
                conflict=True,
            )
            return None
        log = self.logs[key] = QuestionLog(
            question_id, question, tuple(answers), tuple(gold_docids), run, where, self.issues
        )
        return log

    def get(self, question_id: str, run: int = 1) -> QuestionLog | None:
        return self.logs.get((question_id, run))

    def write(self, root: str | os.PathLike[str]) -> BuildReport:
        """Write every question's runs under `root` (`<question>/run_NNN/`; the caller makes `root`
        atomic, e.g. `fileio.atomic_dir`). Questions without rounds are reported and left out."""
        out = Path(root)
        report = BuildReport(issues=self.issues)
        folders: dict[str, str] = {}
        for (qid, run), log in sorted(self.logs.items()):
            if not log.rounds:
                self.issues.record(log.where, f"question {qid!r} run {run}: no round events; left out")
                continue
            initial, rounds = log.states()
            if not rounds:
                continue
            folder = folders.setdefault(qid, _folder_name(qid, set(folders.values())))
            writer = RunWriter(out / folder / f"run_{run:03d}", qid, log.question, log.answers, log.gold_docids)
            writer.run_dir.mkdir(parents=True, exist_ok=True)
            writer.write_initial(initial)
            for state in rounds:
                writer.add_round(state)
            writer.finish()
            report.runs += 1
            report.rounds += len(rounds)
            report.search_rounds += sum(1 for s in rounds if s.strategy == "SEARCH")
        report.questions = len(folders)
        return report


def _folder_name(question_id: str, taken: set[str]) -> str:
    """A file-system-safe folder name for a question id (its id stays in meta.json), unique."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in question_id).strip(".")[:80] or "question"
    name, n = safe, 2
    while name in taken:
        name, n = f"{safe}~{n}", n + 1
    return name
