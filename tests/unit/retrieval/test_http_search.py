"""`retrieval.backend: http`: the user's search API as the retriever, against a local server.

The reference server (`searchgrpo.retrieval.search_server`, BM25 behind the API) must give exactly
the `bm25` backend's rankings; documents outside data.corpus come with their text; a training
step, collect's episodes and `check` go through the interface; a server that fails, stalls,
floods or breaks the contract costs bounded time and ends in one line.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import searchgrpo.retrieval.http_search as http_search
from searchgrpo.config import ConfigError, load_config
from searchgrpo.data.corpus import Corpus
from searchgrpo.errors import UserError
from searchgrpo.retrieval.backends import open_retriever
from searchgrpo.retrieval.http_search import HttpSearch, SearchReplyInvalid, SearchUnavailable
from searchgrpo.retrieval.search_server import serve_corpus
from searchgrpo.world import load_dataset, make_env, make_retriever
from tests.helpers.faults import RawServer
from tests.helpers.tiny import tiny_config


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(http_search, "BACKOFF_START_S", 0.01)
    monkeypatch.setattr(http_search, "BACKOFF_MAX_S", 0.02)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("http-search"))
    return cfg, load_dataset(cfg)


def clues_of(ds, n=40):
    out = []
    for s in [*ds.train, *ds.eval][:n]:
        out += [s.question, *s.original_clues, *(e.name for e in s.before.entities)]
    return out


def test_the_reference_server_ranks_exactly_as_the_bm25_backend(world):
    cfg, ds = world
    bm25 = make_retriever(cfg, ds)
    with serve_corpus(ds.corpus) as server:
        http = open_retriever(cfg.replace(**{"retrieval.backend": "http", "retrieval.url": server.url}), ds.corpus)
        assert isinstance(http, HttpSearch) and "search API" in http.describe()
        queries = clues_of(ds)
        for query in queries:
            for k in (1, 5):
                assert http.search(query, k) == bm25.search(query, k), query
        assert http.requests == len(set(queries)) * 2  # one request per (query, k), then the cache
        assert not http.corpus.external  # every document was in data.corpus


def test_documents_outside_the_corpus_come_with_the_replys_text(world):
    cfg, ds = world
    half = Corpus(ds.corpus.documents[: len(ds.corpus) // 2], source="half")
    with serve_corpus(ds.corpus) as server:
        http_cfg = cfg.replace(**{"retrieval.backend": "http", "retrieval.url": server.url})
        retriever = open_retriever(http_cfg, half)
        found = {h.docid for q in clues_of(ds) for h in retriever.search(q, 5)}
        outside = found - {d.docid for d in half}
        assert outside and set(retriever.corpus.external) == outside
        for docid in outside:  # title and text as the API gave them, for the checker and the reports
            assert retriever.corpus.get(docid) == ds.corpus.get(docid) and docid in retriever.corpus
        assert len(retriever.corpus) == len(half)  # iterating sees data.corpus only


def test_the_environment_scores_through_the_search_api_as_through_bm25(world):
    """The reward goes through the interface: the same clue sets score the same through both."""
    cfg, ds = world
    state = next(s for s in ds.train if s.original_clues)
    completions = ["\n".join(s.original_clues) for s in ds.train[:4]]
    bm25 = make_env(cfg, ds).score_group(state, completions)
    with serve_corpus(ds.corpus) as server:
        env = make_env(cfg.replace(**{"retrieval.backend": "http", "retrieval.url": server.url}), ds)
        assert isinstance(env.retriever, HttpSearch)
        http = env.score_group(state, completions)
    assert [r.reward.total for r in http] == [r.reward.total for r in bm25]
    assert [[(d.docid, d.label, d.title) for d in r.docs] for r in http] == [
        [(d.docid, d.label, d.title) for d in r.docs] for r in bm25
    ]


def test_check_searches_through_the_api(world):
    from searchgrpo.check import run_health_checks

    cfg, _ = world
    with serve_corpus(load_dataset(cfg).corpus) as server:
        results = run_health_checks(
            cfg.replace(**{"retrieval.backend": "http", "retrieval.url": server.url}), "test", with_model=False
        )
    (search,) = [r for r in results if r.name == "search"]
    assert search.status == "PASS" and f"the search API at {server.url}" in search.detail


# --------------------------------------------------------------------------- a server that misbehaves


class Scripted(ThreadingHTTPServer):
    """Answers each POST with the next (status, body) of `script` (the last one repeats)."""

    daemon_threads = True

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[tuple[dict, dict]] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(handler):
                body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
                self.requests.append((dict(handler.headers), body))
                status, payload = self.script.pop(0) if len(self.script) > 1 else self.script[0]
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                handler.send_response(status)
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/search"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


CORPUS = Corpus([], source="empty")
GOOD = {"results": [{"docid": "x1", "score": 2.5, "title": "X", "text": "x"}, {"docid": "x2", "title": "Y"}]}


def test_transient_failures_are_retried_and_the_key_is_sent(monkeypatch):
    monkeypatch.setenv("MY_SEARCH_KEY", "s3cret-key")
    with Scripted([(503, b"busy"), (429, b"slow down"), (200, GOOD)]) as server:
        search = HttpSearch(server.url, CORPUS, api_key_env="MY_SEARCH_KEY", max_retries=3)
        hits = search.search("alpha", 5)
        assert [(h.docid, h.score, h.rank) for h in hits] == [("x1", 2.5, 0), ("x2", 0.0, 1)]
        assert search.failures == 2 and len(server.requests) == 3
        headers, body = server.requests[-1]
        assert body == {"query": "alpha", "k": 5} and headers["Authorization"] == "Bearer s3cret-key"
        assert search.search("alpha", 5) == hits and len(server.requests) == 3  # cached


def test_a_server_that_keeps_failing_ends_in_one_line_within_the_budget():
    with Scripted([(500, b"boom")]) as server:
        search = HttpSearch(server.url, CORPUS, max_retries=3)
        with pytest.raises(SearchUnavailable) as info:
            search.search("alpha", 5)
    message = str(info.value)
    assert "\n" not in message and server.url in message and "failed 4 times" in message and "HTTP 500" in message


def test_an_unreachable_server_is_one_line():
    with Scripted([(200, GOOD)]) as server:
        url = server.url
    search = HttpSearch(url, CORPUS, max_retries=1, timeout_s=2)
    with pytest.raises(SearchUnavailable, match="failed 2 times") as info:
        search.search("alpha", 5)
    assert "\n" not in str(info.value)


def test_a_client_error_is_not_retried_and_never_shows_the_key(monkeypatch):
    monkeypatch.setenv("MY_SEARCH_KEY", "s3cret-key-123")
    with Scripted([(400, b"bad request from Bearer s3cret-key-123")]) as server:
        search = HttpSearch(server.url, CORPUS, api_key_env="MY_SEARCH_KEY", max_retries=5)
        with pytest.raises(UserError) as info:
            search.search("alpha", 5)
        assert len(server.requests) == 1
    assert "rejected a search (HTTP 400)" in str(info.value) and "s3cret-key-123" not in str(info.value)
    with Scripted([(401, b"no")]) as server, pytest.raises(UserError, match=r"refused the API key .*\$MY_SEARCH_KEY"):
        HttpSearch(server.url, CORPUS, api_key_env="MY_SEARCH_KEY").search("alpha", 5)


@pytest.mark.parametrize(
    "reply, words",
    [
        ([1, 2], ['{"results": [...]}']),
        ({"hits": []}, ['{"results": [...]}']),
        ({"results": [{"score": 1}]}, ["results[0].docid: missing"]),
        ({"results": [{"docid": "x", "score": "high", "text": "t"}]}, ["results[0].score: expected a number"]),
        ({"results": [{"docid": "x", "title": 5}]}, ["results[0].title: expected a string"]),
        ({"results": [{"docid": "x"}]}, ["'x' is not in data.corpus", "without a title or text"]),
        (b"not json", ["failed"]),
    ],
)
def test_a_reply_that_breaks_the_contract_is_one_line(reply, words):
    with Scripted([(200, reply)]) as server:
        search = HttpSearch(server.url, CORPUS, max_retries=0)
        with pytest.raises(UserError) as info:
            search.search("alpha", 5)
    message = str(info.value)
    assert "\n" not in message and server.url in message
    assert isinstance(info.value, SearchReplyInvalid if isinstance(reply, (dict, list)) else SearchUnavailable)
    for w in words:
        assert w in message, message


def test_a_trickling_or_flooding_server_costs_bounded_time_and_memory():
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"

    def trickle(server, conn, request):
        server.send(conn, head)
        for _ in range(1000):  # 200 s: far longer than any honest wait for a 1 s timeout
            if server.stopped():
                return
            server.send(conn, b" ")
            time.sleep(0.2)

    with RawServer(trickle) as server:
        start = time.monotonic()
        with pytest.raises(SearchUnavailable, match="no complete reply within 1 s"):
            HttpSearch(f"http://127.0.0.1:{server.port}/search", CORPUS, timeout_s=1.0, max_retries=0).search(
                "alpha", 5
            )
        took, sent = time.monotonic() - start, server.sent
    # It gave up with the reply still coming (each read alone is fast: only a whole-reply bound ends it).
    assert sent < len(head) + 1000, f"the client read the whole trickled reply ({sent} bytes)"
    assert took < 60, f"hang guard: a 1 s timeout took {took:.1f} s"

    def flood(server, conn, request):
        server.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 30))

    with RawServer(flood) as server, pytest.raises(SearchUnavailable, match=r"retrieval\.max_reply_bytes"):
        HttpSearch(f"http://127.0.0.1:{server.port}/search", CORPUS, max_reply_bytes=4096, max_retries=0).search(
            "alpha", 5
        )


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["retrieval.backend=http"], ["retrieval.backend = http needs retrieval.url"]),
        (["retrieval.url=http://user:pw@host/search"], ["retrieval.url", "without credentials"]),
        (["retrieval.url=ftp://host/search"], ["retrieval.url", "http(s)://"]),
        (["retrieval.backend=elastic"], ["retrieval.backend", "'bm25', 'http'"]),
    ],
)
def test_bad_retrieval_settings_are_one_line(overrides, words):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert "\n" not in str(info.value) and "pw" not in str(info.value)
    for w in words:
        assert w in str(info.value)
