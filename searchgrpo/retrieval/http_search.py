"""Your own search API as the SearchOrchestrator's retriever (`retrieval.backend: http`).

The API (docs/own-system.md), one search per request:

    POST {retrieval.url}        Content-Type: application/json   [Authorization: Bearer $KEY]
    {"query": "Christopher Nolan education", "k": 5}

    200  {"results": [{"docid": "wiki:Christopher_Nolan#0", "score": 12.7,
                       "title": "Christopher Nolan", "text": "Christopher Edward Nolan ..."}, ...]}

`results` is ranked best first; the first `k` are used. `score` is optional (a number; 0 when
absent). A document in `data.corpus` is taken from the corpus (the reply's title and text are not
needed and not used); a document that is not must come with its `title` or `text` (or both),
which are kept for the rest of the process (`SearchedCorpus`) and are what the checker labels and
reports show; the first reply that brings a docid decides its text. A reply that breaks the
contract (not an object with a `results` list; an entry without a docid; a document outside the
corpus without title or text) stops the job with one line naming the URL, the query and the field:
a retriever that returns something else than it says would train on the wrong documents.

Transport is `searchgrpo.http_exchange` (a deadline on the whole exchange, a cap on the reply),
as for the checker's server: connection errors, timeouts, replies cut short or not JSON, and HTTP
408/409/425/429/5xx are retried with exponential backoff (0.5 s doubling to 10 s) until
`retrieval.max_retries` retries or `retrieval.retry_deadline_s`; then, or at once for any other
4xx, one line: the job stops and a training run resumes from its last checkpoint. Results are
cached per (query, k) for the process: the API must be deterministic for training to be
reproducible (a frozen index), as BM25 is.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from searchgrpo.config import RetrievalConfig
from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.errors import UserError, one_line, printable
from searchgrpo.http_exchange import (
    ReplyTooLarge,
    RequestNotBuilt,
    StatusError,
    api_key_from_env,
    exchange,
    failure_reason,
    json_headers,
)
from searchgrpo.redact import scrub
from searchgrpo.retrieval.search import CachedSearch, Hit

BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 10.0
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
SHOWN_QUERY_CHARS = 80


class SearchUnavailable(UserError):
    """The search API could not be reached or kept failing past the retry budget."""


class SearchReplyInvalid(UserError):
    """The search API answered, but not in the contract's shape (not retried)."""


class SearchedCorpus(Corpus):
    """The corpus plus the documents the search API returned that it does not hold (their title and
    text from the reply). `get` and `in` see both; iterating and `len` see the corpus only."""

    def __init__(self, corpus: Corpus) -> None:
        super().__init__(corpus.documents, corpus.source)
        self.external: dict[str, Document] = {}
        """Documents known from replies only, by docid."""
        self._lock = threading.Lock()

    def __contains__(self, docid: object) -> bool:
        return super().__contains__(docid) or docid in self.external

    def get(self, docid: str) -> Document | None:
        return super().get(docid) or self.external.get(docid)

    def remember(self, doc: Document) -> None:
        """Keep a document from a reply (the first text seen for a docid stays)."""
        with self._lock:
            self.external.setdefault(doc.docid, doc)


