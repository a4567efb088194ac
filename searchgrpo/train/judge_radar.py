"""The hack radar: is the policy learning to bring the judge documents it over-rates?

In production the reward is the frozen checker's verdict. The policy chooses which documents the
checker sees, so it can learn to retrieve documents the checker calls IMPORTANT wrongly (LLM judges
over-rate long passages and passages that share words with the question). Every step, over the
documents the policy retrieved in the step's sampled groups (each distinct document of a group once:
the checker judged it once; replaced groups included), the radar reports:

- `checker/important_rate`: the share the checker called IMPORTANT;
- with gold labels (the data's IMPORTANT docids of the group's question, as the `gold` checker
  uses them; questions without any are left out of these): `checker/gold_important_rate`,
  `checker/gold_precision` (the share of the checker's IMPORTANT verdicts that gold calls
  IMPORTANT), `checker/gold_recall` (the share of gold IMPORTANT documents the checker called
  IMPORTANT) and `checker/important_rate_minus_gold` (the checker's IMPORTANT rate minus gold's, on
  the same documents);
- the checker's IMPORTANT rate by document length (`checker/important_rate/length_q1` .. `q4`,
  quartiles of the corpus's document lengths) and by word overlap with the question
  (`checker/important_rate/overlap_0`, `_25`, `_50`, `_75`: the bins [0, .25) .. [.75, 1]),
  with gold's rate in the same bins (`checker/gold_important_rate/...`) where gold exists. The
  features and bins are `agents/doc_features.py`'s, as in the checker audit's bias probes.

A rate whose denominator is 0 is left out of the step's metrics. Under data parallelism each rank
counts its own groups and the counts are summed, so N processes report what one would.

**Drift** (`judge_drift`): over the last 2 x `DRIFT_WINDOW` steps that have both the IMPORTANT
rate and gold precision, the mean IMPORTANT rate of the later window exceeds the earlier one's by at
least `DRIFT_MIN_CHANGE` while the mean gold precision fell by at least as much. Each step with gold
reports `checker/judge_drift` (1 while the rule holds, else 0); the trainer logs a warning when it
starts to hold and, with `train.stop_on_judge_drift`, stops with a checkpoint and names the best
checkpoint by held-out fixed-budget recall (`best_checkpoint`). The window starts afresh on resume.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from searchgrpo.agents.doc_features import OVERLAP_EDGES, bin_of, doc_length, quantile_edges, question_overlap
from searchgrpo.data.corpus import Corpus
from searchgrpo.data.labels import Label, QuestionLabels

if TYPE_CHECKING:
    from searchgrpo.train.checkpoints import CheckpointInfo
    from searchgrpo.train.distributed import Dist
    from searchgrpo.train.rollouts import ScoredGroup

DRIFT_WINDOW = 10
"""Steps in each of the two windows the drift rule compares."""
DRIFT_MIN_CHANGE = 0.05
"""The least rise of the IMPORTANT rate, and fall of gold precision, between the windows' means."""
BINS = 4
LENGTH_NAMES = tuple(f"length_q{b + 1}" for b in range(BINS))
OVERLAP_NAMES = tuple(f"overlap_{round(100 * low)}" for low in (0.0, *OVERLAP_EDGES))


@dataclass(frozen=True)
class JudgedDoc:
    """One retrieved document as the radar counts it."""

    important: bool
    """The checker called it IMPORTANT."""
    gold: bool | None
    """Gold calls it IMPORTANT (None: its question has no gold labels)."""
    length_bin: int
    overlap_bin: int


