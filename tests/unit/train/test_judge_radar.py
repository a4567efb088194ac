"""The hack radar (searchgrpo/train/judge_radar.py): its arithmetic against hand-computed values,
the drift rule, the best checkpoint, and the metrics of real training steps recomputed from the
steps' own events, with the `simulated` judge (informative) and the `gold` one (trivially exact)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from searchgrpo.agents.doc_features import OVERLAP_EDGES, bin_of, doc_length, quantile_edges, question_overlap
from searchgrpo.events import GroupScored, StepFinished
from searchgrpo.train import judge_radar
from searchgrpo.train.checkpoints import CheckpointInfo
from searchgrpo.train.judge_radar import (
    JudgedDoc,
    RadarCounts,
    best_checkpoint,
    count_docs,
    drift_stop_line,
    judge_drift,
    radar_metrics,
)
from searchgrpo.train.trainer import Trainer

# (checker IMPORTANT, gold IMPORTANT or None: no gold, length bin, overlap bin)
DOCS = [
    JudgedDoc(True, True, 0, 0),  # A
    JudgedDoc(True, False, 3, 3),  # B
    JudgedDoc(False, True, 3, 2),  # C
    JudgedDoc(False, False, 1, 0),  # D
    JudgedDoc(True, None, 3, 3),  # E: its question has no gold
]


def test_radar_metrics_by_hand():
    m = radar_metrics(count_docs(DOCS))
    expected = {
        "checker/important_rate": 3 / 5,  # A B E
        "checker/gold_important_rate": 2 / 4,  # A C of A B C D
        "checker/important_rate_minus_gold": 2 / 4 - 2 / 4,  # checker: A B; gold: A C
        "checker/gold_precision": 1 / 2,  # of A B, A
        "checker/gold_recall": 1 / 2,  # of A C, A
        "checker/important_rate/length_q1": 1.0,  # A
        "checker/gold_important_rate/length_q1": 1.0,
        "checker/important_rate/length_q2": 0.0,  # D
        "checker/gold_important_rate/length_q2": 0.0,
        "checker/important_rate/length_q4": 2 / 3,  # B C E
        "checker/gold_important_rate/length_q4": 1 / 2,  # B C
        "checker/important_rate/overlap_0": 1 / 2,  # A D
        "checker/gold_important_rate/overlap_0": 1 / 2,
        "checker/important_rate/overlap_50": 0.0,  # C
        "checker/gold_important_rate/overlap_50": 1.0,
        "checker/important_rate/overlap_75": 1.0,  # B E
        "checker/gold_important_rate/overlap_75": 0.0,  # B
    }
    assert m == pytest.approx(expected)
    assert set(m) == set(expected)  # empty bins (length q3, overlap 25) are left out, not 0


def test_undefined_rates_are_left_out():
    assert radar_metrics(RadarCounts()) == {}
    no_gold = radar_metrics(count_docs([JudgedDoc(True, None, 0, 0)]))
    assert set(no_gold) == {
        "checker/important_rate",
        "checker/important_rate/length_q1",
        "checker/important_rate/overlap_0",
    }
    nothing_important = radar_metrics(count_docs([JudgedDoc(False, False, 0, 0)]))
    assert "checker/gold_precision" not in nothing_important and "checker/gold_recall" not in nothing_important
    assert nothing_important["checker/important_rate_minus_gold"] == 0.0


def test_counts_sum_across_ranks_as_one_count():
    one, two = count_docs(DOCS[:2]), count_docs(DOCS[2:])
    summed = [a + b for a, b in zip(one.to_list(), two.to_list())]
    assert radar_metrics(RadarCounts.from_list(summed)) == radar_metrics(count_docs(DOCS))
    assert RadarCounts.from_list(count_docs(DOCS).to_list()) == count_docs(DOCS)


def test_the_bins_are_the_audit_bins():
    assert judge_radar.OVERLAP_NAMES == ("overlap_0", "overlap_25", "overlap_50", "overlap_75")
    assert bin_of([0.0, 0.24, 0.25, 0.5, 0.75, 1.0], OVERLAP_EDGES).tolist() == [0, 0, 1, 2, 3, 3]


# --------------------------------------------------------------------------- drift


def test_drift_fires_when_the_rate_rises_and_precision_falls_by_the_margin():
    w = 3
    rates = [0.30, 0.31, 0.29, 0.35, 0.36, 0.34]  # window means 0.30 -> 0.35
    precisions = [0.80, 0.82, 0.78, 0.75, 0.74, 0.76]  # window means 0.80 -> 0.75
    drift = judge_drift(rates, precisions, w, 0.05)
    assert drift is not None
    assert (drift.rate_before, drift.rate_after) == pytest.approx((0.30, 0.35))
    assert (drift.precision_before, drift.precision_after) == pytest.approx((0.80, 0.75))
    assert "rose from 0.30 to 0.35" in drift.describe() and "fell from 0.80 to 0.75" in drift.describe()


@pytest.mark.parametrize(
    "rates, precisions",
    [
        ([0.30] * 3 + [0.34] * 3, [0.80] * 3 + [0.70] * 3),  # the rate rose too little
        ([0.30] * 3 + [0.40] * 3, [0.80] * 3 + [0.77] * 3),  # precision fell too little
        ([0.30] * 3 + [0.40] * 3, [0.70] * 3 + [0.80] * 3),  # precision rose: a better judge's finds
        ([0.40] * 3 + [0.30] * 3, [0.80] * 3 + [0.70] * 3),  # the rate fell
        ([0.30] * 2 + [0.40] * 3, [0.80] * 2 + [0.70] * 3),  # fewer than two windows
    ],
)
def test_drift_holds_only_for_both_changes(rates, precisions):
    assert judge_drift(rates, precisions, 3, 0.05) is None


def test_drift_looks_at_the_last_two_windows_only():
    early = [0.1] * 4  # an old jump, outside the windows
    assert judge_drift(early + [0.3] * 2 + [0.4] * 2, [0.9] * 4 + [0.8] * 2 + [0.6] * 2, 2, 0.05) is not None
    assert judge_drift([0.1] * 4 + [0.3] * 4, [0.9] * 4 + [0.6] * 4, 2, 0.05) is None


def test_best_checkpoint_is_the_highest_recall_evaluated_at_its_own_step():
    key = "eval/recall_at_10"
    candidates = [
        (10, {key: 0.40}, 10),
        (20, {key: 0.55}, 20),
        (25, {key: 0.55}, 20),  # saved at 25 with step 20's eval: not its own
        (30, {key: 0.55}, 30),  # a tie with 20: the earlier wins
        (40, {"eval/reward_mean": 1.0}, 40),
        (50, {key: 0.9}, None),
    ]
    assert best_checkpoint(candidates, key) == (20, 0.55)
    assert best_checkpoint(candidates[3:4], key) == (30, 0.55)
    assert best_checkpoint(candidates[4:], key) is None


def test_drift_stop_line_names_the_best_checkpoint(tmp_path):
    key = "eval/recall_at_10"
    infos = [
        CheckpointInfo(tmp_path / "step-000002", 2, {"last_eval": {key: 0.5}, "last_eval_step": 2}),
        CheckpointInfo(tmp_path / "step-000004", 4, {"last_eval": {key: 0.25}, "last_eval_step": 4}),
    ]
    line = drift_stop_line(4, infos[1].path, 10, infos)
    assert line == (
        f"stopped on judge drift at step 4 (train.stop_on_judge_drift), checkpoint {infos[1].path}; "
        f"best checkpoint by held-out recall@10: {infos[0].path} (0.500)"
    )
    assert "no checkpoint on disk has a held-out eval" in drift_stop_line(4, infos[1].path, 5, infos)


# --------------------------------------------------------------------------- real steps


def real_clues(monkeypatch) -> None:
    """The tiny random policy's text rarely retrieves anything: every other sample's clue is the
    state's question (it finds the question's documents), the others generic clues."""
    import searchgrpo.policy.samplers as samplers

    real_generate = samplers.generate

    def generate(model, tokenizer, prompts, **kwargs):
        groups = real_generate(model, tokenizer, prompts, **kwargs)
        out = []
        for prompt, group in zip(prompts, groups):
            question = re.search(r"Question: (.*)", tokenizer.decode(prompt)).group(1)
            texts = [question, "founder company\nuniversity city born"]
            out.append([dataclasses.replace(c, text=texts[k % 2]) for k, c in enumerate(group)])
        return out

    monkeypatch.setattr(samplers, "generate", generate)


def expected_from_events(groups: list[GroupScored], dataset) -> dict[str, float]:
    """The radar's metrics recomputed from a step's GroupScored events, the data's gold labels and
    the corpus, by direct counting."""
    corpus = dataset.corpus
    question_of = {s.state_id: s.question_id for s in dataset.train}
    edges = quantile_edges([doc_length(d.title, d.text) for d in corpus], 4)
    docs = []
    for g in groups:
        gold = dataset.labels[question_of[g.state_id]].important or None
        seen = {d.docid: d.label for s in g.samples for d in s.docs}
        for docid, label in seen.items():
            doc = corpus.get(docid)
            docs.append(
                JudgedDoc(
                    label == "IMPORTANT",
                    None if gold is None else docid in gold,
                    int(bin_of([doc_length(doc.title, doc.text)], edges)[0]),
                    int(bin_of([question_overlap(g.question, doc.title, doc.text)], OVERLAP_EDGES)[0]),
                )
            )
    return radar_metrics(count_docs(docs))


def train_and_collect(cfg, sink_extra=None) -> tuple[Trainer, list]:
    events: list = []

    def sink(event) -> None:
        events.append(event)
        if sink_extra is not None:
            sink_extra(trainer, event)

    trainer = Trainer(cfg, sink=sink)
    trainer.train()
    return trainer, events


def steps_of(events: list) -> list[tuple[StepFinished, list[GroupScored]]]:
    out = []
    for e in events:
        if isinstance(e, StepFinished):
            out.append((e, [g for g in events if isinstance(g, GroupScored) and g.step == e.step]))
    return out
