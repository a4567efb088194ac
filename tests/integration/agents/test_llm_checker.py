"""The LLM checker against the real embedded llama.cpp server (one per module; short requests), serving
the tiny random-weight GGUF (tests/helpers/tiny_gguf.py): grammars keep its replies to the labels.

A recording proxy sits between client and server where a test needs to see the wire: it forwards
every request unchanged and notes bodies, headers and how many were in flight at once.
"""

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from searchgrpo.agents.chat_client import ChatClient
from searchgrpo.agents.checker import CheckRequest
from searchgrpo.agents.llm_checker import LLMChecker
from searchgrpo.agents.server import EmbeddedServer
from searchgrpo.agents.verdict_cache import VerdictCache
from searchgrpo.data.demo_world import generate_world
from searchgrpo.data.labels import Label
from searchgrpo.data.questions import write_questions
from searchgrpo.data.states import load_states
from searchgrpo.episodes.collect import collect_to_folder
from searchgrpo.events import RunFinished, StepFinished
from searchgrpo.train.trainer import Trainer
from tests.helpers.tiny import tiny_config
from tests.helpers.tiny_gguf import TINY_GGUF_MODEL
from tests.helpers.waiting import wait_until

SECRET = "sk-test-not-a-real-key"
WORLD = generate_world(3, 0, seed=5)
DOCS = WORLD.documents
QUESTION = WORLD.questions[0]
# The tiny GGUF's 1,024-token vocabulary spells a label in up to 10 tokens (IRRELEVANT).
LABEL_TOKENS = 16
FAST = (f"checker.max_tokens={LABEL_TOKENS}", "checker.max_doc_chars=240")


def requests_for(docs, question=QUESTION):
    return [CheckRequest(question.id, question.question, question.sub_goals, d.docid, d.title, d.text) for d in docs]


@pytest.fixture(scope="module")
def server(tiny_gguf):
    with EmbeddedServer(tiny_gguf, parallel=2) as s:
        yield s