@dataclass
class RadarCounts:
    """Sums over judged documents, from which every radar metric is a ratio (`radar_metrics`)."""

    docs: float = 0.0
    important: float = 0.0
    gold_docs: float = 0.0
    """Documents whose question has gold labels."""
    gold_important: float = 0.0
    judged_important_of_gold: float = 0.0
    """Documents with gold labels that the checker called IMPORTANT."""
    both_important: float = 0.0
    bins: dict[str, list[float]] = field(default_factory=dict)
    """Per bin name: [documents, checker IMPORTANT, documents with gold, gold IMPORTANT]."""

    def add(self, doc: JudgedDoc) -> None:
        self.docs += 1
        self.important += doc.important
        names = (LENGTH_NAMES[doc.length_bin], OVERLAP_NAMES[doc.overlap_bin])
        for name in names:
            row = self.bins.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            row[0] += 1
            row[1] += doc.important
        if doc.gold is None:
            return
        self.gold_docs += 1
        self.gold_important += doc.gold
        self.judged_important_of_gold += doc.important
        self.both_important += doc.important and doc.gold
        for name in names:
            self.bins[name][2] += 1
            self.bins[name][3] += doc.gold

    def to_list(self) -> list[float]:
        """A fixed-length vector (every bin, in order), for summing across ranks."""
        head = [
            self.docs,
            self.important,
            self.gold_docs,
            self.gold_important,
            self.judged_important_of_gold,
            self.both_important,
        ]
        return head + [v for name in (*LENGTH_NAMES, *OVERLAP_NAMES) for v in self.bins.get(name, [0.0] * 4)]

    @classmethod
    def from_list(cls, values: Sequence[float]) -> RadarCounts:
        names = (*LENGTH_NAMES, *OVERLAP_NAMES)
        out = cls(values[0], values[1], values[2], values[3], values[4], values[5])
        for i, name in enumerate(names):
            row = [float(v) for v in values[6 + 4 * i : 10 + 4 * i]]
            if row[0]:
                out.bins[name] = row
        return out


def count_docs(docs: Iterable[JudgedDoc]) -> RadarCounts:
    counts = RadarCounts()
    for doc in docs:
        counts.add(doc)
    return counts


def radar_metrics(c: RadarCounts) -> dict[str, float]:
    """The radar's `checker/*` metrics of the counts (see the module docstring)."""
    m: dict[str, float] = {}
    if c.docs:
        m["checker/important_rate"] = c.important / c.docs
    if c.gold_docs:
        m["checker/gold_important_rate"] = c.gold_important / c.gold_docs
        m["checker/important_rate_minus_gold"] = (c.judged_important_of_gold - c.gold_important) / c.gold_docs
    if c.judged_important_of_gold:
        m["checker/gold_precision"] = c.both_important / c.judged_important_of_gold
    if c.gold_important:
        m["checker/gold_recall"] = c.both_important / c.gold_important
    for name, (n, judged, n_gold, gold) in c.bins.items():
        if n:
            m[f"checker/important_rate/{name}"] = judged / n
        if n_gold:
            m[f"checker/gold_important_rate/{name}"] = gold / n_gold
    return m


# --------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class Drift:
    """The two windows' means when the drift rule holds."""

    window: int
    rate_before: float
    rate_after: float
    precision_before: float
    precision_after: float

    def describe(self) -> str:
        return (
            f"the checker's IMPORTANT rate of retrieved documents rose from {self.rate_before:.2f} to "
            f"{self.rate_after:.2f} while its precision against gold fell from {self.precision_before:.2f} to "
            f"{self.precision_after:.2f} (means of two {self.window}-step windows): the policy may be "
            "learning what the judge over-rates"
        )


def judge_drift(
    rates: Sequence[float],
    precisions: Sequence[float],
    window: int = DRIFT_WINDOW,
    min_change: float = DRIFT_MIN_CHANGE,
) -> Drift | None:
    """The drift rule on per-step (IMPORTANT rate, gold precision) pairs, oldest first: a Drift when,
    over the last 2 x window pairs, the later window's mean rate is at least `min_change` above the
    earlier's and its mean precision at least `min_change` below; None otherwise or with fewer pairs.
    """
    if len(rates) != len(precisions):
        raise ValueError("one precision per rate")
    if len(rates) < 2 * window:
        return None
    r, p = rates[-2 * window :], precisions[-2 * window :]
    before, after = sum(r[:window]) / window, sum(r[window:]) / window
    p_before, p_after = sum(p[:window]) / window, sum(p[window:]) / window
    # A small tolerance: means of equal-looking values must not miss the threshold by rounding.
    if after - before >= min_change - 1e-12 and p_before - p_after >= min_change - 1e-12:
        return Drift(window, before, after, p_before, p_after)
    return None


