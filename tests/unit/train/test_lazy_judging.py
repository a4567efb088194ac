"""Lazy judging (`grpo.lazy_judging`): groups whose K clue sets retrieve the same documents are not
judged unless they fill the batch, and the batch and its rewards are exactly those of judging all."""

import dataclasses

import pytest

from searchgrpo.agents.checker import GoldChecker
from searchgrpo.policy.sampling import Completion
from searchgrpo.train.rollouts import finish_rollout, start_rollout
from searchgrpo.world import load_dataset, make_env


class CountingChecker(GoldChecker):
    """The gold checker, counting the documents it is asked about."""

    def __init__(self, corpus, labels) -> None:
        super().__init__(corpus, labels)
        self.asked = 0

    def check(self, requests):
        self.asked += len(requests)
        return super().check(requests)


class ScriptedSampler:
    """Clue sets chosen per state (the prompt is the state's index), so that each kind of group is
    sure to occur: every third state writes the same clues K times (same documents, equal rewards),
    the next repeats a clue in one sample (same documents, a duplicate-clue cost: rewards differ
    only by costs), the next searches different titles in each sample."""

    def __init__(self, states, titles) -> None:
        self.states, self.titles = states, titles

    def clues(self, index: int, k: int) -> str:
        state = self.states[index]
        base = list(state.original_clues[:2]) or [state.question]
        if index % 3 == 0:
            return "\n".join(base)
        if index % 3 == 1:
            return "\n".join(base + base[:1] if k == 0 else base)
        return "\n".join(self.titles[(5 * index + 2 * k + j) % len(self.titles)] for j in range(2))

    def sample(self, prompts, *, num_samples, **_):
        return [[Completion([1, 2], self.clues(p[0], k), False) for k in range(num_samples)] for p in prompts]


def rollout(cfg, dataset, *, lazy: bool, dynamic_filter: str, retries: int = 4):
    g = dataclasses.replace(cfg.grpo, lazy_judging=lazy, dynamic_filter=dynamic_filter, dynamic_max_retries=retries)
    checker = CountingChecker(dataset.corpus, dataset.labels)
    env = make_env(cfg, dataset, checker=checker)
    states = list(dataset.train)
    index = {s.state_id: i for i, s in enumerate(states)}
    sampler = ScriptedSampler(states, [d.title for d in dataset.corpus])
    kw = dict(prompt_of=lambda s: [index[s.state_id]], seed_of=lambda s, r: 0, sampler=sampler)

    def refill(attempt, n, exclude):
        return [s for s in states if s.state_id not in exclude][:n]

    pending = start_rollout(g, None, env, states[:4], **kw)
    return finish_rollout(pending, g, None, env, refill=refill, **kw), checker


@pytest.mark.parametrize("dynamic_filter", ["finds", "reward"])
def test_lazy_judging_chooses_the_same_batch_for_fewer_checker_calls(tiny_cfg, dynamic_filter):
    dataset = load_dataset(tiny_cfg)
    eager, eager_checker = rollout(tiny_cfg, dataset, lazy=False, dynamic_filter=dynamic_filter)
    lazy, lazy_checker = rollout(tiny_cfg, dataset, lazy=True, dynamic_filter=dynamic_filter)
    assert [(g.key, g.in_batch, g.zero_std, g.same_finds) for g in lazy.sampled] == [
        (g.key, g.in_batch, g.zero_std, g.same_finds) for g in eager.sampled
    ]
    assert [g.rewards for g in lazy.batch] == [g.rewards for g in eager.batch]
    assert all(g.judged for g in lazy.batch)
    assert {k: v for k, v in lazy.stats.items() if k.startswith("dynamic/")} == {
        k: v for k, v in eager.stats.items() if k.startswith("dynamic/")
    }
    skipped = [g for g in lazy.sampled if not g.judged]
    assert skipped and all(not g.in_batch for g in skipped)  # some were never judged, none of the batch
    assert all(doc.label is None for g in skipped for r in g.results for doc in r.docs)
    # Every document is either sent or skipped; the checker saw exactly what was sent.
    assert lazy.stats["checker/requests_skipped"] == sum(g.documents for g in skipped) > 0
    assert lazy.stats["checker/requests"] + lazy.stats["checker/requests_skipped"] == eager.stats["checker/requests"]
    assert lazy_checker.asked == lazy.stats["checker/requests"] < eager_checker.asked == eager.stats["checker/requests"]
    assert eager.stats["checker/requests_skipped"] == 0
    discarded = sum(g.documents for g in eager.sampled if not g.in_batch)
    assert eager.stats["checker/requests_discarded"] == discarded > lazy.stats["checker/requests_discarded"]
    if dynamic_filter == "reward":
        # Same documents but a duplicate-clue cost is informative under the reward filter: judged at once.
        costs_only = [g for g in eager.sampled if g.same_finds and not g.zero_std]
        assert costs_only and all(
            lazy_group.judged for lazy_group in lazy.sampled if lazy_group.key in {g.key for g in costs_only}
        )


def test_a_deferred_group_that_fills_the_batch_is_judged(tiny_cfg):
    """With no retries every group sampled is in the batch, deferred or not: all are judged."""
    dataset = load_dataset(tiny_cfg)
    eager, _ = rollout(tiny_cfg, dataset, lazy=False, dynamic_filter="finds", retries=0)
    lazy, checker = rollout(tiny_cfg, dataset, lazy=True, dynamic_filter="finds", retries=0)
    assert all(x.in_batch for x in lazy.sampled) and all(x.judged for x in lazy.sampled)
    assert lazy.stats["checker/requests_skipped"] == 0 and checker.asked == eager.stats["checker/requests"]
    assert [x.rewards for x in lazy.batch] == [x.rewards for x in eager.batch]
    assert [[d.label for r in x.results for d in r.docs] for x in lazy.batch] == [
        [d.label for r in x.results for d in r.docs] for x in eager.batch
    ]
