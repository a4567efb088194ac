"""The gold checker's rule, reward components and the environment."""

import pytest

from searchgrpo.agents.checker import CheckRequest, GoldChecker
from searchgrpo.config import RewardConfig
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.traces import RoundState, SearchState
from searchgrpo.env.reward import COMPONENTS, RewardCalculator, component_counts
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.retrieval.search import BM25Search

DOCS = [
    Document("d0", "Krallo Systems", "Krallo Systems is a software company founded by Maren Dolvik."),
    Document("d1", "Maren Dolvik", "Maren Dolvik was born in Orvane and studied law."),
    Document("d2", "Orvane", "Orvane is a river city mentioned nowhere else."),
    Document("d3", "Dolvik Prize", "A prize named after Maren Dolvik, the founder."),
    Document("d4", "Get Low (song)", "A song."),
    Document("d5", "Zeta", "Unrelated text about zebras."),
]
QUESTION = "In which city was the founder of Krallo Systems born?"


def checker():
    corpus = Corpus(DOCS)
    labels = QuestionLabels(QUESTION, {"d0": Label.IMPORTANT, "d1": Label.IMPORTANT, "d5": Label.RELEVANT})
    return GoldChecker(corpus, {"q": labels, "q2": QuestionLabels("Who sang Get Low?")})


def label(c, qid, docid, question=QUESTION):
    d = next(x for x in DOCS if x.docid == docid)
    return c.check([CheckRequest(qid, question, (), d.docid, d.title, d.text)])[0].label


def test_gold_checker_rule():
    c = checker()
    assert label(c, "q", "d0") is Label.IMPORTANT  # gold
    assert label(c, "q", "d5") is Label.RELEVANT  # recorded label wins
    assert label(c, "q", "d3") is Label.RELEVANT  # mentions a gold document's title
    assert label(c, "q", "d2") is Label.IRRELEVANT
    assert label(c, "q2", "d4", "Who sang Get Low?") is Label.RELEVANT  # title (minus parenthetical) in question
    assert label(c, "unknown-question", "d2") is Label.IRRELEVANT


def test_component_counts_table():
    cases = [
        # retrieved, dup, unparsable, written -> expected non-zero counts
        (
            [(Label.IMPORTANT, False), (Label.IMPORTANT, True)],
            0,
            False,
            2,
            {"new_important": 1, "already_discovered": 1, "retrieved_doc": 2},
        ),
        (
            [(Label.RELEVANT, False), (Label.IRRELEVANT, False)],
            1,
            False,
            3,
            {"new_relevant": 1, "irrelevant": 1, "duplicate_clue": 1, "retrieved_doc": 2},
        ),
        ([], 0, True, 0, {"unparsable": 1}),
        ([], 0, False, 1, {"clue_count_out_of_bounds": 1}),
        ([], 0, False, 7, {"clue_count_out_of_bounds": 3}),
    ]
    for retrieved, dup, unparsable, written, expected in cases:
        counts = component_counts(
            retrieved=retrieved,
            duplicate_clues=dup,
            unparsable=unparsable,
            clues_written=written,
            min_clues=2,
            max_clues=4,
        )
        assert set(counts) == set(COMPONENTS)
        assert {k: v for k, v in counts.items() if v} == expected


def test_reward_is_the_weighted_sum():
    calc = RewardCalculator(RewardConfig())
    b = calc.combine({"new_important": 2, "retrieved_doc": 5, "duplicate_clue": 1, "invented_number": 1})
    assert b.weighted["new_important"] == 2.0
    assert b.weighted["retrieved_doc"] == pytest.approx(-0.1)
    assert b.total == pytest.approx(2.0 - 0.1 - 0.25 - 0.25)
    assert b.weighted["unparsable"] == 0.0 and str(b.weighted["unparsable"]) == "0.0"  # never -0.0


def make_env(top_k=2):
    corpus = Corpus(DOCS)
    return SearchRoundEnv(
        BM25Search(corpus), checker(), RewardCalculator(RewardConfig()), top_k=top_k, min_clues=2, max_clues=4
    )


STATE = SearchState("q/run_001/r003", "q", QUESTION, (), 3, RoundState(discovered_docids=("d0",)), ("x", "y"))


def test_env_step_reports_docs_verdicts_and_reward():
    env = make_env()
    env.reset(STATE)
    result = env.step("Maren Dolvik born\n2. maren   dolvik BORN\nKrallo Systems")
    assert result.clues == ("Maren Dolvik born", "maren dolvik BORN", "Krallo Systems")
    by_id = {d.docid: d for d in result.docs}
    assert by_id["d1"].label is Label.IMPORTANT and by_id["d1"].new and by_id["d1"].clue_index == 0
    assert not by_id["d0"].new  # already discovered
    counts = result.reward.counts
    assert counts["new_important"] == 1 and counts["duplicate_clue"] == 1 and counts["already_discovered"] == 1
    assert result.reward.total == pytest.approx(sum(result.reward.weighted.values()))


