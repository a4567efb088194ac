"""The search-round environment: run a clue set through BM25 and the frozen checker, score it.

`SearchRoundEnv.reset(state)` fixes the state (question, tables, docids already discovered);
`step(clues)` searches every clue (top-k each), fuses the lists round-robin
(`searchgrpo.retrieval.clues`), has the checker label the documents, and returns the documents,
verdicts, reward breakdown and each clue's share of the finds (`clue_credit`, from the searches
already made: no extra search or checker call). `score_group` does the same for all K samples of a state with a
single, deduplicated checker batch, which is how the trainer calls it.

With `defer_same_docs`, a group whose K clue sets retrieve the same set of documents is scored
without the checker (`StepResult.judged` False, every document's label None, counted as
IRRELEVANT): its verdict-paid components are then equal across the K samples whatever the
verdicts, so its reward spread and equal-finds status are already known (`grpo.lazy_judging`).
With `reward.soft_labels`, documents count their label probabilities (`component_counts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from searchgrpo.agents.checker import CheckRequest, DocumentChecker, Verdict
from searchgrpo.data.labels import Label
from searchgrpo.data.traces import SearchState
from searchgrpo.env.clue_checks import (
    copies_planner_wording,
    copies_table_row,
    invented_numbers,
    numbers_in,
    state_planner_wording,
    state_text,
)
from searchgrpo.env.clue_credit import ClueCredit, clue_credit, doc_values
from searchgrpo.env.prompts import ParsedClues, parse_clues
from searchgrpo.env.reward import RewardBreakdown, RewardCalculator, component_counts, copies_question
from searchgrpo.retrieval.clues import ClueSearch, search_clues
from searchgrpo.retrieval.search import Retriever, tokenize


@dataclass(frozen=True)
class RetrievedDoc:
    """One distinct document a clue set found, with the checker's verdict."""

    docid: str
    title: str
    clue_index: int
    """The clue that put it in the fused list (see `searchgrpo.retrieval.clues`)."""
    rank: int
    """Its rank under that clue (0 = best)."""
    score: float
    new: bool
    """Not among the state's already-discovered docids."""
    label: Label | None
    """None where the group was not judged (`StepResult.judged`)."""
    reason: str
    probs: tuple[float, float, float] | None = None
    """The verdict's label probabilities, where the checker gives them (`Verdict.probs`)."""


@dataclass(frozen=True)
class StepResult:
    """What one clue set achieved."""

    clues: tuple[str, ...]
    parsed: ParsedClues
    docs: tuple[RetrievedDoc, ...]
    """Distinct documents in fused (round-robin) order."""
    reward: RewardBreakdown
    truncated: bool = False
    """The completion hit the token limit: its last clue is cut."""
    invented: tuple[str, ...] = ()
    """Numbers in the clues that appear nowhere in the state or question."""
    clue_credit: ClueCredit = field(default_factory=ClueCredit)
    """Each clue's leave-one-out marginal value and share of the set's finds (`env.clue_credit`)."""
    judged: bool = True
    """False: scored without the checker (`score_group(defer_same_docs=True)`); labels are None."""


