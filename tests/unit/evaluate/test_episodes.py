"""The multi-agent loop (`episodes.play`), its per-round measures, and `eval --episodes` on the tiny model."""

import pytest

from searchgrpo.agents.checker import GoldChecker
from searchgrpo.agents.rules import RuleEntityManager, RulePlanner
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.episodes.play import EpisodeStart, initial_state, play
from searchgrpo.evaluate.episode_eval import episode_values, rounds_played
from searchgrpo.retrieval.search import BM25Search
from tests.helpers.tiny import tiny_config

DOCS = [
    Document("a", "Alder Vane", "Alder Vane is a painter born in Corran."),
    Document("b", "Corran", "Corran is a harbour town on the river Sel."),
    Document("c", "Sel", "The Sel is a river that flows into the northern sea."),
    Document("x", "Zeta", "Unrelated text about zebras and zinc."),
    Document("y", "Yarrow", "A plant with white flowers."),
]
QUESTION = "Which river flows through the town where Alder Vane was born?"


class ScriptedExecutor:
    """Round r's clues come from a fixed script; records what it was asked."""

    def __init__(self, script):
        self.script, self.asked = script, []

    def write_clues(self, requests):
        self.asked += [(r.question_id, r.round_no) for r in requests]
        return [list(self.script.get(r.round_no, ["zebras zinc"])) for r in requests]


def toy_episode(script, rounds=6, doc_budget=None):
    corpus = Corpus(DOCS)
    gold = frozenset({"a", "b", "c"})
    checker = GoldChecker(corpus, {"q": QuestionLabels(QUESTION, dict.fromkeys(gold, Label.IMPORTANT))})
    start = EpisodeStart(
        "q", QUESTION, (), gold, initial_state(QUESTION, ["find Alder Vane", "find the town", "find the river"])
    )
    executor = ScriptedExecutor(script)
    (episode,) = play(
        [start],
        planner=RulePlanner(rounds),
        executor=executor,
        entity_manager=RuleEntityManager(),
        retriever=BM25Search(corpus),
        checker=checker,
        top_k=1,
        doc_budget=doc_budget,
    )
    return episode, executor


def test_a_hand_built_episode_has_the_recall_curve_it_should():
    # Round 1 finds Alder Vane; the rule Planner then EXTRACTs (round 2); round 3's clues find Corran
    # and the Sel; every sub-goal is then done, so round 4 is EXTRACT and round 5 ANSWER.
    script = {1: ["Alder Vane painter"], 3: ["Corran harbour town", "Sel river northern sea"]}
    episode, executor = toy_episode(script)
    assert [r.strategy for r in episode.rounds] == ["SEARCH", "EXTRACT", "SEARCH", "EXTRACT", "ANSWER"]
    assert executor.asked == [("q", 1), ("q", 3)]
    assert [r.checked for r in episode.rounds if r.strategy == "SEARCH"] == [("a",), ("b", "c")]
    values = episode_values(episode, rounds=6)
    assert [values[f"recall_round_{r}"] for r in range(1, 7)] == pytest.approx([1 / 3, 1 / 3, 1, 1, 1, 1])
    assert values["rounds_to_full"] == 3 and values["full_coverage"] == 1
    assert values["docs_checked"] == 3 and values["important_found"] == 3
    assert values["search_rounds"] == 2 and values["clues_per_search"] == 1.5
    # The entity table was filled from the IMPORTANT documents, and the states of the SEARCH rounds
    # are training states whose context is the state before the round.
    assert any(e.name == "Alder Vane" for e in episode.state.entities)
    states = episode.search_states()
    assert [s.round for s in states] == [1, 3] and states[1].before.round == 2
    assert states[1].original_clues == ("Corran harbour town", "Sel river northern sea")


def test_progress_counts_question_rounds_each_turn_and_an_answer_completes_them():
    # Two questions in lockstep: one answers at round 5 (the script above), one never finds anything
    # and plays all 6 rounds. Progress after each turn: every live episode's rounds so far, and
    # all 6 for an episode that has answered.
    corpus = Corpus(DOCS)
    gold = frozenset({"a", "b", "c"})
    labels = QuestionLabels(QUESTION, dict.fromkeys(gold, Label.IMPORTANT))
    checker = GoldChecker(corpus, {"q": labels, "r": labels})
    goals = ["find Alder Vane", "find the town", "find the river"]
    starts = [EpisodeStart(q, QUESTION, (), gold, initial_state(QUESTION, goals)) for q in ("q", "r")]

    class PerQuestion(ScriptedExecutor):
        def write_clues(self, requests):
            script = {1: ["Alder Vane painter"], 3: ["Corran harbour town", "Sel river northern sea"]}
            return [
                list(script.get(r.round_no, ["zebras zinc"])) if r.question_id == "q" else ["zinc"] for r in requests
            ]

    seen = []
    play(
        starts,
        planner=RulePlanner(6),
        executor=PerQuestion({}),
        entity_manager=RuleEntityManager(),
        retriever=BM25Search(corpus),
        checker=checker,
        top_k=1,
        on_turn=lambda episodes: seen.append(rounds_played(episodes, 6)),
    )
    assert seen == [0, 2, 4, 6, 8, 6 + 5, 6 + 6]


def test_an_episode_that_never_finds_everything_is_censored():
    script = {r: ["zebras zinc"] for r in range(1, 7)}
    episode, _ = toy_episode(script, rounds=4)
    values = episode_values(episode, rounds=4)
    assert values["rounds_to_full"] == 5 and values["full_coverage"] == 0  # censored at rounds + 1
    assert values["recall_round_4"] == 0 and values["important_found"] == 0
    assert values["docs_checked"] == 1  # the same document is never sent to the checker twice


def test_a_document_budget_caps_what_the_checker_sees():
    script = {1: ["Alder Vane painter", "Corran harbour town"], 3: ["Sel river northern sea"]}
    full, _ = toy_episode(script)
    capped, _ = toy_episode(script, doc_budget=1)
    assert full.rounds[0].checked == ("a", "b") and capped.rounds[0].checked == ("a",)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from searchgrpo.train.trainer import Trainer

    tmp = tmp_path_factory.mktemp("episodes")
    cfg = tiny_config(tmp, "train.max_steps=1", "train.save_every=1", "train.run_name=r")
    return cfg, Trainer(cfg).train().run_dir
