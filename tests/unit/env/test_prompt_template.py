"""The Executor's prompt as a template: the built-in one renders the old prompt exactly, token for
token; a user's template, its errors (one line naming file and line), clue formats, the cache key
and the recorded prompt."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from searchgrpo.data.states import load_states
from searchgrpo.data.traces import DocumentRecord, Entity, Goal, RoundState, SearchState
from searchgrpo.env.prompt_record import PromptSizes, read_prompt_record, write_prompt_record
from searchgrpo.env.prompt_template import DEFAULT_TEMPLATE, TemplateError, load_template
from searchgrpo.env.prompts import build_messages, parse_clues, system_prompt
from searchgrpo.policy.model import load_tokenizer, resolve_base
from searchgrpo.policy.sampling import Prompts, encode_prompt
from searchgrpo.world import load_dataset
from tests.helpers import ROOT, prompt_reference
from tests.helpers.tiny import tiny_config

SIZES = [(1, 2, 4), (2, 2, 4), (4, 1, 6), (12, 2, 4), (100, 3, 3)]
"""(max_rows, min_clues, max_clues): each cut of the tables, and other clue counts."""


def odd_states() -> list[SearchState]:
    """States with what text can hold: empty tables, missing titles and verdicts, newlines, tabs,
    non-ASCII, Jinja-looking text, very long facts, many rows."""
    rng = random.Random(7)
    words = ["Mar\u00e9n", "{{ x }}", "{% if %}", "a\nb", " lead ", "\t", "Z\u00fcrich", "Q&A <b>", "—", "", "?"]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    out = [SearchState("empty", "q", "", (), 1, RoundState(), ())]
    for i in range(40):
        docs = tuple(
            DocumentRecord(
                f"d{i}-{j}",
                rng.choice(["", text(2)]),
                rng.choice(["", "IMPORTANT", "relevant", "IRRELEVANT", "odd"]),
                text(1),
                rng.randint(0, 5),
            )
            for j in range(rng.randint(0, 30))
        )
        before = RoundState(
            round=rng.randint(0, 4),
            sub_goals=tuple(text(3) for _ in range(rng.randint(0, 4))),
            entities=tuple(
                Entity(
                    text(2) or "e",
                    rng.choice(["", "person", text(1)]),
                    tuple(text(60) for _ in range(rng.randint(0, 3))),
                )
                for _ in range(rng.randint(0, 20))
            ),
            goals=tuple(
                Goal(f"g{k}", text(4), rng.choice(["open", "done", ""]), rng.choice([None, "", text(2)]))
                for k in range(rng.randint(0, 15))
            ),
            documents=docs,
            context=tuple(text(5) for _ in range(rng.randint(0, 20))),
        )
        out.append(SearchState(f"s{i}", "q", text(8), (), 2, before, ()))
    return out


@pytest.fixture(scope="module")
def demo_states(tmp_path_factory) -> list[SearchState]:
    ds = load_dataset(tiny_config(tmp_path_factory.mktemp("prompts")))
    return [*ds.train, *ds.eval]


@pytest.fixture(scope="module")
def trace_states(tmp_path_factory) -> list[SearchState]:
    """The states of a traces folder imported from the documented example log."""
    from searchgrpo.data.agent_log import import_agent_logs

    out = tmp_path_factory.mktemp("traces") / "traces"
    import_agent_logs([ROOT / "docs" / "examples" / "agent_log.jsonl"], out)
    return load_states(out, min_clues_per_round=0).states


def test_the_built_in_template_renders_the_old_prompt_exactly(demo_states, trace_states):
    states = [*demo_states, *trace_states, *odd_states()]
    assert len(demo_states) > 50 and len(trace_states) == 6
    template = load_template()
    compared = 0
    for state in states:
        for rows, low, high in SIZES:
            want = prompt_reference.build_messages(state, rows, low, high)
            assert template.messages(state, max_rows=rows, min_clues=low, max_clues=high) == want, state.state_id
            assert build_messages(state, rows, low, high) == want
            compared += 1
    assert compared == len(states) * len(SIZES)
    assert system_prompt() == prompt_reference.SYSTEM_PROMPT and template.is_default


def test_the_built_in_template_gives_the_old_token_ids(demo_states, tmp_path):
    """Token for token through the chat template, tables cut to fit as before."""
    cfg = tiny_config(tmp_path)
    tokenizer = load_tokenizer(resolve_base(cfg).path)

    def old_encode(state, max_rows, max_tokens):
        rows = max_rows
        while True:
            messages = prompt_reference.build_messages(state, rows, 2, 4)
            ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])
            if len(ids) <= max_tokens:
                return ids
            if rows == 1:
                head = max_tokens // 2
                return ids[:head] + ids[len(ids) - (max_tokens - head) :]
            rows = max(1, rows // 2)

    for state in [*demo_states[:40], *odd_states()[:10]]:
        for max_tokens in (120, 384, 4096):
            got = encode_prompt(tokenizer, state, max_rows=12, max_tokens=max_tokens, min_clues=2, max_clues=4)
            assert got == old_encode(state, 12, max_tokens), (state.state_id, max_tokens)


def write(tmp_path: Path, text: str, name: str = "mine.jinja") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


STATE = SearchState(
    "q1/run_001/r002",
    "q1",
    "Which university did the director of Inception attend?",
    (),
    2,
    RoundState(
        sub_goals=("find who directed Inception",),
        entities=(Entity("Christopher Nolan", "person", ("directed Inception",)),),
        documents=(DocumentRecord("wiki:Inception#0", "Inception", "IMPORTANT", "", 1),),
    ),
    (),
)


def test_a_users_template_renders_its_own_prompt(tmp_path):
    path = write(
        tmp_path,
        "{% block user %}\nQ[{{ question_id }}, round {{ round }}]: {{ question }}\n"
        "{% for e in entities %}* {{ e.name }} ({{ e.facts | join(', ') | short(12) }})\n{% endfor %}"
        "{% for d in documents %}{{ d.docid }}={{ d.verdict }}\n{% endfor %}"
        "Give {{ min_clues }}-{{ max_clues }} clues as {{ clue_format }}.\n{% endblock %}\n",
    )
    template = load_template(path, "json")
    messages = template.messages(STATE, max_rows=5, min_clues=2, max_clues=3)
    assert messages == [  # no system block: no system message
        {
            "role": "user",
            "content": "Q[q1, round 2]: Which university did the director of Inception attend?\n"
            "* Christopher Nolan (directed In…)\nwiki:Inception#0=IMPORTANT\nGive 2-3 clues as json.",
        }
    ]
    assert template.digest != load_template().digest and not template.is_default
    assert template.version == f"executor-template:{template.digest[:12]}"


@pytest.mark.parametrize(
    "text, words",
    [
        ("{% block user %}\nQ: {{ question }\n{% endblock %}", ["mine.jinja:2:", "syntax error"]),
        (
            "{% block user %}\nQ: {{ question }}\n{% for x in y %}{% endfor %}{% endblock %}",
            ["mine.jinja:3:", "'y' is undefined"],
        ),
        ("{% block user %}\n\n{{ entities[0].name }}{% endblock %}", ["mine.jinja:3:", "render"]),
        ("Just text with no blocks.", ["mine.jinja:", "no {% block user %}"]),
        ("{% block user %}\n{% include 'other.jinja' %}{% endblock %}", ["mine.jinja:2:", "self-contained"]),
        ("{% block user %}{{ ''.__class__ }}{% endblock %}", ["mine.jinja:1:", "unsafe"]),
    ],
)
def test_template_errors_are_one_line_naming_file_and_line(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(TemplateError) as info:
        template = load_template(path)
        template.messages(SearchState("e", "q", "Q?", (), 1, RoundState(), ()), max_rows=3, min_clues=2, max_clues=4)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    for w in words:
        assert w in message, message


def test_unreadable_templates_are_one_line(tmp_path):
    with pytest.raises(TemplateError, match=r"missing\.jinja: prompt template not found"):
        load_template(tmp_path / "missing.jinja")
    bad = tmp_path / "bad.jinja"
    bad.write_bytes(b"{% block user %}\xff{% endblock %}")
    with pytest.raises(TemplateError, match="not valid UTF-8"):
        load_template(bad)
    with pytest.raises(TemplateError, match="not a file"):
        load_template(tmp_path)


@pytest.mark.parametrize(
    "fmt, completion, clues",
    [
        ("lines", "- alpha beta\n2. gamma\n\nClue 3: delta", ("alpha beta", "gamma", "delta")),
        (
            "numbered",
            "Here are clues:\n1. alpha beta\n(2) gamma\n- not numbered\n3) delta",
            ("alpha beta", "gamma", "delta"),
        ),
        ("json", 'Sure.\n```json\n["alpha beta", "gamma"]\n```', ("alpha beta", "gamma")),
        ("json", "alpha beta\ngamma", ()),
        ("json", '["alpha", 3]', ()),
        ("numbered", "alpha\nbeta", ()),
    ],
)
def test_each_clue_format_is_parsed_as_the_prompt_asks(fmt, completion, clues):
    parsed = parse_clues(completion, 4, fmt)
    assert parsed.clues == clues and parsed.unparsable == (not clues)


@pytest.mark.parametrize("fmt, asks", [("numbered", "numbered 1., 2., ..."), ("json", "as a JSON list of strings")])
def test_the_built_in_template_asks_for_the_configured_format(fmt, asks):
    text = load_template(None, fmt).messages(STATE, max_rows=4, min_clues=2, max_clues=4)[-1]["content"]
    assert asks in text.splitlines()[-1]


def test_prompt_cache_is_keyed_by_the_templates_digest(tmp_path):
    cfg = tiny_config(tmp_path)
    tokenizer = load_tokenizer(resolve_base(cfg).path)
    mine = load_template(write(tmp_path, "{% block user %}Only: {{ question }}{% endblock %}"))
    builtin, own = Prompts(tokenizer, cfg), Prompts(tokenizer, cfg, mine)
    first = builtin(STATE)
    assert builtin(STATE) is first  # cached
    assert own(STATE) != first and tokenizer.decode(own(STATE)).count("Only: Which university") == 1
    assert set(own._cache) == {(mine.digest, STATE.state_id)}
    own.forget([STATE])
    assert not own._cache


def test_a_recorded_prompt_renders_as_recorded_and_refuses_an_edited_copy(tmp_path):
    path = write(tmp_path, "{% block system %}Be brief.{% endblock %}{% block user %}{{ question }}{% endblock %}")
    mine = load_template(path, "numbered")
    (tmp_path / "rec").mkdir()
    info = write_prompt_record(tmp_path / "rec", mine, PromptSizes(5, 2, 3, 512), source="/prod/prompt.jinja")
    assert info["sha256"] == mine.digest and info["source"] == "/prod/prompt.jinja"
    record = read_prompt_record(tmp_path / "rec")
    assert record.messages(STATE) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": STATE.question},
    ]
    assert record.parse("1. a b\nnote\n2. c").clues == ("a b", "c")
    assert json.loads((tmp_path / "rec" / "prompt.json").read_text())["clue_format"] == "numbered"
    (tmp_path / "rec" / "prompt_template.jinja").write_text("{% block user %}edited{% endblock %}")
    with pytest.raises(TemplateError, match="edited after it was recorded"):
        read_prompt_record(tmp_path / "rec")
    with pytest.raises(TemplateError, match="no recorded prompt"):
        read_prompt_record(tmp_path)


def test_the_built_in_template_is_a_file_a_user_can_copy():
    text = DEFAULT_TEMPLATE.read_text(encoding="utf-8")
    assert "{% block user %}" in text and "{% block system %}" in text
    assert load_template(DEFAULT_TEMPLATE).is_default


def test_a_state_with_replaced_tables_still_matches(demo_states):
    """Documents given in another order are sorted by use the same way in both."""
    state = next(s for s in demo_states if len(s.before.documents) > 3)
    shuffled = replace(state, before=replace(state.before, documents=tuple(reversed(state.before.documents))))
    assert build_messages(shuffled, 3, 2, 4) == prompt_reference.build_messages(shuffled, 3, 2, 4)


def test_a_recorded_prompt_fits_tables_to_the_token_budget_as_training_did(demo_states, tmp_path):
    cfg = tiny_config(tmp_path)
    tokenizer = load_tokenizer(resolve_base(cfg).path)
    (tmp_path / "rec").mkdir()
    write_prompt_record(tmp_path / "rec", load_template(), PromptSizes(12, 2, 4, 200))
    record = read_prompt_record(tmp_path / "rec")
    cut = 0
    for state in demo_states[:30]:
        messages = record.fitted(state, tokenizer)
        ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])
        trained = encode_prompt(tokenizer, state, max_rows=12, max_tokens=200, min_clues=2, max_clues=4)
        assert ids == trained or len(ids) > 200  # equal, unless even one row per table was too long
        cut += messages != record.messages(state)
    assert cut  # some states needed their tables cut


def test_only_the_blocks_the_file_renders_are_messages(tmp_path):
    text = "{% if sub_goals %}{% block system %}Plan: {{ sub_goals | join(', ') }}{% endblock %}{% endif %}"
    template = load_template(write(tmp_path, text + "{% block user %}{{ question }}{% endblock %}"))
    with_goals = template.messages(STATE, max_rows=3, min_clues=2, max_clues=4)
    assert with_goals[0] == {"role": "system", "content": "Plan: find who directed Inception"}
    bare = SearchState("b", "q", "Q?", (), 1, RoundState(), ())
    assert template.messages(bare, max_rows=3, min_clues=2, max_clues=4) == [{"role": "user", "content": "Q?"}]
    hidden = load_template(write(tmp_path, "{% if false %}{% block user %}x{% endblock %}{% endif %}", "h.jinja"))
    with pytest.raises(TemplateError, match=r"rendered no .* for state 'b'"):
        hidden.messages(bare, max_rows=3, min_clues=2, max_clues=4)
