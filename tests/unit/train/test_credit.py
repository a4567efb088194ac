"""Episode credit (issue 23.1): branches played on in the lockstep loop, their returns, and what
they change inside a group; hand-built episodes whose right answer is known."""

import pytest

from searchgrpo.agents.checker import GoldChecker
from searchgrpo.agents.rules import RuleEntityManager, RulePlanner
from searchgrpo.config import RewardConfig
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.traces import DocumentRecord, Goal, RoundState, SearchState
from searchgrpo.env.reward import RewardCalculator
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.episodes.play import EpisodeStart, advance, branch, initial_state, play
from searchgrpo.retrieval.search import BM25Search
from searchgrpo.train.episode_credit import branch_returns, credit_metrics
from searchgrpo.train.returns import LaterRound, branch_return, ranking_change
from searchgrpo.train.rollouts import ScoredGroup, choose_batch
from tests.helpers.tiny import TINY_MODEL

DOCS = [
    Document("a", "Alder Vane", "Alder Vane is a painter born in Corran."),
    Document("b", "Corran", "Corran is a harbour town on the river Sel."),
    Document("c", "Sel", "The Sel is a river that flows into the northern sea."),
    Document("r", "Harbour registry", "The registry of the northern harbours lists the coast's towns."),
    Document("x", "Zeta", "Unrelated text about zebras and zinc."),
    Document("y", "Yarrow", "A plant with white flowers."),
]
QUESTION = "Which river flows through the town where Alder Vane was born?"
GOLD = frozenset({"a", "b", "c"})
W = RewardConfig()  # the shipped weights: new IMPORTANT 1.0, a document -0.02, irrelevant 0


class StateExecutor:
    """The current policy's stand-in: it searches the town once the harbour registry is in the
    documents table (what the bridge clue set found), else it searches in vain. Records each call."""

    def __init__(self):
        self.calls = []

    def write_clues(self, requests):
        self.calls.append([(r.question_id, r.round_no) for r in requests])
        return [
            ["Corran harbour town"] if any(d.docid == "r" for d in r.state.documents) else ["zebras zinc"]
            for r in requests
        ]


def world():
    corpus = Corpus(DOCS)
    checker = GoldChecker(corpus, {"q": QuestionLabels(QUESTION, dict.fromkeys(GOLD, Label.IMPORTANT))})
    env = SearchRoundEnv(BM25Search(corpus), checker, RewardCalculator(W), top_k=1, min_clues=1, max_clues=4)
    return env


def round3_state():
    """Before SEARCH round 3: round 1 found Alder Vane, round 2 extracted it."""
    before = RoundState(
        round=2,
        strategy="EXTRACT",
        sub_goals=("find Alder Vane", "find the town", "find the river"),
        goals=(Goal("g1", "find Alder Vane", "done"), Goal("g2", "find the town"), Goal("g3", "find the river")),
        documents=(DocumentRecord("a", "Alder Vane", "IMPORTANT", "", 1),),
        discovered_docids=("a",),
    )
    return SearchState("q/r003", "q", QUESTION, (), 3, before, ())


def group_of(env, state, clue_sets, index=0):
    results = env.score_group(state, [list(c) for c in clue_sets])
    return ScoredGroup((0, index), state, [], [], results, zero_std=len({r.reward.total for r in results}) == 1)


def returns_of(group, env, executor=None, gamma=0.8):
    """The group's branch returns, played on by the rule Planner and EntityManager for 2 rounds."""
    (returns,) = branch_returns(
        [group],
        env=env,
        executor=executor or StateExecutor(),
        planner=RulePlanner(6),
        entity_manager=RuleEntityManager(),
        horizon=2,
        gamma=gamma,
    )
    return returns


def test_a_bridge_clue_earns_more_than_a_dead_end():
    """The goal test: the bridge clue set finds nothing the reward pays for (an IRRELEVANT registry),
    exactly as the dead end does (an IRRELEVANT page about zebras), so round credit cannot tell them
    apart; but the registry lets the next round find the town, and episode credit pays for it."""
    env = world()
    group = group_of(env, round3_state(), [["harbour registry"], ["zebras zinc"]])
    bridge, dead_end = group.results
    assert [d.docid for d in bridge.docs] == ["r"] and [d.docid for d in dead_end.docs] == ["x"]
    assert bridge.reward.total == dead_end.reward.total == pytest.approx(-0.02)
    assert group.zero_std  # round credit: no signal at all
    executor = StateExecutor()
    returns = returns_of(group, env, executor)
    # Bridge: round 4 searches the town and finds Corran (new IMPORTANT, 1 document checked): 0.8 x
    # (1 - 0.02); round 5 EXTRACTs (nothing to pay). Dead end: round 4 finds only the zebra page
    # again (discovered: nothing checked), round 5 the same.
    assert returns[0].own == returns[1].own == pytest.approx(-0.02)
    assert returns[0].continuation == pytest.approx(0.8 * 0.98)
    assert returns[1].continuation == 0.0
    assert returns[0].total == pytest.approx(-0.02 + 0.784) and returns[0].total > returns[1].total
    assert [r.rounds for r in returns] == [2, 2]
    # Both branches' later rounds went through one Executor call per turn of the loop.
    assert executor.calls[0] == [("q", 4), ("q", 4)]
    assert executor.calls[1] == [("q", 5)]  # the bridge EXTRACTs in round 5; the dead end searches
    group.set_credit(returns)
    assert not group.zero_std and group.rewards == [r.total for r in returns]
    assert not group.same_finds and group.usefulness("finds") == 0  # dynamic sampling judges returns


