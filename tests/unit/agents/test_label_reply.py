"""Every real-world form of a checker's reply is its exact label or unparsable (None), never a
label word picked out of prose (searchgrpo/agents/label_reply.py)."""

import pytest

from searchgrpo.agents.label_reply import parse_label, without_thinking
from searchgrpo.data.labels import Label

IMP, R, X = Label.IMPORTANT, Label.RELEVANT, Label.IRRELEVANT

REPLIES = [
    # the bare label, as grammar- or choice-constrained servers return it
    ("IMPORTANT", IMP),
    ("RELEVANT", R),
    ("IRRELEVANT", X),
    ("important", IMP),
    ("  Relevant \n", R),
    ("Irrelevant.", X),  # one trailing period: how models end a sentence
    ("IMPORTANT..", None),
    ("IMPORTANT!", None),
    ('"IMPORTANT"', None),
    ("**IMPORTANT**", None),
    ("Label: IMPORTANT", None),
    ("IMPORTANT\nThe document names the founder.", None),
    # JSON, as json_schema-constrained servers return it
    ('{"label": "RELEVANT"}', R),
    ('{"label": " important "}', IMP),
    ('{"label": "IRRELEVANT", "reason": "about another company"}', X),
    ('{"reason": "states the founder", "label": "IMPORTANT"}', IMP),
    ('{"label": "NOT IMPORTANT"}', None),
    ('{"label": "none", "reason": "nothing IMPORTANT here"}', None),
    ('{"label": "IMPORTANT."}', None),
    ('{"label": ["IMPORTANT"]}', None),
    ('{"label": null, "verdict": "IMPORTANT"}', None),
    ('{"verdict": "IMPORTANT"}', None),
    ('{"label": "nonsense"} but IMPORTANT', None),
    ('["IMPORTANT"]', None),
    ('{"label": "IMPORT', None),  # cut at max_tokens
    ('{"label": "IMPORTANT"', None),
    # Markdown code fences around the reply
    ('```json\n{"label": "IMPORTANT"}\n```', IMP),
    ('```\n{"label": "RELEVANT"}\n```', R),
    ("```\nIRRELEVANT\n```", X),
    ('```json\n{"label": "IMPORTANT"}', None),  # an unclosed fence: cut
    # negations, questions and prose with label words in them
    ("Not important.", None),
    ("NOT IMPORTANT", None),
    ("not relevant", None),
    ("RELEVANT? No: IRRELEVANT", None),
    ("Irrelevant, not relevant", None),
    ("The document is RELEVANT to the question", None),
    ("This is IMPORTANT because it names the founder.", None),
    ("importantly", None),
    ("maybe", None),
    # thinking blocks
    ("<think>maybe IMPORTANT?</think>IRRELEVANT", X),
    ("<think>\nIt names the founder.\n</think>\n\nIMPORTANT", IMP),
    ('<THINK>hmm</THINK>{"label": "RELEVANT"}', R),
    ("<think></think>RELEVANT", R),
    ("It names the founder, so it is needed.</think>\nIMPORTANT", IMP),  # the template opened the block
    ("<think>The document mentions the founder, so IMPORTANT", None),  # cut while thinking
    ("<think>a</think><think>b", None),
    ("IMPORTANT<think>", None),
    ("<think>IMPORTANT</think>", None),  # only thinking: no answer
    # empty and cut
    ("", None),
    ("   \n", None),
    ("IMPOR", None),
    ("IRRELEV", None),
]


@pytest.mark.parametrize("reply, label", REPLIES, ids=[repr(r)[:40] for r, _ in REPLIES])
def test_a_reply_is_its_exact_label_or_unparsable(reply, label):
    assert parse_label(reply) is label


def test_every_label_is_read_in_every_accepted_form():
    for label in Label:
        for form in (label.value, label.value.lower(), f"{label.value}.", f'{{"label": "{label.value}"}}'):
            assert parse_label(form) is label, form
            assert parse_label(f"<think>x</think>{form}") is label
            assert parse_label(f"Not {form}") is None


def test_thinking_is_removed_or_the_reply_is_cut():
    assert without_thinking("<think>a</think>B<think>c</think>D") == "BD"
    assert without_thinking("a</think>B") == "B"
    assert without_thinking("<think>a") is None
    assert without_thinking("B</think>") == ""
