"""The `simulated` checker: the gold checker's labels, corrupted in a controlled way, for studying
what a wrong judge does to training (`checker.backend: simulated`).

Every draw is a pseudo-random number in [0, 1) from a hash of (`checker.judge_seed`, what it is
for, question id, docid), so the same document always gets the same verdict for the same question,
whatever the sub-goals, the batch, the process or the order of requests: a frozen judge.

1. The label starts as the `gold` backend's (IMPORTANT for the data's gold documents, RELEVANT or
   IRRELEVANT by its rule; `agents/checker.py`).
2. Bias (`checker.judge_bias`: length or overlap): a document that is not IMPORTANT and is *long*
   (its title and text have more tokens than 75% of the corpus's documents have) or *overlapping* (it holds at
   least half of the question's content words; `doc_features.py`) becomes IMPORTANT when its bias
   draw is below `checker.judge_bias_rate`.
3. Noise (`checker.judge_noise` = p): when its noise draw is below p, the label is replaced by one
   of the two other labels, chosen by a third draw: the first of them in Label order (IMPORTANT,
   RELEVANT, IRRELEVANT) below 0.5, the second otherwise. So a share p of verdicts disagrees with
   step 2's label and, with no bias, the three-label agreement with gold is 1 - p in expectation,
   each wrong label equally likely.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence

import numpy as np

from searchgrpo.agents.checker import CheckerDefaults, CheckRequest, GoldChecker, Verdict
from searchgrpo.agents.doc_features import doc_length, question_overlap
from searchgrpo.data.labels import Label

BIASES = ("none", "length", "overlap")
LONG_QUANTILE = 0.75
"""A document is long when its text has more tokens than this quantile of the corpus's."""
OVERLAP_SHARE = 0.5
"""A document overlaps the question when it holds at least this share of its content words."""


def unit_draw(seed: int, purpose: str, question_id: str, docid: str) -> float:
    """A number in [0, 1), a fixed function of its arguments (blake2b, 64 bits)."""
    key = json.dumps([seed, purpose, question_id, docid], ensure_ascii=False).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2.0**64


def flipped(label: Label, draw: float) -> Label:
    """The other label that a noise flip of `label` gives for the choice draw `draw` in [0, 1)."""
    others = [lab for lab in Label if lab is not label]
    return others[0] if draw < 0.5 else others[1]


class SimulatedChecker(CheckerDefaults):
    """The gold checker's labels with seeded noise and bias (see the module docstring)."""

    name = "simulated"

    def __init__(
        self, gold: GoldChecker, *, noise: float = 0.0, bias: str = "none", bias_rate: float = 0.0, seed: int = 0
    ) -> None:
        if not 0.0 <= noise <= 1.0 or not 0.0 <= bias_rate <= 1.0:
            raise ValueError(f"noise {noise} and bias rate {bias_rate} must be in [0, 1]")
        if bias not in BIASES:
            raise ValueError(f"unknown bias {bias!r} (expected one of: {', '.join(BIASES)})")
        self.gold, self.noise, self.bias, self.bias_rate, self.seed = gold, noise, bias, bias_rate, seed
        self.long_tokens = self._long_threshold() if bias == "length" else 0.0
        self._counts = {"requests": 0.0, "flipped": 0.0, "biased": 0.0, "wall_s": 0.0}

    def _long_threshold(self) -> float:
        lengths = [doc_length(d.title, d.text) for d in self.gold.corpus]
        return float(np.quantile(lengths, LONG_QUANTILE)) if lengths else 0.0

    def biased(self, request: CheckRequest) -> bool:
        """Whether the document has the feature this judge over-rates."""
        if self.bias == "length":
            return doc_length(request.title, request.text) > self.long_tokens
        if self.bias == "overlap":
            return question_overlap(request.question, request.title, request.text) >= OVERLAP_SHARE
        return False

    def label(self, request: CheckRequest) -> Verdict:
        verdict = self.gold.label(request)
        label, reason = verdict.label, f"gold: {verdict.reason}"
        key = (request.question_id, request.docid)
        if (
            self.bias != "none"
            and label is not Label.IMPORTANT
            and unit_draw(self.seed, "bias", *key) < self.bias_rate
            and self.biased(request)
        ):
            label, reason = Label.IMPORTANT, f"simulated {self.bias} bias (was {label.value})"
            self._counts["biased"] += 1
        if unit_draw(self.seed, "noise", *key) < self.noise:
            new = flipped(label, unit_draw(self.seed, "flip", *key))
            label, reason = new, f"simulated noise (was {label.value})"
            self._counts["flipped"] += 1
        return Verdict(label, reason)

    def check(self, requests: Sequence[CheckRequest]) -> list[Verdict]:
        started = time.perf_counter()
        out = [self.label(r) for r in requests]
        self._counts["requests"] += len(requests)
        self._counts["wall_s"] += time.perf_counter() - started
        return out

    def stats(self) -> dict[str, float]:
        """No `checker/*` counters: nothing is called or cached (see `counts` for what it did)."""
        return {}

    def counts(self) -> dict[str, float]:
        """Verdicts asked for, flipped by noise and made IMPORTANT by bias, and seconds spent."""
        return dict(self._counts)

    def describe(self) -> str:
        parts = [f"noise {self.noise:g}"]
        if self.bias != "none":
            parts.append(f"{self.bias} bias at rate {self.bias_rate:g}")
        return f"simulated judge: gold labels with {', '.join(parts)} (seed {self.seed})"
