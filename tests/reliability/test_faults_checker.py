"""Checker-server faults: down, slow, HTTP 500, garbage, a torn reply, nonsense JSON, a refused key.

The real `ChatClient` and `LLMChecker` talk over HTTP to `FaultServer` (127.0.0.1), which fails
on request. Transient faults are retried and cost no verdict; faults that outlast the retry budget
stop the run with one line naming the server, after which `--resume` continues from the newest
checkpoint; nonsense replies are counted (and stop a run only past `checker.max_unparsable_frac`,
tests/reliability/test_server_replies.py); a 200 that is not JSON is not an outage: it fails at
once, in one line. `tests/integration/agents/test_llm_checker.py`
restarts the real embedded llama.cpp server mid-run; this covers the other ways a server fails.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

import searchgrpo.agents.chat_client as chat_client
from searchgrpo.agents.chat_client import ChatClient, RequestRejected, ServerUnavailable
from searchgrpo.agents.checker import CheckRequest
from searchgrpo.agents.llm_checker import LLMChecker
from searchgrpo.data.labels import Label
from searchgrpo.errors import UserError
from searchgrpo.events import LogMessage, RunFailed, RunFinished, StepFinished
from searchgrpo.train.checkpoints import latest_checkpoint
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import FaultServer, assert_checkpoint_loads, assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS, tiny_config

KEY_ENV = "SEARCHGRPO_FAULT_TEST_KEY"
SECRET = "sk-fault-suite-0123456789abcdef"
REQUESTS = [
    CheckRequest("q1", "Who founded Mendho Pharma?", ("find the founder",), f"d{i}", f"Doc {i}", "text " * 20)
    for i in range(3)
]


@pytest.fixture
def server():
    with FaultServer() as s:
        yield s


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(chat_client, "BACKOFF_START_S", 0.01)
    monkeypatch.setattr(chat_client, "BACKOFF_MAX_S", 0.05)


def checker_for(server: FaultServer, **client_kw) -> LLMChecker:
    client = ChatClient(server.url, api_key_env=KEY_ENV, **{"timeout_s": 5.0, **client_kw})
    return LLMChecker(client, server.model, structured_output="json_schema", max_concurrency=2)


TRANSIENT = ["500", "slow", "torn", "down"]


ATTEMPT_S = 1.0
"""The client's timeout in these tests: a healthy local reply comes far within it on the busiest
machine; a `slow` one never does (SLOW_S)."""
SLOW_S = 10.0


def back_after_the_first_refusal(server: FaultServer, checker: LLMChecker) -> None:
    """The server is down until the client's first attempt has been refused, then up again: the
    outage and the recovery are events the retries see, not a time that races them."""
    server.stop()
    real, lock, back = checker.client._request, threading.Lock(), []

    def request(*args, **kwargs):
        try:
            return real(*args, **kwargs)
        except OSError:
            with lock:
                if not back:
                    server.start()
                    back.append(True)
            raise

    checker.client._request = request


@pytest.mark.parametrize("mode", TRANSIENT)
def test_a_transient_fault_is_retried_and_costs_no_verdict(server, mode):
    checker = checker_for(server, timeout_s=ATTEMPT_S, max_retries=20)
    server.delay = SLOW_S
    if mode == "down":
        back_after_the_first_refusal(server, checker)
    else:
        server.fail_next(3, mode)
    try:
        verdicts = checker.check(REQUESTS)
    finally:
        checker.close()
    assert [v.label for v in verdicts] == [Label.IMPORTANT] * 3 and {v.reason for v in verdicts} == {"llm"}
    stats = checker.stats()
    assert stats["calls"] == 3 and stats["failures"] >= (1 if mode == "down" else 3), stats
    assert checker.client.stats.in_flight == 0


@pytest.mark.parametrize("mode", TRANSIENT)
def test_a_fault_past_the_retry_budget_fails_in_one_line(server, mode):
    checker = checker_for(server, timeout_s=ATTEMPT_S, max_retries=2)
    server.delay = SLOW_S
    if mode == "down":
        server.stop()
    else:
        server.mode = mode
    with pytest.raises(ServerUnavailable) as info:
        checker.check(REQUESTS[:1])
    checker.close()
    message = str(info.value)
    assert "\n" not in message and f"{server.url}/chat/completions" in message
    assert "failed 3 times" in message and "resumes from its last checkpoint with --resume" in message


def test_nonsense_replies_are_counted_and_never_stop_a_run(server):
    checker = checker_for(server)
    server.mode = "nonsense"  # valid JSON, but no completion in it
    verdicts = checker.check(REQUESTS[:2])
    server.mode, server.label = "ok", "I am not sure about this one."
    verdicts += checker.check(REQUESTS[2:])
    checker.close()
    assert all(v.label is Label.IRRELEVANT and v.reason.startswith("unparsable reply") for v in verdicts)
    assert checker.stats()["unparsable"] == 3 and checker.stats()["failures"] == 0


def test_the_api_key_is_sent_but_never_shown(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    checker = checker_for(server)
    server.mode = "echo400"  # a proxy that answers 400 with the request's headers in the body
    with pytest.raises(RequestRejected) as info:
        checker.check(REQUESTS[:1])
    assert all(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in server.records)
    assert SECRET not in str(info.value) and "[api key]" in str(info.value)
    server.mode, server.label = "ok", f"the key is {SECRET}"  # echoed into a reply's text
    (verdict,) = checker.check(REQUESTS[1:2])
    assert SECRET not in verdict.reason and "[api key]" in verdict.reason
    checker.close()
    server.mode = "401"
    with pytest.raises(UserError) as info:
        ChatClient(server.url, api_key_env=KEY_ENV).health(timeout_s=1)
    assert f"refused the API key (HTTP 401); check ${KEY_ENV}" in str(info.value) and SECRET not in str(info.value)


@pytest.mark.parametrize(
    "mode, words",
    [
        ("500", ["answered HTTP 500", "OpenAI-compatible server"]),
        ("garbage", ["answered HTTP 200 with a non-JSON body", "content-type application/json"]),
        ("torn", ["is unreachable"]),
        ("down", ["is unreachable", "start it (`searchgrpo serve`) or set checker.server"]),
    ],
)
def test_health_check_faults_fail_in_one_line(server, mode, words):
    if mode == "down":
        server.stop()
    else:
        server.mode = mode
    with pytest.raises(UserError) as info:
        ChatClient(server.url).health(timeout_s=0.5)
    assert "\n" not in str(info.value) and f"{server.url}/models" in str(info.value)
    for w in words:
        assert w in str(info.value)


def test_a_server_that_fails_its_health_check_stops_train_in_one_line(server, tmp_path, capsys, monkeypatch):
    server.mode = "500"
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(
        [
            "train",
            "--headless",
            *SETS,
            "--set",
            "checker.backend=llm",
            "--set",
            f"checker.server={server.url}",
            "--set",
            "checker.cache=false",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 2
    assert_one_error_line(out, f"checker server {server.url}/models answered HTTP 500")


def test_training_survives_server_faults_and_resumes_after_an_outage(server, tmp_path, monkeypatch):
    """Part 1: 500s, a slow reply and torn replies between steps cost retries, no step.
    Part 2: the server goes down for good: the run stops with one line, its newest checkpoint is
    complete, and once the server is back the run resumes to the end."""
    import searchgrpo.policy.samplers as samplers

    real_generate = samplers.generate

    def real_clues(*args, **kwargs):  # the tiny random policy's text rarely retrieves anything
        groups = real_generate(*args, **kwargs)
        return [[dataclasses.replace(c, text="founder company\nuniversity city born") for c in g] for g in groups]

    monkeypatch.setattr(samplers, "generate", real_clues)
    cfg = tiny_config(
        tmp_path,
        "checker.backend=llm",
        f"checker.server={server.url}",
        "checker.cache=false",
        f"checker.timeout_s={ATTEMPT_S}",
        "checker.max_retries=4",
        "train.max_steps=5",
        "train.save_every=1",
        "train.states_per_step=1",
        "grpo.num_generations=2",
        "env.top_k=2",
        "train.run_name=faults",
    )
    server.delay = SLOW_S
    faults = {1: ("500", 3), 2: ("slow", 2), 3: ("torn", 2)}
    events: list = []

    def sink(event) -> None:
        events.append(event)
        if isinstance(event, StepFinished):
            if event.step in faults:
                server.fail_next(faults[event.step][1], faults[event.step][0])
            elif event.step == 4:
                server.stop()  # down for good (for this run)

    trainer = Trainer(cfg, sink=sink)
    with pytest.raises(ServerUnavailable) as info:
        trainer.train()
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert len(failed) == 1 and "\n" not in failed[0].error and server.url in failed[0].error
    steps = [e for e in events if isinstance(e, StepFinished)]
    assert [e.step for e in steps] == [1, 2, 3, 4]
    assert sum(e.metrics["checker/failures"] for e in steps) >= 7 and all(e.metrics["checker/calls"] > 0 for e in steps)
    info = latest_checkpoint(trainer.run_dir)
    assert info.step == 4
    assert_checkpoint_loads(info)

    server.start()  # back, on the same port
    resumed: list = []
    summary = Trainer(cfg, sink=resumed.append, resume=True, run_dir=trainer.run_dir).train()
    assert summary.step == 5 and summary.reason == "completed"
    assert [e.step for e in resumed if isinstance(e, StepFinished)] == [5]
    assert isinstance(resumed[-1], RunFinished) and latest_checkpoint(trainer.run_dir).step == 5
    assert not any(isinstance(e, LogMessage) and e.level == "error" for e in resumed)
