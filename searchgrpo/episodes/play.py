"""The multi-agent loop: play whole questions, Planner -> Executor -> BM25 -> DocumentChecker ->
EntityManager, round after round, as the deep-search system does.

`play` runs many questions in lockstep, so that every round asks the Executor for all the clue
sets it needs at once (one batched generation for a policy Executor) and the checker gets one
batch per round. Each SEARCH round searches every clue, fuses the lists round-robin
(`searchgrpo.retrieval.clues`), keeps the first `doc_budget` documents (all when None) and sends
the ones not discovered before to the checker. `collect` writes the rounds as traces, `eval
--episodes` measures them, and the trainer replays training questions with its current adapter to
train on the states its own clues lead to. `advance` is the loop itself: it also plays on
episodes that stand at different rounds, such as the trainer's branches (`branch`: a training
state's sampled clue set, played on for a few rounds to pay it for what it sets up).

The agents are protocols: the rule-based ones of `searchgrpo.agents.rules`, the LLM ones of
`searchgrpo.agents.llm_agents`, or the policy (`searchgrpo.policy.executor`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from searchgrpo.agents.checker import CheckRequest, DocumentChecker, Verdict
from searchgrpo.agents.rules import bridge_relation, merge_documents, names_in, update_goals
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.data.dataset import Dataset
from searchgrpo.data.traces import DocumentRecord, Entity, Goal, RoundState, SearchState
from searchgrpo.retrieval.clues import search_clues

_PARENTHESIS = re.compile(r"\([^)]*\)")


class Planner(Protocol):
    max_rounds: int

    def next_strategy(self, state: RoundState, round_no: int, last_found_important: bool) -> str: ...


@dataclass(frozen=True)
class ClueRequest:
    """What the Executor is asked in one SEARCH round of one question."""

    question_id: str
    question: str
    state: RoundState
    """The state before the round."""
    round_no: int


class Executor(Protocol):
    def write_clues(self, requests: Sequence[ClueRequest]) -> list[list[str]]: ...


class EntityManager(Protocol):
    def update(self, state: RoundState, question: str, important: list[Document]) -> tuple[Entity, ...]: ...


@dataclass(frozen=True)
class EpisodeStart:
    """A question, its evidence, and the state the multi-agent system starts from."""

    question_id: str
    question: str
    answers: tuple[str, ...] = ()
    gold: frozenset[str] = frozenset()
    """The question's evidence documents (IMPORTANT by the data)."""
    initial: RoundState = field(default_factory=RoundState)
    """The state before round 1 (sub-goals and goals planned from the question when it has none)."""


@dataclass(frozen=True)
class RoundRecord:
    """One round of one episode."""

    round: int
    strategy: str
    clues: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    """Docids sent to the checker (new to the episode, in fused order, within the budget)."""
    verdicts: tuple[str, ...] = ()
    """The checker's label of each checked document."""
    after: RoundState = field(default_factory=RoundState)
    """The state after the round."""

    @property
    def new_important(self) -> int:
        return sum(1 for v in self.verdicts if v == "IMPORTANT")


@dataclass
class Episode:
    """A question played round by round."""

    start: EpisodeStart
    rounds: list[RoundRecord] = field(default_factory=list)
    state: RoundState = field(default_factory=RoundState)
    done: bool = False
    found_important: bool = False
    """The last SEARCH round found a new IMPORTANT document (the rule Planner then EXTRACTs)."""
    next_round: int = 1
    """The round this episode plays next."""
    last_round: int | None = None
    """Stop after this round, unanswered (a branch played on for a few rounds, `branch`); None:
    play until the Planner answers (at the latest at its `max_rounds`)."""

    def discovered_after(self, round_no: int) -> set[str]:
        """Every docid discovered by the end of round `round_no` (the last state if it ended sooner)."""
        state = self.start.initial
        for r in self.rounds:
            if r.round > round_no:
                break
            state = r.after
        return set(state.discovered_docids)

    def search_states(self) -> list[SearchState]:
        """Each SEARCH round as a training state: the state before it, and its clues."""
        out, before = [], self.start.initial
        for r in self.rounds:
            if r.strategy == "SEARCH" and r.clues:
                out.append(
                    SearchState(
                        f"{self.start.question_id}/episode/r{r.round:03d}",
                        self.start.question_id,
                        self.start.question,
                        self.start.answers,
                        r.round,
                        before,
                        r.clues,
                    )
                )
            before = r.after
        return out


