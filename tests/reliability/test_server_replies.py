"""Servers that answer, but not as asked: Retry-After, a 200 that is not JSON, a model still
loading, and replies that are not exactly a label.

The real `ChatClient` and `LLMChecker` talk over HTTP to `FaultServer` (127.0.0.1). Where a test
checks how long the client waits, it records the waits it asks for (`sleep=`) instead of timing
them; the two health-check tests that must outlast `timeout_s` wait for real, and only check lower
bounds (a wait is never shorter than asked).
"""

from __future__ import annotations

import dataclasses
import time
from email.utils import formatdate

import pytest

import searchgrpo.agents.chat_client as chat_client
from searchgrpo.agents.chat_client import ChatClient, NotJSONReply, ServerUnavailable
from searchgrpo.agents.checker import CheckRequest
from searchgrpo.agents.llm_checker import LLMChecker, UnparsableReplies
from searchgrpo.agents.verdict_cache import VerdictCache
from searchgrpo.data.labels import Label
from searchgrpo.events import StepFinished
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import FaultServer, assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS, tiny_config

REQUESTS = [
    CheckRequest("q1", "Who founded Mendho Pharma?", ("find the founder",), f"d{i}", f"Doc {i}", "text " * 20)
    for i in range(6)
]
CHAT = {"messages": [{"role": "user", "content": "label?"}]}


@pytest.fixture
def server():
    with FaultServer() as s:
        s.models_ok = True
        yield s


def recording_client(server: FaultServer, **kw) -> tuple[ChatClient, list[float]]:
    waits: list[float] = []
    return ChatClient(server.url, sleep=waits.append, **{"timeout_s": 5.0, **kw}), waits


# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize("status", ["429", "503"])
def test_retry_after_seconds_is_waited_instead_of_the_backoff(server, status):
    client, waits = recording_client(server)
    server.retry_after = "4"
    server.fail_next(2, status)
    assert client.chat(CHAT)["choices"][0]["message"]["content"] == "IMPORTANT"
    assert waits == [4.0, 4.0]  # the backoff would have been 0.5, then 1.0
    assert len(server.chat_requests()) == 3 and client.stats.failures == 2


def test_retry_after_as_an_http_date(server):
    client, waits = recording_client(server)
    server.retry_after = formatdate(time.time() + 30, usegmt=True)
    server.fail_next(1, "503")
    client.chat(CHAT)
    (wait,) = waits
    assert 27.0 < wait <= 30.5, wait  # HTTP dates count whole seconds


def test_a_malformed_retry_after_falls_back_to_the_backoff(server):
    client, waits = recording_client(server)
    server.retry_after = "in a while"
    server.fail_next(2, "429")
    client.chat(CHAT)
    assert waits == [chat_client.BACKOFF_START_S, 2 * chat_client.BACKOFF_START_S]


def test_a_retry_after_past_the_deadline_fails_at_once_in_one_line(server):
    client, waits = recording_client(server, retry_deadline_s=60.0)
    server.retry_after = "600"
    server.mode = "429"
    start = time.monotonic()
    with pytest.raises(ServerUnavailable) as info:
        client.chat(CHAT)
    message = str(info.value)
    assert waits == [] and len(server.chat_requests()) == 1 and time.monotonic() - start < 30
    assert "\n" not in message and f"{server.url}/chat/completions" in message
    for words in ("HTTP 429", "retry after 600 s (Retry-After)", "checker.retry_deadline_s = 60 s", "--resume"):
        assert words in message, (words, message)


# --------------------------------------------------------------------------- a 200 that is not JSON


@pytest.mark.parametrize(
    "mode, content_type, start",
    [("html", "text/html", "<!DOCTYPE html>"), ("garbage", "application/json", "<html>502")],
)
def test_a_200_that_is_not_json_is_its_own_error_never_retried(server, mode, content_type, start):
    client, waits = recording_client(server, max_retries=10)
    server.mode = mode
    with pytest.raises(NotJSONReply) as info:
        client.chat(CHAT)
    message = str(info.value)
    assert waits == [] and len(server.chat_requests()) == 1  # one attempt: not an outage
    assert "\n" not in message and f"{server.url}/chat/completions answered HTTP 200 with a non-JSON body" in message
    assert f"content-type {content_type}" in message and start in message and "ending in /v1" in message


