"""Rendering states as prompts and parsing clues."""

from searchgrpo.data.traces import DocumentRecord, Entity, Goal, RoundState, SearchState
from searchgrpo.env.prompts import build_messages, parse_clues
from searchgrpo.retrieval.clues import normalise_clue


def test_parse_clues():
    p = parse_clues('1. Maren Dolvik birthplace\n- "Krallo Systems founder"\n\n* Orvane\n4) extra\n5. more', 4)
    assert p.clues == ("Maren Dolvik birthplace", "Krallo Systems founder", "Orvane", "extra")
    assert p.written == 5 and not p.unparsable
    assert parse_clues('["a b", "c"]', 4).clues == ("a b", "c")
    assert parse_clues("  \n--\n", 4).unparsable
    assert parse_clues("Clue 1: alpha\nQuery 2 - beta", 4).clues == ("alpha", "beta")
    assert normalise_clue("  Maren   DOLVIK ") == "dolvik maren" == normalise_clue("dolvik Maren Maren")


def render_state(state, max_rows, min_clues, max_clues):
    return build_messages(state, max_rows, min_clues, max_clues)[-1]["content"]


def test_render_state_shows_tables_and_cuts_long_ones():
    docs = tuple(DocumentRecord(f"d{i}", f"Doc {i}", "IRRELEVANT", "", 1) for i in range(10))
    docs += (DocumentRecord("g", "Gold doc", "IMPORTANT", "", 1),)
    before = RoundState(
        sub_goals=("find the founder",),
        entities=(Entity("Maren Dolvik", "mentioned", ("founded Krallo",)),),
        goals=(Goal("g1", "find the founder", "done", "Maren Dolvik"),),
        documents=docs,
        context=("round 1: searched",),
    )
    state = SearchState("s", "q", "Where was the founder of Krallo born?", (), 2, before, ())
    text = render_state(state, max_rows=3, min_clues=2, max_clues=4)
    assert "Question: Where was the founder of Krallo born?" in text
    assert "- Maren Dolvik (mentioned): founded Krallo" in text
    assert "[done] find the founder -> Maren Dolvik" in text
    assert text.index("IMPORTANT | Gold doc") < text.index("IRRELEVANT")  # useful documents first
    assert "(8 more documents not shown)" in text
    assert "Write 2 to 4 new search clues" in text
    empty = render_state(SearchState("s", "q", "Q?", (), 1, RoundState(), ()), 3, 2, 4)
    assert "Entities: (none)" in empty
