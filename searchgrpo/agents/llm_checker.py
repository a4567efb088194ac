"""The `llm` DocumentChecker: the frozen base LLM labels documents over an OpenAI-compatible API.

For each (question, document) it sends one chat completion with thinking disabled
(`chat_template_kwargs: {"enable_thinking": false}`, as vLLM expects for Qwen3) and temperature 0.
The prompt (`PROMPT_VERSION`) holds the question, its sub-goals and the document (text cut to
`max_doc_chars`), in that order, so that a server's prompt cache can reuse the shared start; it
asks for exactly one of IMPORTANT / RELEVANT / IRRELEVANT. The reply is constrained with the
server's structured-output support (`chat_client.constrain`) and parsed robustly either way: a
JSON {"label": ...}, or the first label word in the text. An unparsable reply is counted and
labelled IRRELEVANT; it never stops a run. The request asks for `logprobs`: where the server
returns them and the labels' first tokens differ, the verdict carries the label probabilities
(`label_logprobs.py`, for `reward.soft_labels`); otherwise `probs_note` says why it has none.

Verdicts are looked up in the `VerdictCache` first, keyed by digests of the question, of the
document as shown and of the prompt's wording (`PROMPT_ID`); only misses are sent,
`max_concurrency` at a time. `stats()` returns running counters that the trainer turns into per-step
`checker/*` metrics.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searchgrpo.agents.chat_client import ChatClient, RequestRejected, constrain, reply_text
from searchgrpo.agents.checker import CheckRequest, Verdict
from searchgrpo.agents.label_logprobs import label_probs
from searchgrpo.agents.verdict_cache import CachedVerdict, CacheKey, VerdictCache, document_key, question_key
from searchgrpo.data.labels import Label

PROMPT_VERSION = "checker-v1"
TOP_LOGPROBS = 10
"""Alternatives asked for at each reply token: the label's first token's give its probabilities."""
LABELS = tuple(label.value for label in Label)

SYSTEM_PROMPT = (
    "You are the DocumentChecker of a deep-search team that answers multi-hop questions. "
    "You judge one retrieved document against the question and its sub-goals, and answer with "
    "exactly one label:\n"
    "IMPORTANT - the document states a fact needed to answer the question or one of its sub-goals;\n"
    "RELEVANT - the document is about an entity or topic of the question but holds none of the needed facts;\n"
    "IRRELEVANT - neither.\n"
    "Answer with the label only."
)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
# IRRELEVANT first: RELEVANT is a suffix of it.
_LABEL_WORD = re.compile(r"\b(IRRELEVANT|IMPORTANT|RELEVANT)\b", re.IGNORECASE)


def shown_text(text: str, max_doc_chars: int) -> str:
    """A document's text as the prompt shows it: whitespace collapsed, cut to max_doc_chars."""
    text = " ".join(text.split())
    return text[:max_doc_chars].rstrip() + " …" if len(text) > max_doc_chars else text


def user_prompt(request: CheckRequest, max_doc_chars: int) -> str:
    text = shown_text(request.text, max_doc_chars)
    lines = [f"Question: {request.question}"]
    if request.sub_goals:
        lines.append("Sub-goals:")
        lines += [f"{i}. {g}" for i, g in enumerate(request.sub_goals, 1)]
    lines += [
        "",
        f"Document title: {request.title}",
        f"Document text: {text}",
        "",
        "Label (IMPORTANT, RELEVANT or IRRELEVANT):",
    ]
    return "\n".join(lines)


def _prompt_id() -> str:
    """PROMPT_VERSION with a digest of the prompt's wording (system prompt and user template), so
    that a reworded prompt never reads verdicts cached under the old one."""
    template = user_prompt(CheckRequest("", "{question}", ("{goal}",), "", "{title}", "{text}"), 10**9)
    return f"{PROMPT_VERSION}:{hashlib.sha256((SYSTEM_PROMPT + template).encode()).hexdigest()[:12]}"


def build_messages(request: CheckRequest, max_doc_chars: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_prompt(request, max_doc_chars)},
    ]


def parse_label(text: str) -> Label | None:
    """The label in a reply: a JSON {"label": ...} or the first label word; None if there is none.

    >>> parse_label('{"label": "RELEVANT"}'), parse_label("Irrelevant."), parse_label("maybe")
    (<Label.RELEVANT: 'RELEVANT'>, <Label.IRRELEVANT: 'IRRELEVANT'>, None)
    """
    text = _THINK.sub("", text).strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            label = Label.parse(data.get("label"))
            if label is not None:
                return label
    match = _LABEL_WORD.search(text)
    return Label(match.group(1).upper()) if match else None