def _field(entry: dict[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value


def parse_results(reply: Any, k: int, corpus: SearchedCorpus) -> list[tuple[Document | None, str, float]]:
    """(document from the reply or None when the corpus has it, docid, score) of the first k
    results; ValueError naming the field that breaks the contract (module docstring)."""
    if not isinstance(reply, dict) or not isinstance(reply.get("results"), list):
        raise ValueError('expected a JSON object {"results": [...]}')
    out: list[tuple[Document | None, str, float]] = []
    seen: set[str] = set()
    for i, entry in enumerate(reply["results"][:k]):
        where = f"results[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object, got {type(entry).__name__}")
        docid = _field(entry, "docid", where)
        if not docid:
            raise ValueError(f"{where}.docid: missing or empty")
        score = entry.get("score", 0.0)
        if score is None:
            score = 0.0
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ValueError(f"{where}.score: expected a number, got {type(score).__name__}")
        if docid in seen:
            continue  # the same document twice in one ranking: its first place is its place
        seen.add(docid)
        doc = None
        if docid not in corpus:
            title, text = _field(entry, "title", where) or "", _field(entry, "text", where) or ""
            if not title.strip() and not text.strip():
                raise ValueError(
                    f"{where}: docid {docid!r} is not in data.corpus and comes without a title or text "
                    "(return them for documents outside the corpus)"
                )
            doc = Document(docid, title, text)
        out.append((doc, docid, float(score)))
    return out


class HttpSearch(CachedSearch):
    """Searches through an HTTP search API (see the module docstring)."""

    def __init__(
        self,
        url: str,
        corpus: Corpus,
        *,
        api_key_env: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 5,
        retry_deadline_s: float = 120.0,
        max_reply_bytes: int = 16 * 1024 * 1024,
        cache_size: int = 50_000,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(SearchedCorpus(corpus), cache_size)
        self.corpus: SearchedCorpus
        self.url = url
        self.api_key_env = api_key_env
        self._api_key = api_key_from_env(api_key_env)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.retry_deadline_s = retry_deadline_s
        self.max_reply_bytes = max_reply_bytes
        self.requests = 0
        """Searches sent (cache misses), retries not counted."""
        self.failures = 0
        """Failed attempts (each retry that was needed counts)."""
        self._count_lock = threading.Lock()
        self._closed = threading.Event()
        self._sleep = sleep or self._closed.wait

    @classmethod
    def from_config(cls, rc: RetrievalConfig, corpus: Corpus) -> HttpSearch:
        if not rc.url:
            raise UserError("retrieval.backend = http needs retrieval.url (the search API's URL)")
        return cls(
            rc.url,
            corpus,
            api_key_env=rc.api_key_env,
            timeout_s=rc.timeout_s,
            max_retries=rc.max_retries,
            retry_deadline_s=rc.retry_deadline_s,
            max_reply_bytes=rc.max_reply_bytes,
        )

    def __repr__(self) -> str:  # never shows the key
        return f"HttpSearch({self.url!r})"

    def describe(self) -> str:
        return f"the search API at {self.url} (data.corpus: {len(self.corpus)} documents)"

    def close(self) -> None:
        """Stop retrying: a search waiting for a retry fails at once."""
        self._closed.set()

    def _search(self, query: str, k: int) -> list[Hit]:
        reply = self._post({"query": query, "k": k})
        try:
            results = parse_results(reply, k, self.corpus)
        except ValueError as exc:
            raise SearchReplyInvalid(
                f"search API {self.url}: the reply to {printable(query[:SHOWN_QUERY_CHARS])!r} breaks the "
                f"contract ({one_line(scrub(str(exc)), 300)}); see docs/own-system.md"
            ) from None
        hits = []
        for rank, (doc, docid, score) in enumerate(results):
            if doc is not None:
                self.corpus.remember(doc)
            hits.append(Hit(docid, score, rank))
        return hits

    def _post(self, body: dict[str, Any]) -> Any:
        """POST one search, retrying transient failures; the decoded JSON reply."""
        data = json.dumps(body).encode("utf-8")
        first = time.monotonic()
        deadline = first + self.retry_deadline_s
        backoff, attempt = BACKOFF_START_S, 0
        with self._count_lock:
            self.requests += 1
        while True:
            timeout = min(self.timeout_s, max(deadline - time.monotonic(), 0.001))
            try:
                headers = json_headers(self._api_key)
                raw = exchange(
                    "POST", self.url, body=data, headers=headers, timeout_s=timeout, max_bytes=self.max_reply_bytes
                )
                return json.loads(raw.body.decode("utf-8"))
            except RequestNotBuilt as exc:
                raise UserError(f"search request to {self.url} could not be built ({exc}); nothing was sent") from None
            except StatusError as exc:
                if exc.status in (401, 403):
                    where = f"${self.api_key_env}" if self.api_key_env else "the API key"
                    raise UserError(
                        f"search API {self.url} refused the API key (HTTP {exc.status}); check {where}"
                    ) from None
                if exc.status not in RETRYABLE_STATUS:
                    raise UserError(
                        f"search API {self.url} rejected a search (HTTP {exc.status}): {one_line(scrub(exc.body), 200)}"
                    ) from None
                error = f"HTTP {exc.status}"
            except ReplyTooLarge as exc:
                error = f"{exc} (retrieval.max_reply_bytes)"
            except (OSError, ValueError, http.client.HTTPException) as exc:
                error = one_line(scrub(failure_reason(exc)), 200)
            with self._count_lock:
                self.failures += 1
            attempt += 1
            now = time.monotonic()
            if self._closed.is_set():
                raise SearchUnavailable(f"search client for {self.url} was closed during a retry (last: {error})")
            if attempt > self.max_retries or now + backoff >= deadline:
                raise SearchUnavailable(
                    f"search API {self.url} failed {attempt} times over {now - first:.1f} s (last: {error}); "
                    "the run stops here and resumes from its last checkpoint with --resume"
                )
            self._sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)