class SearchRoundEnv:
    """One SEARCH round of the multi-agent system, with frozen retrieval, checker and reward."""

    def __init__(
        self,
        retriever: Retriever,
        checker: DocumentChecker,
        reward: RewardCalculator,
        *,
        top_k: int,
        min_clues: int,
        max_clues: int,
        max_clue_words: int = 12,
        clue_format: str = "lines",
    ) -> None:
        self.retriever = retriever
        self.checker = checker
        self.reward = reward
        self.top_k = top_k
        self.min_clues = min_clues
        self.max_clues = max_clues
        self.max_clue_words = max_clue_words
        self.clue_format = clue_format
        """How completions hold their clues (`prompt.clue_format`; `parse_clues`)."""
        self.state: SearchState | None = None
        self._original: dict[str, float] = {}

    def reset(self, state: SearchState) -> SearchState:
        self.state = state
        return state

    def step(self, clues: str | Sequence[str]) -> StepResult:
        """Run one clue set (a completion's text, or a list of clues) in the current state."""
        if self.state is None:
            raise RuntimeError("call reset(state) before step()")
        return self.score_group(self.state, [clues])[0]

    def parse(self, completion: str | Sequence[str]) -> ParsedClues:
        if isinstance(completion, str):
            return parse_clues(completion, self.max_clues, self.clue_format)
        kept = tuple(c for c in completion if c.strip())
        return ParsedClues(kept[: self.max_clues], len(kept), not kept)

    def retrieve(self, clues: Sequence[str]) -> ClueSearch:
        """Each distinct clue's top-k, fused round-robin; duplicate and empty clue counts."""
        return search_clues(self.retriever, clues, self.top_k)

    def original_new_important(self, state: SearchState) -> float | None:
        """New IMPORTANT documents the state's original clues find (memoised; None if it has none)."""
        if not state.original_clues:
            return None
        if state.state_id not in self._original:
            hits = self.retrieve(state.original_clues[: self.max_clues]).hits
            verdicts = self._check(state, sorted({h.docid for h in hits}))
            self._original[state.state_id] = float(
                sum(self._important_count(verdicts[h.docid]) for h in hits if h.docid not in state.discovered)
            )
        return self._original[state.state_id]

    def _important_count(self, verdict: Verdict) -> float:
        """What one new document adds to `new_important`: its P(IMPORTANT) with soft labels."""
        if self.reward.soft_labels and verdict.probs is not None:
            return verdict.probs[0]
        return 1.0 if verdict.label is Label.IMPORTANT else 0.0

    def _check(self, state: SearchState, docids: list[str]) -> dict[str, Verdict]:
        corpus = self.retriever.corpus
        requests = []
        for docid in docids:
            doc = corpus.get(docid)
            assert doc is not None, docid
            requests.append(
                CheckRequest(state.question_id, state.question, state.sub_goals, docid, doc.title, doc.text)
            )
        return dict(zip(docids, self.checker.check(requests)))

    def score_group(
        self,
        state: SearchState,
        completions: Sequence[str | Sequence[str]],
        truncated: Sequence[bool] | None = None,
        *,
        defer_same_docs: bool = False,
    ) -> list[StepResult]:
        """Score K completions of one state with one deduplicated checker batch. `truncated[i]`:
        completion i hit the token limit (its last clue is cut). `defer_same_docs`: see the module
        docstring."""
        corpus = self.retriever.corpus
        parsed = [self.parse(c) for c in completions]
        runs = [self.retrieve(p.clues) for p in parsed]
        wanted = sorted({h.docid for run in runs for h in run.hits})
        judged = not (defer_same_docs and same_documents([[h.docid for h in run.hits] for run in runs]))
        verdicts = self._check(state, wanted) if judged else {}

        def judgement(docid: str) -> tuple[Label | None, str, tuple[float, float, float] | None]:
            if not judged:
                return None, "not judged: the group's clue sets found the same documents", None
            v = verdicts[docid]
            return v.label, v.reason, v.probs

        discovered = state.discovered
        original = self.original_new_important(state) if self.reward.weights["gain_over_original"] else None
        question_tokens = tokenize(state.question)
        known_numbers = numbers_in(state_text(state))
        wording = state_planner_wording(state)
        cut = list(truncated) if truncated is not None else [False] * len(parsed)
        results = []
        for p, run, was_cut in zip(parsed, runs, cut):
            docs = tuple(
                RetrievedDoc(
                    h.docid,
                    corpus.document(h.docid).title,
                    h.clue_index,
                    h.rank,
                    h.score,
                    h.docid not in discovered,
                    *judgement(h.docid),
                )
                for h in run.hits
            )
            invented = [invented_numbers(c, known_numbers) for c in p.clues]
            counts = component_counts(
                retrieved=[(d.label, not d.new) for d in docs],
                duplicate_clues=run.duplicates,
                unparsable=p.unparsable,
                clues_written=p.written,
                min_clues=self.min_clues,
                max_clues=self.max_clues,
                long_clues=sum(1 for c in p.clues if len(c.split()) > self.max_clue_words),
                question_copies=sum(1 for c in p.clues if copies_question(tokenize(c), question_tokens)),
                empty_clues=run.empty,
                redundant_clues=run.redundant,
                invented_number_clues=sum(1 for found in invented if found),
                table_copies=sum(1 for c in p.clues if copies_table_row(c)),
                goal_copies=sum(1 for c in p.clues if copies_planner_wording(c, wording)),
                cut=bool(was_cut) and not p.unparsable,
                original_new_important=original,
                label_probs=[d.probs for d in docs] if self.reward.soft_labels else None,
            )
            values = doc_values(
                ((d.docid, d.label, d.new) for d in docs),
                self.reward.weights["new_important"],
                self.reward.weights["new_relevant"],
                {d.docid: d.probs for d in docs if d.probs is not None} if self.reward.soft_labels else None,
            )
            results.append(
                StepResult(
                    p.clues,
                    p,
                    docs,
                    self.reward.combine(counts),
                    bool(was_cut),
                    tuple(sorted({n for found in invented for n in found})),
                    clue_credit(run.clue_docids, values),
                    judged,
                )
            )
        return results


def same_documents(doc_lists: Sequence[Sequence[str]]) -> bool:
    """Every clue set retrieved the same set of documents (order aside).

    >>> same_documents([["a", "b"], ["b", "a", "a"]]), same_documents([["a"], ["a", "b"]]), same_documents([])
    (True, False, True)
    """
    sets = [set(docs) for docs in doc_lists]
    return all(s == sets[0] for s in sets[1:])
