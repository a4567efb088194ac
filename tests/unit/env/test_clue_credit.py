"""Per-clue credit (issue 23.2): leave-one-clue-out marginals on the demo world, where each clue's
contribution is known by construction, with no new search or checker call; and the per-clue
advantages of `reward.per_clue`."""

import pytest
import torch

from searchgrpo.agents.checker import GoldChecker
from searchgrpo.config import RewardConfig
from searchgrpo.data.corpus import Corpus
from searchgrpo.data.demo_world import generate_world
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.traces import RoundState, SearchState
from searchgrpo.env.clue_credit import clue_credit, clue_spans, doc_values, set_value
from searchgrpo.env.prompts import parse_clues
from searchgrpo.env.reward import RewardCalculator
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.retrieval.clues import search_clues
from searchgrpo.retrieval.search import BM25Search
from searchgrpo.train.clue_weights import clue_weights, completion_token_weights, row_advantages, token_weights
from searchgrpo.train.grpo import grpo_loss


class CountingChecker(GoldChecker):
    def __init__(self, *args):
        super().__init__(*args)
        self.requests = 0

    def check(self, requests):
        self.requests += len(requests)
        return super().check(requests)


@pytest.fixture(scope="module")
def demo():
    """The demo world, and its first question whose chain is anchor -> person (2 gold documents):
    the anchor's page (a company or film) names the person; nothing else names either."""
    world = generate_world(24, 40, 0)
    corpus = Corpus(world.documents)
    q = next(q for q in world.questions if len(q.gold) == 2)
    person = next(corpus.get(d) for d in q.gold if corpus.get(d).title not in q.question)
    anchor = next(corpus.get(d) for d in q.gold if corpus.get(d).title in q.question)
    labels = {x.id: QuestionLabels(x.question, dict.fromkeys(x.gold, Label.IMPORTANT)) for x in world.questions}
    # An unrelated page that its own title finds first, naming neither gold title.
    search = BM25Search(corpus)
    other = next(
        d
        for d in world.documents
        if d.docid not in q.gold
        and anchor.title not in d.text
        and person.title not in d.text
        and search.search(d.title, 1)[0].docid == d.docid
    )
    return corpus, labels, q, anchor, person, other


def env_for(demo, top_k):
    corpus, labels, *_ = demo
    checker = CountingChecker(corpus, labels)
    env = SearchRoundEnv(
        BM25Search(corpus), checker, RewardCalculator(RewardConfig()), top_k=top_k, min_clues=1, max_clues=4
    )
    return env, checker


def state_of(q):
    return SearchState(f"{q.id}/r001", q.id, q.question, (), 1, RoundState(sub_goals=q.sub_goals), ())


def test_per_clue_credit_on_the_demo_world_is_known_by_construction(demo):
    _, _, q, anchor, person, other = demo
    clues = [anchor.title, person.title, other.title]
    # Top 1: each clue finds its own page; the two gold pages pay 1 each, the other page nothing.
    env, _ = env_for(demo, 1)
    (r,) = env.score_group(state_of(q), [clues])
    assert [d.docid for d in r.docs] == [anchor.docid, person.docid, other.docid]
    assert r.clue_credit.marginals == (1.0, 1.0, 0.0)
    assert r.clue_credit.shares == (0.5, 0.5, 0.0)
    # Top 2: the person's name also finds the anchor's page (which names the person), so without
    # the anchor clue the set still finds both gold pages: the anchor clue adds nothing, the
    # person's clue is the one that cannot be left out.
    env, _ = env_for(demo, 2)
    (r,) = env.score_group(state_of(q), [clues])
    assert set(env.retrieve([person.title]).clue_docids[0]) == {person.docid, anchor.docid}
    assert r.clue_credit.marginals[0] == 0.0 and r.clue_credit.marginals[1] == 1.0
    assert r.clue_credit.shares[1] == 1.0
    # The same search twice: neither copy is needed alone, and they share the credit.
    (dup,) = env.score_group(state_of(q), [[person.title, person.title.lower()]])
    assert dup.clue_credit.marginals == (0.0, 0.0) and dup.clue_credit.shares == (0.5, 0.5)
    # A set that finds nothing: nothing to tell apart.
    (none,) = env.score_group(state_of(q), [[other.title]])
    assert none.clue_credit.marginals == (0.0,) and none.clue_credit.shares == (1.0,)


def test_leave_one_out_is_a_replay_with_no_new_search_or_verdict(demo):
    _, _, q, anchor, person, other = demo
    env, checker = env_for(demo, 3)
    clues = [anchor.title, person.title, other.title, f"{anchor.title} {other.title}"]
    (r,) = env.score_group(state_of(q), [clues])
    assert checker.requests == len(r.docs)  # one batch: the set's own documents
    known = {d.docid: (d.label, d.new) for d in r.docs}
    values = doc_values(((d, *known[d]) for d in known), 1.0, 0.2)
    for i in range(len(clues)):
        # The set without clue i, searched again: every document it finds already has a verdict.
        without = search_clues(env.retriever, [c for j, c in enumerate(clues) if j != i], 3).docids()
        assert set(without) <= set(known)
        assert r.clue_credit.marginals[i] == pytest.approx(set_value(known, values) - set_value(without, values))
    assert checker.requests == len(r.docs)  # the replay asked the checker nothing


