"""A reference server of the HTTP search API (`retrieval.backend: http`): BM25 over a JSONL corpus.

It answers the API of `searchgrpo.retrieval.http_search` (POST `{"query", "k"}` ->
`{"results": [{"docid", "score", "title", "text"}]}`) with the same BM25 the `bm25` backend runs,
so that the two backends give the same rankings: a wrapper to copy when you put your own search
engine behind the API, and the local server the tests search through. Run it with

    python -m searchgrpo.retrieval.search_server --corpus corpus.jsonl --port 8100

then set `retrieval.backend: http` and `retrieval.url: http://127.0.0.1:8100/search`. With
`--api-key-env NAME` it asks for `Authorization: Bearer $NAME`. It listens on 127.0.0.1 by
default; it is a reference, not a hardened production server.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from searchgrpo.data.corpus import Corpus, load_corpus
from searchgrpo.retrieval.search import CachedSearch, SparseBM25Search

MAX_REQUEST_BYTES = 1024 * 1024
MAX_K = 1000


class SearchHandler(BaseHTTPRequestHandler):
    """One request: POST {path} with {"query": str, "k": int}."""

    server: SearchServer

    def log_message(self, *args: Any) -> None:  # quiet: a training run searches thousands of times
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        if self.path != self.server.path:
            self._send(404, {"error": f"not found: POST {self.server.path}"})
            return
        if self.server.api_key and not hmac.compare_digest(
            self.headers.get("Authorization", ""), f"Bearer {self.server.api_key}"
        ):
            self._send(401, {"error": "missing or wrong API key"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 < length <= MAX_REQUEST_BYTES:
            self._send(400, {"error": f"a JSON body of 1 to {MAX_REQUEST_BYTES} bytes is expected"})
            return
        try:
            request = json.loads(self.rfile.read(length).decode("utf-8"))
            query, k = request["query"], request["k"]
            if not isinstance(query, str) or isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            self._send(400, {"error": f'expected {{"query": string, "k": integer from 1 to {MAX_K}}}'})
            return
        self._send(200, {"results": self.server.results(query, k)})


class SearchServer(ThreadingHTTPServer):
    """The reference search API over `retriever` (its corpus's documents, with their text)."""

    daemon_threads = True

    def __init__(
        self, retriever: CachedSearch, host: str = "127.0.0.1", port: int = 0, path: str = "/search", api_key: str = ""
    ) -> None:
        super().__init__((host, port), SearchHandler)
        self.retriever = retriever
        self.path = path
        self.api_key = api_key
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        assert isinstance(host, str)  # an IPv4/IPv6 socket's address names its host as a str
        return f"http://{host}:{port}{self.path}"

    def results(self, query: str, k: int) -> list[dict[str, Any]]:
        out = []
        for hit in self.retriever.search(query, k):
            doc = self.retriever.corpus.get(hit.docid)
            assert doc is not None, hit.docid
            out.append({"docid": doc.docid, "score": hit.score, "title": doc.title, "text": doc.text})
        return out

    def start(self) -> SearchServer:
        """Serve in a daemon thread (tests); `close()` stops it."""
        self._thread = threading.Thread(target=self.serve_forever, name="search-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()

    def __enter__(self) -> SearchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_corpus(corpus: Corpus, **kw: Any) -> SearchServer:
    """A (not yet started) reference server of BM25 over `corpus`."""
    return SearchServer(SparseBM25Search(corpus), **kw)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The reference HTTP search API: BM25 over a JSONL corpus.")
    parser.add_argument("--corpus", required=True, type=Path, help="JSONL corpus {docid, title, text}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--path", default="/search")
    parser.add_argument("--api-key-env", default=None, help="require Authorization: Bearer $NAME")
    args = parser.parse_args(argv)
    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    server = serve_corpus(load_corpus(args.corpus), host=args.host, port=args.port, path=args.path, api_key=key)
    print(f"searching {args.corpus} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