def best_checkpoint(
    candidates: Iterable[tuple[int, Mapping[str, float], int | None]], key: str
) -> tuple[int, float] | None:
    """(step, value) of the checkpoint with the highest eval metric `key`, among (step, its state's
    last eval, the step that eval ran at) candidates whose eval ran at their own step; ties go to
    the earlier step. None when no checkpoint was evaluated at its step."""
    scored = [(float(ev[key]), -step) for step, ev, at in candidates if at == step and key in ev]
    if not scored:
        return None
    value, neg_step = max(scored)
    return -neg_step, value


def drift_stop_line(step: int, saved: Path, budget: int, checkpoints: Sequence[CheckpointInfo]) -> str:
    """The line a run stopped on judge drift ends with: where it saved, and the best checkpoint on
    disk by held-out recall at the headline budget (`eval/recall_at_{budget}`, `best_checkpoint`)."""
    best = best_checkpoint(
        ((i.step, i.state.get("last_eval", {}), i.state.get("last_eval_step")) for i in checkpoints),
        f"eval/recall_at_{budget}",
    )
    if best is None:
        named = "no checkpoint on disk has a held-out eval of its own step to rank it by (train.eval_every)"
    else:
        where = next(i.path for i in checkpoints if i.step == best[0])
        named = f"best checkpoint by held-out recall@{budget}: {where} ({best[1]:.3f})"
    return f"stopped on judge drift at step {step} (train.stop_on_judge_drift), checkpoint {saved}; {named}"


# --------------------------------------------------------------------------- the trainer's radar


class JudgeRadar:
    """Counts each step's judged documents and watches for drift (see the module docstring)."""

    def __init__(self, corpus: Corpus, labels: Mapping[str, QuestionLabels], window: int | None = None) -> None:
        self.corpus = corpus
        self.gold = {qid: q.important for qid, q in labels.items() if q.important}
        self.length_edges = quantile_edges([doc_length(d.title, d.text) for d in corpus], BINS)
        self.window = window or DRIFT_WINDOW
        self._history: deque[tuple[float, float]] = deque(maxlen=2 * self.window)
        self._holding = False
        self._length_bin: dict[str, int] = {}

    def _length_bin_of(self, docid: str) -> int:
        b = self._length_bin.get(docid)
        if b is None:
            doc = self.corpus.get(docid)
            length = doc_length(doc.title, doc.text) if doc is not None else 0
            b = self._length_bin[docid] = int(bin_of([length], self.length_edges)[0])
        return b

    def judged(self, groups: Sequence[ScoredGroup]) -> list[JudgedDoc]:
        """Each group's distinct retrieved documents with the checker's verdict and gold's."""
        out = []
        for group in groups:
            state = group.state
            gold = self.gold.get(state.question_id)
            verdicts = {d.docid: d.label for r in group.results for d in r.docs}
            for docid, label in verdicts.items():
                doc = self.corpus.get(docid)
                overlap = question_overlap(state.question, doc.title, doc.text) if doc is not None else 0.0
                out.append(
                    JudgedDoc(
                        label is Label.IMPORTANT,
                        (docid in gold) if gold is not None else None,
                        self._length_bin_of(docid),
                        int(bin_of([overlap], OVERLAP_EDGES)[0]),
                    )
                )
        return out

    def step_metrics(self, groups: Sequence[ScoredGroup], dist: Dist) -> dict[str, float]:
        """The step's radar metrics (every rank's groups counted) and `checker/judge_drift`."""
        counts = RadarCounts.from_list(dist.sum(count_docs(self.judged(groups)).to_list()))
        m = radar_metrics(counts)
        if "checker/important_rate" in m and "checker/gold_precision" in m:
            self._history.append((m["checker/important_rate"], m["checker/gold_precision"]))
        if counts.gold_docs:
            m["checker/judge_drift"] = float(self.drift() is not None)
        return m

    def drift(self) -> Drift | None:
        """The drift rule on the steps seen so far."""
        return judge_drift([r for r, _ in self._history], [p for _, p in self._history], self.window)

    def started(self, metrics: Mapping[str, float]) -> Drift | None:
        """The Drift when the rule holds at this step but did not at the last one (else None)."""
        holding = metrics.get("checker/judge_drift", 0.0) > 0
        was, self._holding = self._holding, holding
        return self.drift() if holding and not was else None