def planned_sub_goals(question: str) -> tuple[str, ...]:
    """The rule Planner's decomposition of a question the data gives none for: a goal per entity the
    question names (two for a comparison) and, for a comparison through a bridge, a goal per side
    for the bridge (the Planner then answers after four IMPORTANT documents, not two); else the
    named entity and the one it leads to. A parenthesis ("X (1958 film)") names no entity."""
    text = _PARENTHESIS.sub(" ", question)
    names = names_in(text)
    if len(names) >= 2:
        sides = names[:2]
        goals = tuple(f"find the document about {n}" for n in sides)
        relation = bridge_relation(text)
        if relation:
            goals += tuple(f"find the document about the {relation} of {n}" for n in sides)
        return goals
    if names:
        return (f"find the document about {names[0]}", f"find the document about who or what {names[0]} leads to")
    return (
        "find the document about the entity the question names",
        "find the document about the entity that document leads to",
    )


def initial_state(question: str, sub_goals: Sequence[str] = (), state: RoundState | None = None) -> RoundState:
    """The state before round 1: `state` (a trace's round 0) when it has sub-goals, else one planned
    from the question, keeping whatever `state` already holds."""
    state = state or RoundState(round=0)
    if state.sub_goals:
        return state
    goals = tuple(sub_goals) or planned_sub_goals(question)
    return replace(
        state, round=0, sub_goals=goals, goals=state.goals or tuple(Goal(f"g{i}", g) for i, g in enumerate(goals, 1))
    )


def question_starts(dataset: Dataset, question_ids: Sequence[str], states: Sequence[SearchState]) -> list[EpisodeStart]:
    """Where each question's episode starts: its traces' state before round 1 (`dataset.initial`)
    and its evidence (the data's IMPORTANT documents). `states` give the questions' texts."""
    text = {s.question_id: s.question for s in states}
    out = []
    for qid in question_ids:
        labels = dataset.labels.get(qid)
        gold = frozenset(labels.important) if labels else frozenset()
        out.append(
            EpisodeStart(
                qid,
                text[qid],
                dataset.answers.get(qid, ()),
                gold,
                initial_state(text[qid], state=dataset.initial.get(qid)),
            )
        )
    return out


def play(
    starts: Sequence[EpisodeStart],
    *,
    planner: Planner,
    executor: Executor,
    entity_manager: EntityManager,
    retriever: Any,
    checker: DocumentChecker,
    top_k: int,
    doc_budget: int | None = None,
    on_done: Callable[[Episode], None] | None = None,
    on_turn: Callable[[Sequence[Episode]], None] | None = None,
) -> list[Episode]:
    """Play every question to its ANSWER round (or planner.max_rounds), in lockstep; `on_done` is
    called with each episode as it ends, `on_turn` with every episode after each turn of the loop."""
    episodes = [Episode(s, state=s.initial) for s in starts]
    advance(
        episodes,
        planner=planner,
        executor=executor,
        entity_manager=entity_manager,
        retriever=retriever,
        checker=checker,
        top_k=top_k,
        doc_budget=doc_budget,
        on_done=on_done,
        on_turn=on_turn,
    )
    return episodes


def advance(
    episodes: Sequence[Episode],
    *,
    planner: Planner,
    executor: Executor,
    entity_manager: EntityManager,
    retriever: Any,
    checker: DocumentChecker,
    top_k: int,
    doc_budget: int | None = None,
    on_done: Callable[[Episode], None] | None = None,
    on_turn: Callable[[Sequence[Episode]], None] | None = None,
) -> None:
    """Play episodes on from where each stands (its `next_round`) until each answers, reaches the
    Planner's `max_rounds` or its own `last_round`: the lockstep loop behind `play`. Each turn of
    the loop plays every live episode's next round, whatever its number, so that episodes at
    different rounds (branches of states from different rounds) still share one Executor call and
    one checker batch per turn; `on_turn(episodes)` is called before the first turn and after each
    (progress: in lockstep, episodes end in bursts, so counting ended ones cannot pace the work)."""
    corpus: Corpus = retriever.corpus

    def finish(e: Episode) -> None:
        e.done = True
        if on_done is not None:
            on_done(e)

    while True:
        for e in episodes:
            if not e.done and e.next_round > min(planner.max_rounds, e.last_round or planner.max_rounds):
                finish(e)
        if on_turn is not None:
            on_turn(episodes)
        live = [e for e in episodes if not e.done]
        if not live:
            break
        plans = {id(e): planner.next_strategy(e.state, e.next_round, e.found_important) for e in live}
        searching = [e for e in live if plans[id(e)] == "SEARCH"]
        clue_sets = (
            executor.write_clues(
                [ClueRequest(e.start.question_id, e.start.question, e.state, e.next_round) for e in searching]
            )
            if searching
            else []
        )
        _search_round(searching, clue_sets, retriever, corpus, checker, top_k, doc_budget)
        for e in live:
            strategy = plans[id(e)]
            if strategy == "EXTRACT":
                _extract_round(e, e.next_round, entity_manager, corpus)
            elif strategy == "ANSWER":
                e.state = replace(
                    e.state,
                    round=e.next_round,
                    strategy="ANSWER",
                    clues=(),
                    context=(*e.state.context, f"round {e.next_round}: answered"),
                )
                e.rounds.append(RoundRecord(e.next_round, "ANSWER", after=e.state))
            e.next_round += 1
            if strategy == "ANSWER":
                finish(e)


