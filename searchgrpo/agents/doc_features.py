"""Document features a relevance judge is known to be swayed by: length, and word overlap with the question.

Published work finds LLM relevance judges over-rate long passages and passages that share words
with the question. The checker audit bins its verdicts by these two features (bias probes), and the
`simulated` checker's bias judges add false IMPORTANT verdicts by them. Both read the same
definitions, here:

- length: the number of tokens of the document's title and text, with the retriever's tokeniser
  (lowercase alphanumeric runs);
- overlap: the share of the question's distinct content words (tokens that are not in
  `FUNCTION_WORDS` and have at least 2 characters) that occur among the document's title and text
  tokens; 0 for a question without content words.

Both are binned the same way wherever they are reported (the audit's bias probes, the trainer's hack
radar): length by quartiles (`quantile_edges`), overlap by `OVERLAP_EDGES`, each value's bin by
`bin_of`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from searchgrpo.retrieval.search import tokenize

OVERLAP_EDGES = (0.25, 0.5, 0.75)
"""Inner edges of the overlap bins: [0, .25), [.25, .5), [.5, .75), [.75, 1]."""
OVERLAP_NAMES = ("[0, .25)", "[.25, .5)", "[.5, .75)", "[.75, 1]")

_FUNCTION_WORDS = """a an the and or but nor of in on at to for from by with about as into onto over under than then
    that this these those there here is are was were be been being am do does did done has have had
    having it its he she they them his her their hers theirs we us our you your i me my mine
    who whom whose what which when where why how whether if not no yes so such also both either
    neither each all any some many much more most other another same own only very can could will
    would shall should may might must one ones"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
"""Words too common to count as overlap with the question (articles, pronouns, auxiliaries,
question words, prepositions)."""


def content_words(text: str) -> frozenset[str]:
    """The distinct tokens of `text` that are not function words and have at least 2 characters."""
    return frozenset(t for t in tokenize(text) if len(t) >= 2 and t not in FUNCTION_WORDS)


def doc_length(title: str, text: str) -> int:
    """Tokens of a document's title and text (see the module docstring)."""
    return len(tokenize(f"{title} {text}"))


def question_overlap(question: str, title: str, text: str) -> float:
    """Share of the question's content words found in the document's title and text, in [0, 1].

    >>> question_overlap("Who directed the film Inception?", "Inception", "A 2010 film directed by Nolan.")
    1.0
    >>> question_overlap("Who directed the film Inception?", "Nolan", "A director.")
    0.0
    """
    wanted = content_words(question)
    if not wanted:
        return 0.0
    present = set(tokenize(f"{title} {text}"))
    return len(wanted & present) / len(wanted)


def quantile_edges(values: Sequence[float] | np.ndarray, parts: int = 4) -> list[float]:
    """The inner edges that cut `values` into `parts` bins of about equal size (quartiles for 4)."""
    if not len(values):
        return []
    return [float(e) for e in np.quantile(np.asarray(values, dtype=np.float64), [i / parts for i in range(1, parts)])]


def bin_of(values: ArrayLike, edges: ArrayLike) -> np.ndarray:
    """Each value's bin for inner `edges` e_1 <= ... : bin 0 is (-inf, e_1), bin i is [e_i, e_i+1),
    the last [e_last, inf)."""
    return np.searchsorted(np.asarray(edges, dtype=np.float64), np.asarray(values, dtype=np.float64), side="right")
