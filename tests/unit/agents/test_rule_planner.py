"""The rule Planner's decomposition of a question into sub-goals, and when it answers."""

import pytest

from searchgrpo.agents.checker import GoldChecker
from searchgrpo.agents.rules import RuleEntityManager, RulePlanner, bridge_relation
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.episodes.play import EpisodeStart, initial_state, planned_sub_goals, play
from searchgrpo.retrieval.search import BM25Search
from tests.unit.evaluate.test_episodes import ScriptedExecutor


@pytest.mark.parametrize(
    ("question", "relation"),
    [
        # 2WikiMultihopQA's bridge comparisons: each side needs its film's page, then its director's.
        (
            "Which film has the director born first, Zombie Night (2003 Film) or The New Swiss Family Robinson?",
            "director",
        ),
        (
            "Do director of film With Time To Kill and director of film The Undercover Woman share a nationality?",
            "director",
        ),
        ("Do both films Hell Squad (1958 Film) and Melvilasom have the directors from the same country?", "director"),
        ("Which film whose director was born first, Muthukkal Moondru or Three Desperate Men?", "director"),
        ("Are the founders of Krallo Systems and Brin Labs from the same city?", "founder"),
        # Comparisons of the named entities themselves (HotpotQA): their own pages answer them.
        ("Which director had the longest career, Alain Resnais or Scott Sidney?", None),
        ("Are Wolfgang Becker and Paul Andrew Williams both film directors?", None),
        ("are the documentaries Out of Place and The Mosuo Sisters by the same director ?", None),
        ("Which is a record producer, Zach Bogosian or Daron Malakian?", None),
        # A chain through one entity, not a comparison.
        ("Who is the mother of the director of film Polish-Russian War?", None),
    ],
)
def test_a_bridge_is_found_only_in_a_comparison_through_a_relation(question, relation):
    assert bridge_relation(question) == relation


def test_a_comparison_through_a_bridge_gets_a_goal_per_side_and_hop():
    goals = planned_sub_goals(
        "Which film has the director born first, Zombie Night (2003 Film) or Three Desperate Men?"
    )
    assert goals == (
        "find the document about Zombie Night",
        "find the document about Three Desperate Men",
        "find the document about the director of Zombie Night",
        "find the document about the director of Three Desperate Men",
    )


def test_a_plain_comparison_keeps_two_goals_and_a_parenthesis_names_no_side():
    assert planned_sub_goals("Which was released first, Hell Squad (1958 Film) or Melvilasom?") == (
        "find the document about Hell Squad",
        "find the document about Melvilasom",
    )


DOCS = [
    Document("f1", "Gray Harbour", "Gray Harbour is a 1950 drama film directed by Orin Vale."),
    Document("f2", "Silent Quarry", "Silent Quarry is a 1962 western film directed by Tamsin Hale."),
    Document("d1", "Orin Vale", "Orin Vale was a film director born in 1901 in Corran."),
    Document("d2", "Tamsin Hale", "Tamsin Hale was a film director born in 1920 in Sel."),
    Document("x", "Zeta", "Unrelated text about zebras and zinc."),
]
QUESTION = "Which film has the director born first, Gray Harbour or Silent Quarry?"


def test_the_planner_searches_on_for_the_bridges_after_the_two_films():
    # Round 1 finds both films. With a goal per film only, every goal would be done and the Planner
    # would answer at round 3 without the directors; with the bridge goals it searches for them.
    corpus = Corpus(DOCS)
    gold = frozenset({"f1", "f2", "d1", "d2"})
    checker = GoldChecker(corpus, {"q": QuestionLabels(QUESTION, dict.fromkeys(gold, Label.IMPORTANT))})
    start = EpisodeStart("q", QUESTION, (), gold, initial_state(QUESTION))
    script = {1: ["Gray Harbour drama film", "Silent Quarry western film"], 3: ["Orin Vale born", "Tamsin Hale born"]}
    (episode,) = play(
        [start],
        planner=RulePlanner(6),
        executor=ScriptedExecutor(script),
        entity_manager=RuleEntityManager(),
        retriever=BM25Search(corpus),
        checker=checker,
        top_k=1,
    )
    assert [r.strategy for r in episode.rounds] == ["SEARCH", "EXTRACT", "SEARCH", "EXTRACT", "ANSWER"]
    assert episode.discovered_after(6) == gold
    # The bridges' names were in the entity table before the round that searched for them.
    assert {"Orin Vale", "Tamsin Hale"} <= {e.name for e in episode.rounds[1].after.entities}