class RecordingProxy:
    """Forwards HTTP to `upstream`, recording each request and the peak number in flight."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.records: list[dict] = []
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                with proxy.lock:
                    proxy.in_flight += 1
                    proxy.peak = max(proxy.peak, proxy.in_flight)
                    proxy.records.append(
                        {"path": self.path, "headers": dict(self.headers), "body": json.loads(body) if body else None}
                    )
                try:
                    req = urllib.request.Request(
                        proxy.upstream + self.path,
                        data=body,
                        method=method,
                        headers={"Content-Type": "application/json"},
                    )
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        status, data = resp.status, resp.read()
                finally:
                    with proxy.lock:
                        proxy.in_flight -= 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy(server):
    p = RecordingProxy(f"http://127.0.0.1:{server.port}")
    yield p
    p.close()


def make_checker(base_url, cache_path, *, concurrency=2, structured="grammar", model=TINY_GGUF_MODEL):
    client = ChatClient(base_url, api_key_env="SEARCHGRPO_TEST_KEY", timeout_s=60)
    return LLMChecker(
        client,
        model,
        structured_output=structured,
        max_tokens=LABEL_TOKENS,
        max_doc_chars=240,
        max_concurrency=concurrency,
        cache=VerdictCache(cache_path),
    )


def test_labels_cache_concurrency_and_the_request(proxy, tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHGRPO_TEST_KEY", SECRET)
    checker = make_checker(proxy.url + "/v1", tmp_path / "v.sqlite", concurrency=2)
    requests = requests_for(DOCS[:6])
    verdicts = checker.check(requests)
    assert len(verdicts) == 6 and all(isinstance(v.label, Label) for v in verdicts)
    stats = checker.stats()
    assert stats["calls"] == 6 and stats["cache_hits"] == 0 and stats["unparsable"] == 0 and stats["failures"] == 0

    # Bounded concurrency, as the server saw it: 6 requests went 2 at a time, never more.
    assert proxy.peak == 2
    bodies = [r["body"] for r in proxy.records]
    assert len(bodies) == 6
    for body in bodies:
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert body["temperature"] == 0.0 and body["grammar"].startswith("root ::=")
        assert body["messages"][1]["content"].startswith(f"Question: {QUESTION.question}")
    assert all(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in proxy.records)
    assert SECRET not in repr(checker) + repr(checker.client) + json.dumps(stats)

    # Repeats are cache hits: no request reaches the server, the verdicts are the same.
    assert checker.check(list(reversed(requests))) == list(reversed(verdicts))
    assert len(proxy.records) == 6 and checker.stats()["cache_hits"] == 6
    checker.close()

    # The cache is on disk: a new checker (a later run) asks the server nothing either.
    again = make_checker(proxy.url + "/v1", tmp_path / "v.sqlite")
    assert again.check(requests) == verdicts and len(proxy.records) == 6
    again.close()


def test_json_schema_dialect_is_understood_by_llama_cpp(server, tmp_path):
    checker = make_checker(server.base_url, tmp_path / "v.sqlite", structured="json_schema")
    checker.max_tokens = 4 * LABEL_TOKENS  # the JSON object around the label
    verdicts = checker.check(requests_for(DOCS[:2]))
    assert all(v.reason == "llm" for v in verdicts), verdicts
    assert checker.stats()["unparsable"] == 0 and checker.stats()["structured_fallbacks"] == 0
    checker.close()


def test_a_restarted_server_is_retried_until_it_answers(tmp_path, tiny_gguf):
    server = EmbeddedServer(tiny_gguf, parallel=1).start()
    checker = make_checker(server.base_url, tmp_path / "v.sqlite", concurrency=1)
    server.stop()
    restarter = threading.Timer(1.5, server.start)
    restarter.start()
    try:
        start = time.monotonic()
        verdicts = checker.check(requests_for(DOCS[6:8]))
        assert time.monotonic() - start >= 1.5
        assert len(verdicts) == 2 and all(v.reason == "llm" for v in verdicts)
        assert checker.stats()["failures"] >= 1 and checker.stats()["calls"] == 2
    finally:
        restarter.join()
        checker.close()
        server.stop()


def test_training_continues_when_the_server_returns_with_no_step_lost(tmp_path, monkeypatch, tiny_gguf):
    import dataclasses

    import searchgrpo.policy.samplers as samplers

    real_generate = samplers.generate

    def generate_real_clues(*args, **kwargs):
        # The tiny random policy writes text that often retrieves nothing; give every sample real
        # clues so that each step really calls the checker (the tokens stay the policy's own).
        groups = real_generate(*args, **kwargs)
        return [[dataclasses.replace(c, text="founder company\nuniversity city born") for c in g] for g in groups]

    monkeypatch.setattr(samplers, "generate", generate_real_clues)
    server = EmbeddedServer(tiny_gguf, parallel=2).start()
    cfg = tiny_config(
        tmp_path,
        "checker.backend=llm",
        f"checker.server={server.base_url}",
        "checker.cache=false",
        *FAST,
        "train.max_steps=3",
        "train.states_per_step=1",
        "grpo.num_generations=2",
        "env.top_k=2",
        "env.max_clues=2",
        "env.min_clues=1",
    )
    events = []
    restarted = threading.Event()
    trainer = Trainer(cfg, sink=events.append)

    def restart_after_a_failure() -> None:
        client = trainer.env.checker.client
        try:
            wait_until(lambda: client.stats.failures, "the checker's first failed request")
        finally:  # a failure here shows as the training's error, once the server is back
            server.start()
        restarted.set()

    def sink(event) -> None:
        events.append(event)
        if isinstance(event, StepFinished) and event.step == 1:
            server.stop()  # the server goes away between steps 1 and 2
            threading.Thread(target=restart_after_a_failure, daemon=True).start()

    trainer.sink = sink
    try:
        summary = trainer.train()
    finally:
        server.stop()
    assert restarted.is_set()
    steps = [e for e in events if isinstance(e, StepFinished)]
    assert [e.step for e in steps] == [1, 2, 3]
    assert isinstance(events[-1], RunFinished) and events[-1].reason == "completed" and summary.step == 3
    for key in (
        "checker/calls",
        "checker/cache_hits",
        "checker/cache_hit_rate",
        "checker/failures",
        "checker/unparsable",
        "checker/latency_ms",
    ):
        assert key in steps[0].metrics
    assert sum(e.metrics["checker/failures"] for e in steps) >= 1
    assert steps[0].metrics["checker/calls"] > 0


def test_collect_with_the_llm_agents_writes_loadable_checkpoints(server, tmp_path):
    source = tmp_path / "questions.jsonl"
    write_questions(source, WORLD.questions[:1])
    cfg = tiny_config(
        tmp_path,
        "checker.backend=llm",
        f"checker.server={server.base_url}",
        *FAST,
        f"checker.cache_path={tmp_path / 'v.sqlite'}",
        "env.top_k=2",
    )
    result = collect_to_folder(cfg, str(source), tmp_path / "out", max_rounds=3, planner="llm", entity_manager="llm")
    # `calls` counts every call of the shared client (the Planner and EntityManager ask it too).
    assert result.checker["calls"] > 0 and result.checker["requests"] > 0
    loaded = load_states(result.traces, min_clues_per_round=1)
    assert not loaded.issues.issues and loaded.states
    assert loaded.states[0].question_id == WORLD.questions[0].id
    meta = json.loads(next(result.traces.glob("*/run_001/meta.json")).read_text())
    assert meta["rounds"][0]["strategy"] == "SEARCH" and meta["rounds"][-1]["strategy"] == "ANSWER"