def test_an_html_reply_stops_train_in_one_line(server, tmp_path, capsys, monkeypatch):
    server.mode = "html"
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(
        ["train", "--headless", *SETS, "--set", "checker.backend=llm", "--set", f"checker.server={server.url}"],
        capsys,
        monkeypatch,
    )
    assert code == 2
    assert_one_error_line(
        out, f"checker server {server.url}/chat/completions answered HTTP 200 with a non-JSON body", "text/html"
    )


# --------------------------------------------------------------------------- a model still loading


def test_the_health_check_waits_for_a_model_that_is_loading(server):
    notes: list[str] = []
    client = ChatClient(server.url, retry_deadline_s=120.0)
    server.models_ok = False
    server.fail_next(3, "loading")  # each answer asks for another second (no Retry-After: 1 s)
    start = time.monotonic()
    assert client.health(timeout_s=0.2, progress=notes.append) == [server.model]
    assert time.monotonic() - start >= 2.0  # three 503s, two seconds of waiting: far past timeout_s
    assert len(server.records) == 4
    assert notes and "is loading its model (HTTP 503: " in notes[0] and "Loading model" in notes[0]
    assert "checker.retry_deadline_s" in notes[0]


def test_a_503_with_retry_after_is_waited_for_as_asked(server):
    client = ChatClient(server.url, retry_deadline_s=120.0)
    server.models_ok = False
    server.retry_after = "1"
    server.fail_next(2, "503")
    start = time.monotonic()
    assert client.health(timeout_s=0.2) == [server.model]
    assert time.monotonic() - start >= 2.0


def test_a_model_that_loads_past_the_bound_fails_in_one_line(server):
    notes: list[str] = []
    client = ChatClient(server.url, retry_deadline_s=1.5)
    server.models_ok = False
    server.mode = "loading"
    with pytest.raises(ServerUnavailable) as info:
        client.health(timeout_s=0.2, progress=notes.append)
    message = str(info.value)
    assert "\n" not in message and f"{server.url}/models was still loading its model after" in message
    assert "raise checker.retry_deadline_s" in message and notes


def test_a_plain_503_still_fails_the_health_check_within_its_timeout(server):
    server.models_ok = False
    server.mode = "503"  # no "loading", no Retry-After: not a server that is starting
    start = time.monotonic()
    with pytest.raises(ServerUnavailable, match="answered HTTP 503; is it an OpenAI-compatible server"):
        ChatClient(server.url, retry_deadline_s=300.0).health(timeout_s=0.5)
    assert time.monotonic() - start < 30


# --------------------------------------------------------------------------- replies that are not a label


def checker_for(server: FaultServer, cache: VerdictCache | None = None, **kw) -> LLMChecker:
    return LLMChecker(ChatClient(server.url, timeout_s=5.0), server.model, structured_output="none", cache=cache, **kw)


@pytest.mark.parametrize("garbage", ["", "<think>The document mentions", "Not important.", "RELEVANT? No: IRRELEVANT"])
def test_an_unparsable_reply_is_never_cached(server, tmp_path, garbage):
    path = tmp_path / "verdicts.sqlite"
    server.label = garbage
    first = checker_for(server, VerdictCache(path))
    verdicts = first.check(REQUESTS[:2])
    assert [v.label for v in verdicts] == [Label.IRRELEVANT] * 2
    assert all(v.reason.startswith("unparsable reply '") for v in verdicts)
    assert first.stats()["unparsable"] == 2 and first.stats()["replies"] == 2
    assert len(first.cache) == 0
    first.close()

    server.label = "IMPORTANT"  # healthy now: a later run asks again
    second = checker_for(server, VerdictCache(path))
    assert [v.label for v in second.check(REQUESTS[:2])] == [Label.IMPORTANT] * 2
    assert len(server.chat_requests()) == 4 and second.stats()["unparsable"] == 0
    second.close()
    third = checker_for(server, VerdictCache(path))
    assert [v.label for v in third.check(REQUESTS[:2])] == [Label.IMPORTANT] * 2
    assert len(server.chat_requests()) == 4  # now from the cache
    third.close()