def test_a_find_the_continuation_would_make_a_round_later_earns_only_one_minus_gamma_of_it():
    """Why episode credit can pay little for an extra clue: the town's page found now by a second
    clue is found one round later by the branch without it, so the second clue's return over the
    first-clue-only set is (1 - gamma) of the find (less its document's cost), where round credit
    pays all of it. Hand-computed: the find pays 1.0 and its document costs 0.02."""
    env = world()
    group = group_of(env, round3_state(), [["harbour registry", "Corran harbour town"], ["harbour registry"]])
    now, later = group.results
    assert [d.docid for d in now.docs] == ["r", "b"] and [d.docid for d in later.docs] == ["r"]
    assert now.reward.total - later.reward.total == pytest.approx(1.0 - 0.02)  # round credit's margin
    gamma = 0.8
    returns = returns_of(group, env, gamma=gamma)
    # The first branch's later rounds find nothing new (its town search finds the discovered page);
    # the second's round 4 finds the town: 0.8 x (1 - 0.02).
    assert returns[0].continuation == 0.0
    assert returns[1].continuation == pytest.approx(gamma * 0.98)
    assert returns[0].total - returns[1].total == pytest.approx((1 - gamma) * 0.98)


def test_a_branch_is_the_episode_the_round_would_have_made():
    """A sampled clue set's branch is the state after its round as the multi-agent loop would have
    left it, made from the environment's results with no search or checker call."""
    from searchgrpo.episodes.play import Episode
    from searchgrpo.train.episode_credit import start_branch

    env = world()
    state = round3_state()
    clues = ["Corran harbour town", "harbour registry"]
    group = group_of(env, state, [clues])
    calls = []
    check = env.checker.check
    env.checker.check = lambda requests: calls.append(len(requests)) or check(requests)
    made = start_branch(group, group.results[0], env, horizon=2)
    assert calls == []
    # The same round played by the loop itself (search, check, update), stopped after it.
    start = EpisodeStart("q", QUESTION, (), GOLD, state.before)
    played = Episode(start, state=state.before, next_round=3, last_round=3)

    class Once:
        def write_clues(self, requests):
            return [clues for _ in requests]

    advance(
        [played],
        planner=RulePlanner(6),
        executor=Once(),
        entity_manager=RuleEntityManager(),
        retriever=env.retriever,
        checker=env.checker,
        top_k=1,
    )
    assert calls == [2]
    assert made.rounds == played.rounds and made.state == played.state
    assert made.found_important and made.state.discovered_docids == ("a", "b", "r")
    assert made.next_round == 4 and made.last_round == 5


def test_branches_stop_at_their_horizon_and_at_the_planners_answer():
    env = world()
    state = round3_state()
    start = EpisodeStart("q", QUESTION, (), GOLD, state.before)
    short = branch(start, 3, ["zebras zinc"], ["x"], [env.retriever.corpus.get("x")], [], rounds_after=1)
    late = branch(start, 3, ["zebras zinc"], ["x"], [env.retriever.corpus.get("x")], [], rounds_after=5)
    done = []
    advance(
        [short, late],
        planner=RulePlanner(5),
        executor=StateExecutor(),
        entity_manager=RuleEntityManager(),
        retriever=env.retriever,
        checker=env.checker,
        top_k=1,
        on_done=done.append,
    )
    assert [r.round for r in short.rounds] == [3, 4]  # one round after the sampled one, unanswered
    assert [r.strategy for r in late.rounds] == ["SEARCH", "SEARCH", "ANSWER"]  # the Planner answers at 5
    assert done == [short, late]


