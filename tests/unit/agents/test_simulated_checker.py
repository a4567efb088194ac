"""The `simulated` checker: gold labels with seeded noise and bias, a frozen judge of known quality."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from searchgrpo.agents.checker import CheckRequest, GoldChecker
from searchgrpo.agents.simulated_checker import SimulatedChecker, flipped, unit_draw
from searchgrpo.config import ConfigError, load_config
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.data.labels import Label, QuestionLabels

N_DOCS = 6000
QUESTIONS = 4


def world() -> tuple[GoldChecker, list[CheckRequest]]:
    """4 questions over 6000 documents: every 10th gold (IMPORTANT), every 10th+1 mentions a gold
    title (RELEVANT by the gold rule), the rest IRRELEVANT; every 4th document is long. The gold
    documents share one title, so the gold rule searches each document for one phrase, not 600."""
    docs = []
    for i in range(N_DOCS):
        body = f"filler{i} " * (40 if i % 4 == 0 else 8)
        if i % 10 == 1:
            body += " about Gold Title Zero here"
        docs.append(Document(f"d{i}", "Gold Title Zero" if i % 10 == 0 else f"Title {i}", body))
    corpus = Corpus(docs)
    labels = {
        f"q{q}": QuestionLabels(f"Question {q}?", {f"d{i}": Label.IMPORTANT for i in range(0, N_DOCS, 10)})
        for q in range(QUESTIONS)
    }
    requests = [
        CheckRequest(f"q{q}", f"Question {q}?", ("goal",), d.docid, d.title, d.text)
        for q in range(QUESTIONS)
        for d in docs
    ]
    return GoldChecker(corpus, labels), requests


@functools.cache
def shared_world() -> tuple[GoldChecker, list[CheckRequest], list[Label]]:
    """`world()` and its gold labels, built once and only by the worker that runs these tests (at
    import time every pytest worker would pay for its 24,000 verdicts while collecting)."""
    gold, requests = world()
    return gold, requests, [v.label for v in gold.check(requests)]


def test_the_world_has_all_three_gold_labels():
    _, _, truth = shared_world()
    counts = Counter(truth)
    assert counts[Label.IMPORTANT] == QUESTIONS * N_DOCS // 10
    assert counts[Label.RELEVANT] == QUESTIONS * N_DOCS // 10
    assert counts[Label.IRRELEVANT] == QUESTIONS * N_DOCS * 8 // 10


@pytest.mark.parametrize("p", [0.1, 0.2, 0.3])
def test_agreement_is_one_minus_noise_and_wrong_labels_are_equally_likely(p):
    gold, requests, truth = shared_world()
    # 24,000 verdicts: the binomial standard deviation of the agreement is under 0.003, so 0.01 is
    # more than 3 of them; the draws are a fixed hash, so the outcome is the same on every run.
    judge = SimulatedChecker(gold, noise=p, seed=0)
    labels = [v.label for v in judge.check(requests)]
    agreement = sum(a is b for a, b in zip(labels, truth)) / len(truth)
    assert agreement == pytest.approx(1 - p, abs=0.01)
    for gold_label in Label:
        wrong = Counter(b for a, b in zip(truth, labels) if a is gold_label and b is not a)
        first, second = (lab for lab in Label if lab is not gold_label)
        share = wrong[first] / (wrong[first] + wrong[second])
        assert share == pytest.approx(0.5, abs=0.06), gold_label  # >= 240 flips per gold label
    assert judge.counts()["flipped"] == sum(a is not b for a, b in zip(labels, truth))


def test_no_noise_no_bias_is_the_gold_checker():
    gold, requests, truth = shared_world()
    labels = [v.label for v in SimulatedChecker(gold).check(requests[:2000])]
    assert labels == truth[:2000]


def test_frozen_per_question_and_document():
    gold, requests, _ = shared_world()
    judge = SimulatedChecker(gold, noise=0.3, seed=7)
    first = judge.check(requests[:3000])
    again = SimulatedChecker(gold, noise=0.3, seed=7).check(list(reversed(requests[:3000])))
    assert [v.label for v in first] == [v.label for v in reversed(again)]  # order and process do not matter
    other_goals = [
        CheckRequest(r.question_id, r.question, ("another", "goal"), r.docid, r.title, r.text) for r in requests[:3000]
    ]
    assert [v.label for v in judge.check(other_goals)] == [v.label for v in first]  # sub-goals do not matter
    reseeded = SimulatedChecker(gold, noise=0.3, seed=8).check(requests[:3000])
    assert [v.label for v in reseeded] != [v.label for v in first]  # another seed, another judge


def test_flip_rule_and_draws():
    assert flipped(Label.IMPORTANT, 0.2) is Label.RELEVANT
    assert flipped(Label.IMPORTANT, 0.7) is Label.IRRELEVANT
    assert flipped(Label.RELEVANT, 0.49) is Label.IMPORTANT
    assert flipped(Label.IRRELEVANT, 0.5) is Label.RELEVANT
    draws = [unit_draw(0, "noise", "q", f"d{i}") for i in range(5000)]
    assert all(0.0 <= u < 1.0 for u in draws)
    assert sum(draws) / len(draws) == pytest.approx(0.5, abs=0.02)
    assert unit_draw(0, "noise", "a:b", "c") != unit_draw(0, "noise", "a", "b:c")  # no separator collisions


def test_length_bias_adds_false_important_to_long_documents_only():
    gold, requests, truth = shared_world()
    rate = 0.4
    judge = SimulatedChecker(gold, bias="length", bias_rate=rate, seed=0)
    labels = [v.label for v in judge.check(requests)]
    long_not_important = [i for i, r in enumerate(requests) if judge.biased(r) and truth[i] is not Label.IMPORTANT]
    short = [i for i, r in enumerate(requests) if not judge.biased(r)]
    assert long_not_important and short
    share = sum(labels[i] is Label.IMPORTANT for i in long_not_important) / len(long_not_important)
    assert share == pytest.approx(rate, abs=0.02)
    assert all(labels[i] is truth[i] for i in short)
    assert all(labels[i] is Label.IMPORTANT for i, t in enumerate(truth) if t is Label.IMPORTANT)


def test_overlap_bias():
    gold = GoldChecker(Corpus([Document("a", "Paris", "the capital of France"), Document("b", "Rome", "pasta")]), {})
    judge = SimulatedChecker(gold, bias="overlap", bias_rate=1.0)
    asked = [
        CheckRequest("q", "What is the capital of France?", (), d, t, x)
        for d, t, x in (("a", "Paris", "the capital of France"), ("b", "Rome", "pasta"))
    ]
    assert [v.label for v in judge.check(asked)] == [Label.IMPORTANT, Label.IRRELEVANT]


def test_config_keys_and_one_line_errors():
    cfg = load_config(None, ["checker.backend=simulated", "checker.judge_noise=0.2", "checker.judge_bias=length"])
    assert cfg.checker.judge_noise == 0.2 and cfg.checker.judge_bias == "length"
    with pytest.raises(ConfigError, match=r"set checker\.backend: simulated"):
        load_config(None, ["checker.judge_noise=0.2"])
    with pytest.raises(ConfigError, match="judge_noise"):
        load_config(None, ["checker.backend=simulated", "checker.judge_noise=1.5"])
    with pytest.raises(ConfigError, match="judge_bias"):
        load_config(None, ["checker.backend=simulated", "checker.judge_bias=longest"])
