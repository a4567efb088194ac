"""The chat client, the checker's prompt and parsing, and the verdict cache: no server needed."""

import socket
import threading
import time

import pytest

from searchgrpo.agents.chat_client import (
    ChatClient,
    ServerUnavailable,
    choice_schema,
    constrain,
    gbnf_choice,
    retry_after_s,
)
from searchgrpo.agents.checker import CheckRequest, stats_delta
from searchgrpo.agents.llm_checker import LABELS, user_prompt
from searchgrpo.agents.verdict_cache import CacheKey, VerdictCache, question_key


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_constrain_speaks_each_dialect():
    body = {"messages": []}
    assert constrain(body, "grammar", choices=LABELS)["grammar"] == gbnf_choice(LABELS)
    assert gbnf_choice(["A", "B"]) == 'root ::= "A" | "B"'
    assert constrain(body, "choice", choices=LABELS)["structured_outputs"] == {"choice": list(LABELS)}
    fmt = constrain(body, "json_schema", choices=LABELS, name="verdict")["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == choice_schema(LABELS)
    assert constrain(body, "none", choices=LABELS) == body
    schema = {"type": "object"}
    assert constrain(body, "grammar", schema=schema)["json_schema"] == schema
    assert body == {"messages": []}  # never modified in place


def test_prompt_holds_question_sub_goals_and_cut_document():
    req = CheckRequest("q", "Who founded X?", ("find X", "find its founder"), "d1", "X Corp", "word " * 1000)
    text = user_prompt(req, max_doc_chars=100)
    assert "Question: Who founded X?" in text and "1. find X\n2. find its founder" in text
    assert "Document title: X Corp" in text and text.index("Question") < text.index("Document title")
    assert len(text) < 400 and "…" in text


def test_retries_stop_at_the_budget_with_a_clear_error():
    client = ChatClient(f"http://127.0.0.1:{closed_port()}/v1", max_retries=3, sleep=lambda s: None)
    with pytest.raises(ServerUnavailable, match="failed 4 times"):
        client.chat({"messages": []})
    assert client.stats.failures == 4 and client.stats.calls == 0 and client.stats.in_flight == 0


def test_stats_delta_names_and_rates():
    before = {
        "requests": 10,
        "cache_hits": 4,
        "calls": 6,
        "failures": 0,
        "unparsable": 0,
        "latency_s": 3.0,
        "wall_s": 2,
    }
    after = {
        "requests": 30,
        "cache_hits": 19,
        "calls": 11,
        "failures": 2,
        "unparsable": 1,
        "latency_s": 4.0,
        "wall_s": 3,
    }
    m = stats_delta(before, after)
    assert m == {
        "checker/calls": 5,
        "checker/cache_hits": 15,
        "checker/cache_hit_rate": 0.75,
        "checker/failures": 2,
        "checker/unparsable": 1,
        "checker/latency_ms": pytest.approx(200.0),
        "checker/time_s": 1,
    }
    assert stats_delta(after, after)["checker/cache_hit_rate"] == 0.0
    # A checker that counts its replies: the running share of unparsable ones, since it started.
    running = {**after, "replies": 40, "unparsable": 3}
    assert stats_delta(before, after, running)["checker/unparsable_share"] == pytest.approx(3 / 40)
    assert stats_delta(before, after, {**running, "replies": 0})["checker/unparsable_share"] == 0.0
    assert "checker/unparsable_share" not in stats_delta(before, after, after)


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("4", 4.0),
        (" 0 ", 0.0),
        ("2.5", 2.5),
        ("Thu, 01 Jan 1970 00:01:40 GMT", 80.0),  # 100 s after the epoch, 20 s after now
        ("Thu, 01 Jan 1970 00:00:10 GMT", 0.0),  # a date already past: retry now
        ("", None),
        ("-3", None),
        ("inf", None),
        ("nan", None),
        ("soon", None),
        ("Thu, 01 Jan 1970 00:01:40", None),  # a date without a zone
    ],
)
def test_retry_after_header_values(value, seconds):
    assert retry_after_s(value, now=20.0 if "GMT" in value else None) == seconds


def test_verdict_cache_persists_and_separates_its_key(tmp_path):
    path = tmp_path / "v.sqlite"
    q = question_key("Who?", ("a", "b"))
    assert q != question_key("Who?", ("a",)) and q == question_key(" Who? ", ("a", "b"))
    key = CacheKey(q, "d1", "m", "v1")
    cache = VerdictCache(path)
    cache.put_many([(key, "IMPORTANT", "llm")])
    cache.put_many([(key, "IRRELEVANT", "later")])  # the first verdict stays: the checker is frozen
    cache.close()
    cache = VerdictCache(path)
    others = [CacheKey(q, "d2", "m", "v1"), CacheKey(q, "d1", "other-model", "v1"), CacheKey(q, "d1", "m", "v2")]
    assert cache.get_many([key, *others]) == {key: ("IMPORTANT", "llm")}
    assert len(cache) == 1
    assert b"pickle" not in path.read_bytes() and b"\x80\x04" not in path.read_bytes()


def test_verdict_cache_is_safe_across_threads(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    errors = []

    def work(t: int) -> None:
        try:
            for i in range(50):
                key = CacheKey(f"q{t}", f"d{i}", "m", "v")
                cache.put_many([(key, "RELEVANT", "")])
                assert cache.get_many([key]) == {key: ("RELEVANT", "")}
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) == 300
    keys = [CacheKey(f"q{t}", f"d{i}", "m", "v") for t in range(6) for i in range(50)]
    assert len(cache.get_many(keys)) == 300  # more keys than one SELECT takes


def test_close_cuts_retries_short():
    client = ChatClient(f"http://127.0.0.1:{closed_port()}/v1", max_retries=100, retry_deadline_s=300)
    threading.Timer(0.3, client.close).start()
    start = time.monotonic()
    with pytest.raises(ServerUnavailable, match="closed during a retry"):
        client.chat({"messages": []})
    assert time.monotonic() - start < 5
