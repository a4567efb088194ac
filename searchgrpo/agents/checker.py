"""The frozen DocumentChecker: labels each retrieved document IMPORTANT, RELEVANT or IRRELEVANT.

`DocumentChecker` is the interface every backend implements. It takes a batch of requests so that
backends can deduplicate, cache and call a server concurrently. This module holds the `gold`
backend, which labels from the data with no model:

1. a label the data records for (question, docid) wins: gold documents are IMPORTANT, and the
   multi-agent checkpoints' own verdicts are reused as they are;
2. otherwise a document is RELEVANT if it mentions, as a whole phrase, the title of one of the
   question's IMPORTANT documents, or if its own title appears in the question (titles are compared
   without a trailing parenthetical, so "Get Low (song)" matches "Get Low");
3. otherwise it is IRRELEVANT.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from searchgrpo.data.corpus import Corpus
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.retrieval.search import tokenize


@dataclass(frozen=True)
class CheckRequest:
    """One document to label for one question."""

    question_id: str
    question: str
    sub_goals: tuple[str, ...]
    docid: str
    title: str
    text: str


@dataclass(frozen=True)
class Verdict:
    """The checker's answer for one request."""

    label: Label
    reason: str = ""
    probs: tuple[float, float, float] | None = None
    """The probabilities of IMPORTANT, RELEVANT and IRRELEVANT (Label order, summing to 1), where
    the backend has them (`base`; `llm` when its server returns logprobs); None otherwise."""


class DocumentChecker(Protocol):
    """Labels documents. Implementations must be deterministic for a given request (frozen).

    Besides `check`, every backend answers `stats()` (running counters, see `stats_delta`; None
    when it keeps none), `describe()` (one line saying what judges) and `close()` (release a
    server or a cache), and has `probs_note` (why some verdicts came without label probabilities,
    '' otherwise). `CheckerDefaults` gives a backend with nothing to say all four.
    """

    name: str
    probs_note: str

    def check(self, requests: Sequence[CheckRequest]) -> list[Verdict]: ...

    def stats(self) -> dict[str, float] | None: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


class CheckerDefaults:
    """What a backend that keeps no counters and holds nothing answers: no stats (None, so no
    `checker/*` metrics), a description from its name, a close that does nothing."""

    name: str = "checker"
    probs_note: str = ""

    def stats(self) -> dict[str, float] | None:
        return None

    def describe(self) -> str:
        return f"{self.name} checker"

    def close(self) -> None:
        return None


def stats_delta(
    before: Mapping[str, float], after: Mapping[str, float], running: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The `checker/*` metrics of the work done between two `stats()` readings.

    calls: server requests that succeeded; cache_hits: verdicts answered without one;
    cache_hit_rate: cache_hits over verdicts asked for; failures: failed attempts (retried);
    unparsable: replies that were not exactly a label (labelled IRRELEVANT, never cached);
    latency_ms: mean per call; time_s: wall time spent inside check(). With `running` (a reading
    since the checker was made) of a checker that counts its `replies`: unparsable_share, the
    running share of unparsable replies that `checker.max_unparsable_frac` bounds.
    """
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    requests, calls = d.get("requests", 0.0), d.get("calls", 0.0)
    out = {
        "checker/calls": calls,
        "checker/cache_hits": d.get("cache_hits", 0.0),
        "checker/cache_hit_rate": d.get("cache_hits", 0.0) / requests if requests else 0.0,
        "checker/failures": d.get("failures", 0.0),
        "checker/unparsable": d.get("unparsable", 0.0),
        "checker/latency_ms": 1000.0 * d.get("latency_s", 0.0) / calls if calls else 0.0,
        "checker/time_s": d.get("wall_s", 0.0),
    }
    if running is not None and "replies" in running:
        replies = running["replies"]
        out["checker/unparsable_share"] = running.get("unparsable", 0.0) / replies if replies else 0.0
    return out


_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


def title_phrase(title: str) -> str:
    """A title as a space-joined token phrase, without a trailing parenthetical."""
    return " ".join(tokenize(_PAREN.sub("", title)))


class GoldChecker(CheckerDefaults):
    """Labels from the data (see the module docstring for the rule)."""

    name = "gold"

    def __init__(self, corpus: Corpus, questions: Mapping[str, QuestionLabels]) -> None:
        self.corpus = corpus
        self.questions = dict(questions)
        self._phrases: dict[str, list[str]] = {}
        self._padded: dict[str, str] = {}

    def _gold_phrases(self, question_id: str) -> list[str]:
        phrases = self._phrases.get(question_id)
        if phrases is None:
            q = self.questions.get(question_id)
            titles = []
            for docid in sorted(q.important) if q else []:
                doc = self.corpus.get(docid)
                if doc is not None:
                    titles.append(title_phrase(doc.title))
            # Each phrase once: documents that share a title would otherwise be searched for again.
            phrases = self._phrases[question_id] = list(dict.fromkeys(t for t in titles if len(t) >= 3))
        return phrases

    def _padded_text(self, docid: str, title: str, text: str) -> str:
        padded = self._padded.get(docid)
        if padded is None:
            padded = self._padded[docid] = " " + " ".join(tokenize(f"{title} {text}")) + " "
        return padded

    def label(self, request: CheckRequest) -> Verdict:
        q = self.questions.get(request.question_id)
        if q is not None:
            recorded = q.labels.get(request.docid)
            if recorded is not None:
                return Verdict(recorded, "recorded in the data")
        padded = self._padded_text(request.docid, request.title, request.text)
        for phrase in self._gold_phrases(request.question_id):
            if f" {phrase} " in padded:
                return Verdict(Label.RELEVANT, f"mentions '{phrase}'")
        own = title_phrase(request.title)
        question = " " + " ".join(tokenize(request.question)) + " "
        if len(own) >= 3 and f" {own} " in question:
            return Verdict(Label.RELEVANT, "its title appears in the question")
        return Verdict(Label.IRRELEVANT, "no link to the question's evidence")

    def check(self, requests: Sequence[CheckRequest]) -> list[Verdict]:
        return [self.label(r) for r in requests]
