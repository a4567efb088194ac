"""The search-round environment: run a clue set through BM25 and the frozen checker, score it.

`SearchRoundEnv.reset(state)` fixes the state (question, tables, docids already discovered);
`step(clues)` searches every clue (top-k each), takes the union of documents in first-seen
order, has the checker label them, and returns the documents, verdicts and reward breakdown.
`score_group` does the same for all K samples of a state with a single, deduplicated checker
batch, which is how the trainer calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from searchgrpo.agents.checker import CheckRequest, DocumentChecker, Verdict
from searchgrpo.data.labels import Label
from searchgrpo.data.traces import SearchState
from searchgrpo.env.prompts import ParsedClues, normalise_clue, parse_clues
from searchgrpo.env.reward import RewardBreakdown, RewardCalculator, component_counts, copies_question
from searchgrpo.retrieval.search import Retriever, tokenize


@dataclass(frozen=True)
class RetrievedDoc:
    """One distinct document a clue set found, with the checker's verdict."""

    docid: str
    title: str
    clue_index: int
    """The first clue that retrieved it."""
    rank: int
    """Its rank under that clue (0 = best)."""
    score: float
    new: bool
    """Not among the state's already-discovered docids."""
    label: Label
    reason: str


@dataclass(frozen=True)
class StepResult:
    """What one clue set achieved."""

    clues: tuple[str, ...]
    parsed: ParsedClues
    docs: tuple[RetrievedDoc, ...]
    reward: RewardBreakdown


@dataclass(frozen=True)
class _Found:
    docid: str
    clue_index: int
    rank: int
    score: float


@dataclass(frozen=True)
class _Retrieval:
    found: list[_Found]
    duplicates: int
    """Clues that repeat an earlier clue of the set (not searched again)."""
    empty: int
    """Distinct clues whose search returned nothing."""


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
    ) -> None:
        self.retriever = retriever
        self.checker = checker
        self.reward = reward
        self.top_k = top_k
        self.min_clues = min_clues
        self.max_clues = max_clues
        self.max_clue_words = max_clue_words
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
            return parse_clues(completion, self.max_clues)
        kept = tuple(c for c in completion if c.strip())
        return ParsedClues(kept[: self.max_clues], len(kept), not kept)

    def retrieve(self, clues: Sequence[str]) -> _Retrieval:
        """The union of each distinct clue's top-k, first seen first; duplicate and empty clue counts."""
        found: dict[str, _Found] = {}
        seen_clues: set[str] = set()
        duplicates = empty = 0
        for i, clue in enumerate(clues):
            norm = normalise_clue(clue)
            if norm in seen_clues:
                duplicates += 1
                continue
            seen_clues.add(norm)
            hits = self.retriever.search(clue, self.top_k)
            empty += not hits
            for hit in hits:
                if hit.docid not in found:
                    found[hit.docid] = _Found(hit.docid, i, hit.rank, hit.score)
        return _Retrieval(list(found.values()), duplicates, empty)

    def original_new_important(self, state: SearchState) -> float | None:
        """New IMPORTANT documents the state's original clues find (memoised; None if it has none)."""
        if not state.original_clues:
            return None
        if state.state_id not in self._original:
            found = self.retrieve(state.original_clues[: self.max_clues]).found
            verdicts = self._check(state, sorted({f.docid for f in found}))
            self._original[state.state_id] = float(sum(
                1 for f in found if f.docid not in state.discovered and verdicts[f.docid].label is Label.IMPORTANT))
        return self._original[state.state_id]

    def _check(self, state: SearchState, docids: list[str]) -> dict[str, Verdict]:
        corpus = self.retriever.corpus
        requests = []
        for docid in docids:
            doc = corpus.get(docid)
            assert doc is not None, docid
            requests.append(CheckRequest(state.question_id, state.question, state.sub_goals, docid, doc.title, doc.text))
        return dict(zip(docids, self.checker.check(requests)))

    def score_group(self, state: SearchState, completions: Sequence[str | Sequence[str]]) -> list[StepResult]:
        """Score K completions of one state with one deduplicated checker batch."""
        corpus = self.retriever.corpus
        parsed = [self.parse(c) for c in completions]
        runs = [self.retrieve(p.clues) for p in parsed]
        wanted = sorted({f.docid for run in runs for f in run.found})
        verdicts = self._check(state, wanted)
        discovered = state.discovered
        original = self.original_new_important(state) if self.reward.weights["gain_over_original"] else None
        question_tokens = tokenize(state.question)
        results = []
        for p, run in zip(parsed, runs):
            docs = tuple(
                RetrievedDoc(
                    f.docid,
                    corpus.get(f.docid).title,  # type: ignore[union-attr]
                    f.clue_index,
                    f.rank,
                    f.score,
                    f.docid not in discovered,
                    verdicts[f.docid].label,
                    verdicts[f.docid].reason,
                )
                for f in run.found
            )
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
                original_new_important=original,
            )
            results.append(StepResult(p.clues, p, docs, self.reward.combine(counts)))
        return results