def branch(
    start: EpisodeStart,
    round_no: int,
    clues: Sequence[str],
    retrieved: Sequence[str],
    fresh: Sequence[Document],
    verdicts: Sequence[Verdict],
    *,
    rounds_after: int,
) -> Episode:
    """An episode at `start.initial` (the state before SEARCH round `round_no`) whose round
    `round_no` searched `clues` with this outcome (`retrieved` docids in fused order, the `fresh`
    ones and their checker `verdicts`, known already), to be played on for `rounds_after` more
    rounds by `advance`: one branch of a training state's K clue sets (episode credit)."""
    e = Episode(start, state=start.initial, next_round=round_no, last_round=round_no + rounds_after)
    record_search(e, clues, retrieved, fresh, verdicts)
    e.next_round += 1
    return e


def _search_round(
    episodes: list[Episode],
    clue_sets: list[list[str]],
    retriever: Any,
    corpus: Corpus,
    checker: DocumentChecker,
    top_k: int,
    doc_budget: int | None,
) -> None:
    """Search, check (one checker batch for every episode of the round) and update each state."""
    found: list[tuple[list[str], list[Document]]] = []
    requests: list[CheckRequest] = []
    for e, clues in zip(episodes, clue_sets):
        retrieved = [d for d in search_clues(retriever, clues, top_k).docids(doc_budget) if corpus.get(d)]
        known = set(e.state.discovered_docids)
        fresh = [doc for d in retrieved if d not in known if (doc := corpus.get(d)) is not None]
        found.append((retrieved, fresh))
        requests += [
            CheckRequest(e.start.question_id, e.start.question, e.state.sub_goals, d.docid, d.title, d.text)
            for d in fresh
        ]
    verdicts = iter(checker.check(requests)) if requests else iter(())
    for e, clues, (retrieved, fresh) in zip(episodes, clue_sets, found):
        record_search(e, clues, retrieved, fresh, [next(verdicts) for _ in fresh])


def record_search(
    e: Episode, clues: Sequence[str], retrieved: Sequence[str], fresh: Sequence[Document], verdicts: Sequence[Verdict]
) -> None:
    """Round `e.next_round` of `e` searched `clues`: record it and update the state (documents,
    discovered docids, context, whether it found a new IMPORTANT document)."""
    round_no = e.next_round
    records = [DocumentRecord(d.docid, d.title, v.label.value, v.reason, round_no) for d, v in zip(fresh, verdicts)]
    n_new = sum(1 for r in records if r.verdict == "IMPORTANT")
    e.found_important = n_new > 0
    e.state = replace(
        e.state,
        round=round_no,
        strategy="SEARCH",
        clues=tuple(clues),
        documents=merge_documents(e.state.documents, records),
        discovered_docids=tuple(dict.fromkeys(e.state.discovered_docids + tuple(retrieved))),
        context=(
            *e.state.context,
            f"round {round_no}: searched {len(clues)} clues, {len(retrieved)} documents, {n_new} new IMPORTANT",
        ),
    )
    e.rounds.append(
        RoundRecord(
            round_no,
            "SEARCH",
            tuple(clues),
            tuple(d.docid for d in fresh),
            tuple(v.label.value for v in verdicts),
            e.state,
        )
    )


def _extract_round(e: Episode, round_no: int, entity_manager: EntityManager, corpus: Corpus) -> None:
    important = [corpus.get(d.docid) for d in e.state.documents if d.verdict == "IMPORTANT"]
    entities = entity_manager.update(e.state, e.start.question, [d for d in important if d])
    n_important = sum(1 for d in e.state.documents if d.verdict == "IMPORTANT")
    e.found_important = False
    e.state = replace(
        e.state,
        round=round_no,
        strategy="EXTRACT",
        clues=(),
        entities=entities,
        goals=update_goals(e.state.goals, n_important),
        context=(*e.state.context, f"round {round_no}: extracted {len(entities)} entities"),
    )
    e.rounds.append(RoundRecord(round_no, "EXTRACT", after=e.state))