def test_the_unparsable_share_stops_the_checker_past_its_bound(server):
    server.label = "I would say it is IMPORTANT,\nbut \x1b[31mmaybe\u202e not"
    checker = checker_for(server, max_unparsable_frac=0.05, min_calls_for_unparsable=5)
    assert len(checker.check(REQUESTS[:4])) == 4  # 4 replies: below the minimum, no verdict yet on the share
    with pytest.raises(UnparsableReplies) as info:
        checker.check(REQUESTS[4:])
    checker.close()
    message = str(info.value)
    assert "\n" not in message and "\x1b" not in message and "\u202e" not in message
    assert f"checker server {server.url} ({server.model}): 6 of 6 replies (100%) were not exactly a label" in message
    assert "checker.max_unparsable_frac = 0.05" in message
    assert "e.g. 'I would say it is IMPORTANT,\\nbut \\x1b[31mmaybe\\u202e not'" in message


def test_a_share_within_the_bound_goes_on(server):
    checker = checker_for(server, max_unparsable_frac=0.4, min_calls_for_unparsable=1)
    server.label = "IMPORTANT"
    checker.check(REQUESTS[:4])
    server.label = "maybe"
    assert [v.label for v in checker.check(REQUESTS[4:])] == [Label.IRRELEVANT] * 2  # 2 of 6: within 0.4
    checker.close()


def real_clues(monkeypatch) -> None:
    """The tiny random policy's text rarely retrieves anything: give every sample real clues (the
    trainer samples through `policy.samplers`)."""
    import searchgrpo.policy.samplers as samplers

    real_generate = samplers.generate

    def generate(*args, **kwargs):
        groups = real_generate(*args, **kwargs)
        return [[dataclasses.replace(c, text="founder company\nuniversity city born") for c in g] for g in groups]

    monkeypatch.setattr(samplers, "generate", generate)


def test_train_stops_in_one_line_when_the_judge_does_not_answer_with_labels(server, tmp_path, capsys, monkeypatch):
    real_clues(monkeypatch)
    server.label = "Not important."
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(
        [
            "train",
            "--headless",
            *SETS,
            *("--set", "checker.backend=llm", "--set", f"checker.server={server.url}", "--set", "checker.cache=false"),
            *("--set", "checker.min_calls_for_unparsable=3", "--set", "train.max_steps=2"),
        ],
        capsys,
        monkeypatch,
    )
    assert code == 2, out
    assert_one_error_line(
        out, f"checker server {server.url} (fault-model):", "were not exactly a label", "e.g. 'Not important.'"
    )


def test_steps_report_unparsable_replies_and_their_running_share(server, tmp_path, monkeypatch):
    real_clues(monkeypatch)
    server.label = "perhaps"
    cfg = tiny_config(
        tmp_path,
        "checker.backend=llm",
        f"checker.server={server.url}",
        "checker.cache=false",
        "checker.max_unparsable_frac=1",
        "train.max_steps=2",
        "train.states_per_step=1",
        "grpo.num_generations=2",
        "env.top_k=2",
    )
    events: list = []

    def sink(event) -> None:
        events.append(event)
        if isinstance(event, StepFinished):
            server.label = "RELEVANT"  # the second step's replies are labels

    Trainer(cfg, sink=sink).train()
    first, second = [e.metrics for e in events if isinstance(e, StepFinished)]
    assert first["checker/unparsable"] == first["checker/calls"] > 0 and first["checker/unparsable_share"] == 1.0
    assert second["checker/unparsable"] == 0 and second["checker/calls"] > 0
    total = first["checker/calls"] + second["checker/calls"]
    assert second["checker/unparsable_share"] == pytest.approx(first["checker/calls"] / total)
