"""Clue-text checks over a whole evaluation: signs of reward hacking that retrieval metrics miss.

Computed from a report's samples (each a dict with `clues`, `counts` and, from report v2 on,
`truncated`), so an older report can be checked again:

- shared prefix / template: the most common first-two-words (or shape, `env.clue_checks`) and the
  share of clue sets holding a clue with it; one template stamped on every question is a hack;
- cut clues: the share of clues cut at the token limit (the last clue of a truncated completion);
- invented numbers: the share of clues holding a number found nowhere in the state or question;
- copied table rows: the share of clues carrying the prompt's table syntax ("IRRELEVANT | title");
- volume and copying: clues and words per clue, question copies, long, duplicate and redundant
  clues (a clue that finds nothing the set's earlier clues had not), and the share of the most
  common token among all clue tokens (keyword stuffing);
- per-clue credit (report v2 samples with `clue_marginals`, `env.clue_credit`): the share of
  clues whose leave-one-out marginal value is zero (the set finds as much without them), over
  every clue and over the clues of sets that found something; None for a report without it.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from searchgrpo.env.clue_checks import clue_prefix, clue_template, copies_table_row, shared_shape
from searchgrpo.retrieval.search import tokenize


def clue_stats(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The checks over every sample (clue set) of one policy; see the module docstring."""
    clue_sets = [s["clues"] for s in samples]
    clues = [c for cs in clue_sets for c in cs]
    counts = [s.get("counts", {}) for s in samples]
    tokens = [t for c in clues for t in tokenize(c)]
    top_token = Counter(tokens).most_common(1)
    prefix, prefix_share = shared_shape(clue_sets, clue_prefix)
    template, template_share = shared_shape(clue_sets, clue_template)
    n_clues = max(len(clues), 1)

    def per_set(key: str) -> float:
        return statistics.fmean(c.get(key, 0.0) for c in counts) if counts else 0.0

    return {
        "clue_sets": len(samples),
        "clues": len(clues),
        "clues_per_set": len(clues) / max(len(samples), 1),
        "words_per_clue": statistics.fmean(len(c.split()) for c in clues) if clues else 0.0,
        "top_prefix": prefix,
        "top_prefix_share": prefix_share,
        "top_template": template,
        "top_template_share": template_share,
        "cut_clue_share": sum(1 for s in samples if s.get("truncated") and s["clues"]) / n_clues,
        "invented_number_share": sum(c.get("invented_number", 0.0) for c in counts) / n_clues,
        "table_copy_share": sum(1 for c in clues if copies_table_row(c)) / n_clues,
        "goal_copy_share": sum(c.get("goal_copy", 0.0) for c in counts) / n_clues,
        "truncated_share": sum(1 for s in samples if s.get("truncated")) / max(len(samples), 1),
        "most_common_token_share": top_token[0][1] / len(tokens) if top_token else 0.0,
        "distinct_token_ratio": len(set(tokens)) / len(tokens) if tokens else 0.0,
        "question_copies_per_set": per_set("question_copy"),
        "long_clues_per_set": per_set("long_clue"),
        "duplicate_clues_per_set": per_set("duplicate_clue"),
        "redundant_clues_per_set": per_set("redundant_clue"),
        "empty_clues_per_set": per_set("empty_clue"),
        "unparsable_share": per_set("unparsable"),
        **zero_marginal_shares(samples),
    }


def zero_marginal_shares(samples: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The share of clues with zero marginal value, over all clues and over the clues of sets whose
    finds (new IMPORTANT and RELEVANT, weighted) were positive.

    >>> zero_marginal_shares([{"clue_marginals": [1.0, 0.0], "counts": {}, "components": {"new_important": 1.0}},
    ...                       {"clue_marginals": [0.0], "components": {}}])
    {'zero_marginal_clue_share': 0.6666666666666666, 'zero_marginal_clue_share_finding_sets': 0.5}
    """
    credited = [s for s in samples if s.get("clue_marginals") is not None]

    def share(sets: list[dict[str, Any]]) -> float | None:
        marginals = [m for s in sets for m in s["clue_marginals"]]
        return sum(1 for m in marginals if m <= 0) / len(marginals) if marginals else None

    def found(s: dict[str, Any]) -> bool:
        c = s.get("components", {})
        return c.get("new_important", 0.0) + c.get("new_relevant", 0.0) > 0

    return {
        "zero_marginal_clue_share": share(credited),
        "zero_marginal_clue_share_finding_sets": share([s for s in credited if found(s)]),
    }