def test_shares_ties_and_zeros_by_hand():
    values = {"a": 1.0, "b": 0.2, "c": 0.0, "d": 1.0}
    # a found by clues 0 and 1, d by clue 2 alone, clue 3 finds only an unpaid page.
    credit = clue_credit([("a",), ("a", "b"), ("d",), ("c",)], values)
    assert credit.marginals == (0.0, 0.2, 1.0, 0.0)
    assert credit.shares == pytest.approx((0.0, 0.2 / 1.2, 1.0 / 1.2, 0.0))
    # Every find shared: the clues that found a paid document share equally.
    assert clue_credit([("a",), ("a",), ("c",)], values).shares == (0.5, 0.5, 0.0)
    assert clue_credit([], values).shares == ()
    assert sum(clue_credit([("a", "b"), ("b", "d"), ()], values).shares) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text",
    [
        "Krallo Systems\nMaren Dolvik",
        '1. Krallo Systems\n\n  - Maren Dolvik  \n3) "Orvane city"\n',
        "clue 1: Krallo\r\nclue 2: Orvane\n***\nfifth",
    ],
)
def test_clue_spans_are_the_parsers_clues(text):
    spans = clue_spans(text, 4)
    parsed = parse_clues(text, 4).clues
    assert spans is not None and len(spans) == len(parsed)
    for (a, b), clue in zip(spans, parsed):
        assert parse_clues(text[a:b], 1).clues == (clue,)


def test_clue_spans_of_a_json_list_are_unknown():
    assert clue_spans('["Krallo Systems", "Maren Dolvik"]', 4) is None
    assert clue_spans("a\nb\nc\nd\ne", 2) == [(0, 1), (2, 3)]  # only the clues kept


class CharTokenizer:
    """One token per character (0 is a special end token): decoding is exact."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i or not skip_special_tokens)


def test_each_clues_tokens_get_its_weight():
    text = "- Krallo\nOrvane city\n"
    ids = [ord(ch) for ch in text] + [0]
    shares = [0.25, 0.75]
    up = completion_token_weights(CharTokenizer(), ids, text, shares, 1.0, 4)
    down = completion_token_weights(CharTokenizer(), ids, text, shares, -1.0, 4)
    first, second = text.index("Krallo"), text.index("Orvane")
    assert up[first : first + 6] == [0.5] * 6 and up[second : second + 11] == [1.5] * 11
    assert down[first] == pytest.approx(1.5) and down[second] == pytest.approx(0.5)
    assert up[:2] == [1.0, 1.0] and up[text.index("\n")] == 1.0 and up[-1] == 1.0  # bullet, line break, end
    assert completion_token_weights(CharTokenizer(), ids, text, shares, 0.0, 4) == [1.0] * len(ids)
    assert clue_weights([1.0], -2.0) == [1.0]
    # Tokens that straddle characters: the first span a token overlaps gives its weight.
    assert token_weights([2, 5, 9], [(1, 4), (6, 9)], [3.0, 0.0]) == [3.0, 3.0, 0.0]


def test_a_positive_advantage_reaches_only_the_clues_that_found_something():
    """With per-clue weights the gradient of the loss on a clue's tokens scales with its weight:
    the clue with share 0 gets none when the completion is better than its group."""
    logp = torch.zeros((2, 4), requires_grad=True)
    mask = torch.ones((2, 4))
    weights = [[1.0, 2.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]]  # sample 0: clue A (tokens 1-2), clue B (3)
    adv = row_advantages(torch.tensor([1.0, -1.0]), [0, 1], weights, 4)
    loss, _ = grpo_loss(
        logp,
        logp.detach(),
        None,
        adv,
        mask,
        eps_low=0.2,
        eps_high=0.2,
        beta=0.0,
        kl_estimator="sq",
        loss_type="dapo",
        num_sequences=2,
        num_tokens=8,
        max_new_tokens=4,
    )
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-1 / 8, -2 / 8, -2 / 8, 0.0])
    assert logp.grad[1].tolist() == pytest.approx([1 / 8] * 4)


def test_clue_spans_follow_the_configured_clue_format():
    """A numbered completion's commentary line is no clue, so the spans skip it; a JSON list has none."""
    text = "1. alpha\nnote\n2) beta"
    assert clue_spans(text, 4, "numbered") == [(3, 8), (17, 21)]
    assert clue_spans('["alpha", "beta"]', 4, "json") is None