PROMPT_ID = _prompt_id()


class LLMChecker:
    """A DocumentChecker backed by a chat-completions server (see the module docstring)."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        model: str,
        *,
        structured_output: str,
        max_tokens: int = 16,
        max_doc_chars: int = 1200,
        max_concurrency: int = 4,
        cache: VerdictCache | None = None,
        cache_model: str | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.structured_output = structured_output
        self.max_tokens = max_tokens
        self.max_doc_chars = max_doc_chars
        self.max_concurrency = max_concurrency
        self.cache = cache
        self.cache_model = cache_model or model
        self._on_close = on_close
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="checker")
        self._lock = threading.Lock()
        self._requests = 0
        self._cache_hits = 0
        self._unparsable = 0
        self._fallbacks = 0
        self._no_probs = 0
        self.probs_note = ""
        """Why the first verdict without label probabilities has none ('' while all have them)."""
        self._wall_s = 0.0

    # ------------------------------------------------------------------ one request

    def request_body(self, request: CheckRequest) -> dict[str, Any]:
        """The chat-completions body for one request (thinking off, greedy, constrained)."""
        body = {
            "model": self.model,
            "messages": build_messages(request, self.max_doc_chars),
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "chat_template_kwargs": {"enable_thinking": False},
            # The label's first token's alternatives give the label probabilities (`label_logprobs.py`).
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
        }
        return constrain(body, self.structured_output, choices=LABELS, name="verdict")

    def _ask(self, request: CheckRequest) -> Verdict:
        try:
            reply = self.client.chat(self.request_body(request))
        except RequestRejected as exc:
            if exc.status not in (400, 422) or self.structured_output == "none":
                raise
            # The server has no (or another) structured-output dialect: ask without it, from now on.
            with self._lock:
                self.structured_output = "none"
                self._fallbacks += 1
            reply = self.client.chat(self.request_body(request))
        text = reply_text(reply)
        label = parse_label(text)
        if label is None:
            with self._lock:
                self._unparsable += 1
            return Verdict(Label.IRRELEVANT, f"unparsable reply {self.client.redact(text).strip()[:60]!r}")
        probs, why = label_probs(reply, text, label)
        if probs is None:
            with self._lock:
                self._no_probs += 1
                self.probs_note = self.probs_note or why
        return Verdict(label, "llm", probs)

    # ------------------------------------------------------------------ the protocol

    def check(self, requests: Sequence[CheckRequest]) -> list[Verdict]:
        start = time.monotonic()
        keys = [
            CacheKey(
                question_key(r.question, r.sub_goals),
                r.docid,
                self.cache_model,
                PROMPT_ID,
                document_key(r.title, shown_text(r.text, self.max_doc_chars)),
            )
            for r in requests
        ]
        known: dict[CacheKey, Verdict] = {}
        if self.cache is not None:
            known = {k: Verdict(Label(v.label), v.reason, v.probs) for k, v in self.cache.get_rows(set(keys)).items()}
        todo: dict[CacheKey, CheckRequest] = {}
        for key, request in zip(keys, requests):
            if key not in known:
                todo.setdefault(key, request)
        futures = {key: self._pool.submit(self._ask, request) for key, request in todo.items()}
        fresh = {key: future.result() for key, future in futures.items()}
        if self.cache is not None and fresh:
            self.cache.put_rows((k, CachedVerdict(v.label.value, v.reason, v.probs)) for k, v in fresh.items())
        known.update(fresh)
        with self._lock:
            self._requests += len(requests)
            self._cache_hits += len(requests) - len(todo)
            self._wall_s += time.monotonic() - start
        return [known[k] for k in keys]

    def stats(self) -> dict[str, float]:
        """Running counters since the checker was made (the trainer reports per-step deltas)."""
        s = self.client.stats
        with self._lock, s.lock:
            return {
                "requests": float(self._requests),
                "cache_hits": float(self._cache_hits),
                "calls": float(s.calls),
                "failures": float(s.failures),
                "unparsable": float(self._unparsable),
                "latency_s": s.latency_s,
                "wall_s": self._wall_s,
                "peak_in_flight": float(s.peak_in_flight),
                "structured_fallbacks": float(self._fallbacks),
                "no_probs": float(self._no_probs),
            }

    def close(self) -> None:
        """Stop the worker threads, close the cache and stop an embedded server."""
        self.client.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.cache is not None:
            self.cache.close()
            self.cache = None
        if self._on_close is not None:
            callback, self._on_close = self._on_close, None
            callback()