def test_anti_hacking_components_and_gain():
    corpus = Corpus(DOCS)
    calc = RewardCalculator(RewardConfig(gain_over_original=1.0))
    env = SearchRoundEnv(BM25Search(corpus), checker(), calc, top_k=2, min_clues=2, max_clues=4, max_clue_words=4)
    state = SearchState("q/run_001/r001", "q", QUESTION, (), 1, RoundState(), ("Krallo Systems", "software company"))
    # The original clues find d0 (IMPORTANT): gain is measured against that one document.
    stuffed, copy, better = env.score_group(
        state,
        [
            "Maren Dolvik born Orvane city law studied\nKrallo Systems",
            "In which city was the founder of Krallo Systems born?\nzebras",
            "Krallo Systems founder\nDolvik studied law",
        ],
    )
    assert stuffed.reward.counts["long_clue"] == 1
    assert copy.reward.counts["question_copy"] == 1 and copy.reward.weighted["question_copy"] == -0.5
    assert better.reward.counts["new_important"] == 2 and better.reward.counts["gain_over_original"] == 1
    assert better.reward.counts["long_clue"] == 0 and better.reward.counts["question_copy"] == 0


def test_a_clue_that_retrieves_nothing_scores_below_a_real_search():
    """The hack seen in the efficacy run: with nothing new left to find, clues of words the corpus
    lacks (the tables' verdict labels) retrieved nothing and scored 0, above any real search."""
    env = make_env()
    empty, both, real = env.score_group(
        STATE,
        [
            "IRRELEVANT: IRRELEVANT\nIRRELEVANT | IRRELEVANT | IRRELEV",
            "IRRELEVANT\nzebras",
            "zebras\nOrvane river",
        ],
    )
    assert empty.docs == () and empty.reward.counts["empty_clue"] == 2
    assert empty.reward.counts["table_copy"] == 2  # the verdict labels are also the table's syntax
    assert empty.reward.total == pytest.approx(2 * -0.3 + 2 * -0.25)
    assert both.reward.counts["empty_clue"] == 1 and real.reward.counts["empty_clue"] == 0
    assert empty.reward.total < both.reward.total < real.reward.total
    duplicated = env.score_group(STATE, ["IRRELEVANT\nirrelevant"])[0]  # a repeat is a duplicate, not empty twice
    assert duplicated.reward.counts["empty_clue"] == 1 and duplicated.reward.counts["duplicate_clue"] == 1


def test_a_clue_rephrasing_the_planners_sub_goal_is_penalised():
    """Efficacy v2d/v2e's template: a second clue "Who or what X leads to" on the rule Planner's
    sub-goal "find the document about who or what X leads to"; BM25 reads it as X plus filler."""
    env = make_env()
    goals = ("find the document about Krallo Systems", "find the document about who or what Krallo Systems leads to")
    state = SearchState(
        "q/run_001/r002", "q", QUESTION, (), 2, RoundState(discovered_docids=("d0",), sub_goals=goals), ("x", "y")
    )
    copied, searched = env.score_group(
        state, ["Krallo Systems\nWho or what Krallo Systems leads to", "Krallo Systems\nfounder Maren Dolvik"]
    )
    assert copied.reward.counts["goal_copy"] == 1 and copied.reward.weighted["goal_copy"] == pytest.approx(-0.25)
    assert searched.reward.counts["goal_copy"] == 0
    # Without sub-goals the same words are nobody's wording: nothing is copied.
    assert env.score_group(STATE, ["Who or what Krallo Systems leads to"])[0].reward.counts["goal_copy"] == 0


def test_a_table_row_stamped_on_a_clue_costs_what_the_search_gains_nothing_from():
    """Efficacy v2b's hack: with nothing left to find, the policy stamped a row of the prompt's
    document table on its clues ("IRRELEVANT | Suzanne Iroche"); they still retrieve documents,
    so only the clue text shows it."""
    env = make_env()
    stamped, plain = env.score_group(
        STATE, ["IMPERVERBIO | Orvane river\nRELEVANT zebras Orvane", "Orvane river\nzebras Orvane"]
    )
    assert stamped.reward.counts["table_copy"] == 2 and plain.reward.counts["table_copy"] == 0
    assert stamped.docs and stamped.reward.weighted["table_copy"] == pytest.approx(-0.5)
    assert stamped.reward.total < plain.reward.total


def test_env_unparsable_and_group_scoring():
    env = make_env()
    results = env.score_group(STATE, ["", "...", ["Orvane river", "zebras"]])
    assert results[0].parsed.unparsable and results[0].reward.counts["unparsable"] == 1
    assert results[1].parsed.unparsable
    assert not results[2].parsed.unparsable and {d.docid for d in results[2].docs} >= {"d2", "d5"}
    with pytest.raises(RuntimeError):
        make_env().step("x")