def test_play_from_round_one_is_unchanged_by_the_loop_taking_branches():
    """`play` is `advance` from round 1: a whole question plays as it did (tests/unit/evaluate/test_episodes.py)."""
    corpus = Corpus(DOCS)
    checker = GoldChecker(corpus, {"q": QuestionLabels(QUESTION, dict.fromkeys(GOLD, Label.IMPORTANT))})

    class Script:
        def write_clues(self, requests):
            table = {1: ["Alder Vane painter"], 3: ["Corran harbour town", "Sel river northern sea"]}
            return [table.get(r.round_no, ["zebras zinc"]) for r in requests]

    (episode,) = play(
        [EpisodeStart("q", QUESTION, (), GOLD, initial_state(QUESTION, ["find Alder Vane", "town", "river"]))],
        planner=RulePlanner(6),
        executor=Script(),
        entity_manager=RuleEntityManager(),
        retriever=BM25Search(corpus),
        checker=checker,
        top_k=1,
    )
    assert [r.strategy for r in episode.rounds] == ["SEARCH", "EXTRACT", "SEARCH", "EXTRACT", "ANSWER"]
    assert episode.next_round == 6 and episode.done


def test_return_arithmetic_by_hand():
    # own reward 0.3 (finds 1.0, minus costs and guards), then an EXTRACT, a SEARCH finding one
    # IMPORTANT and two RELEVANT among 6 checked documents, a SEARCH finding nothing among 4.
    later = [LaterRound(1), LaterRound(2, important=1, relevant=2, checked=6), LaterRound(3, checked=4)]
    b = branch_return(0.3, 1.0, later, gamma=0.5, new_important=1.0, new_relevant=0.2, retrieved_doc=-0.02)
    # 0.25 x (1 + 0.4 - 0.12) + 0.125 x (-0.08) = 0.32 - 0.01 = 0.31
    assert b.continuation == pytest.approx(0.31)
    assert b.total == pytest.approx(0.61)
    assert b.continuation_finds == pytest.approx(0.25 * 1.4)
    assert b.finds == pytest.approx(1.35)
    assert b.rounds == 3
    # gamma = 0 is round credit again.
    assert (
        branch_return(0.3, 1.0, later, gamma=0.0, new_important=1, new_relevant=0.2, retrieved_doc=-0.02).total == 0.3
    )


def test_ranking_changes_are_counted_by_hand():
    same = ranking_change([1.0, 0.5, 0.0], [1.5, 1.0, 0.2])
    assert same.discordant == 0 and not same.argmax_changed and same.pairs == 3
    flipped = ranking_change([1.0, 0.5, 0.0], [0.6, 1.0, 0.2])  # 0 and 1 swap: the best changes
    assert flipped.discordant == 1 and flipped.argmax_changed
    m = credit_metrics([[[1.0, -0.4, 2], [0.5, 0.5, 2], [0.0, 0.2, 1]], [[0.0, 0.0, 2], [0.0, 0.0, 2]]])
    assert m["credit/argmax_changed"] == 0.5 and m["credit/reordered_groups"] == 0.5
    assert m["credit/discordant_pairs"] == pytest.approx(1 / 4)
    assert m["credit/continuation_value"] == pytest.approx(0.3 / 5)
    assert m["credit/own_value"] == pytest.approx(1.5 / 5) and m["credit/branches"] == 5
    assert m["credit/continuation_rounds"] == pytest.approx(9 / 5)


def test_the_batch_is_chosen_on_returns():
    """A group that round credit finds uninformative joins the batch once its returns differ."""
    env = world()
    state = round3_state()
    flat = group_of(env, state, [["harbour registry"], ["zebras zinc"]], 0)
    flags = {flat.key: flat.usefulness("reward")}
    assert flags == {(0, 0): 2}
    returns = returns_of(flat, env)
    flat.set_credit(returns)
    other = group_of(env, state, [["zebras zinc"], ["Yarrow white flowers"]], 1)
    assert choose_batch({flat.key: flat.usefulness("reward"), other.key: other.usefulness("reward")}, 1) == {flat.key}


def test_branches_at_the_same_state_are_generated_once():
    """Greedy continuations of identical states are identical: the policy Executor generates once
    per distinct prompt, and answers every branch."""
    from searchgrpo.config import load_config
    from searchgrpo.episodes.play import ClueRequest
    from searchgrpo.policy.executor import PolicyExecutor
    from searchgrpo.policy.model import load_policy

    cfg = load_config(None, [*TINY_MODEL, "grpo.max_new_tokens=8"])
    policy = load_policy(cfg)
    state = round3_state().before
    other = RoundState(round=2, sub_goals=("find Zeta",))
    requests = [ClueRequest("q", QUESTION, s, 4) for s in (state, other, state, state)]
    once = PolicyExecutor(cfg, policy, batch_size=0, dedupe=True)
    each = PolicyExecutor(cfg, policy, batch_size=1)
    assert once.write_clues(requests) == each.write_clues(requests)
    assert (once.calls, once.generated) == (4, 2) and (each.calls, each.generated) == (4, 4)
