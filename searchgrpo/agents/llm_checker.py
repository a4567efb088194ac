"""The `llm` DocumentChecker: the frozen base LLM labels documents over an OpenAI-compatible API.

For each (question, document) it sends one chat completion with thinking disabled
(`chat_template_kwargs: {"enable_thinking": false}`, as vLLM expects for Qwen3) and temperature 0.
The prompt (`PROMPT_VERSION`) holds the question, its sub-goals and the document (text cut to
`max_doc_chars`), in that order, so that a server's prompt cache can reuse the shared start; it
asks for exactly one of IMPORTANT / RELEVANT / IRRELEVANT. The reply is constrained with the
server's structured-output support (`chat_client.constrain`) and counts only when it is exactly a
label (`label_reply.parse_label`: a JSON {"label": ...} or the bare label).

An unparsable reply is counted, labelled IRRELEVANT for the step (so the reward never pays for a
reply it could not read) with the reason `unparsable reply '...'`, and never cached: a later run
against a healthy server asks again. Once `min_calls_for_unparsable` replies have come, a running share
of unparsable replies above `max_unparsable_frac` stops the run (`UnparsableReplies`, one line
naming the server and a sample reply): a judge that does not answer with labels is not a reward.
The request asks for `logprobs`: where the server returns them and the labels' first tokens
differ, the verdict carries the label probabilities (`label_logprobs.py`, for
`reward.soft_labels`); otherwise `probs_note` says why it has none.

Verdicts are looked up in the `VerdictCache` first, keyed by digests of the question, of the
document as shown and of the prompt's wording (`PROMPT_ID`); only misses are sent,
`max_concurrency` at a time. `stats()` returns running counters that the trainer turns into per-step
`checker/*` metrics.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searchgrpo.agents.chat_client import ChatClient, RequestRejected, constrain, reply_text
from searchgrpo.agents.checker import CheckerDefaults, CheckRequest, Verdict
from searchgrpo.agents.label_logprobs import label_probs
from searchgrpo.agents.label_reply import parse_label
from searchgrpo.agents.verdict_cache import CachedVerdict, CacheKey, VerdictCache, document_key, question_key
from searchgrpo.data.labels import Label
from searchgrpo.errors import UserError, printable

PROMPT_VERSION = "checker-v1"
PARSER_VERSION = "exact-label-v2"
"""The reply parser (`label_reply`); v1 took the first label word anywhere in the reply."""
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

UNPARSABLE = "unparsable reply"
"""How an unparsable reply's verdict reason begins (the rest is the reply, escaped and cut)."""
SAMPLE_CHARS = 80
"""Characters of a reply quoted in a verdict's reason or an error."""

__all__ = ["LLMChecker", "UnparsableReplies", "parse_label"]


class UnparsableReplies(UserError):
    """Too large a share of the checker's replies were not exactly a label."""


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
    """PROMPT_VERSION with a digest of the prompt's wording (system prompt and user template) and
    of the reply parser's version, so that a reworded prompt never reads verdicts cached under the
    old one, nor a stricter parser labels read by a looser one."""
    template = user_prompt(CheckRequest("", "{question}", ("{goal}",), "", "{title}", "{text}"), 10**9)
    wording = SYSTEM_PROMPT + template + PARSER_VERSION
    return f"{PROMPT_VERSION}:{hashlib.sha256(wording.encode()).hexdigest()[:12]}"


def quoted(reply: str) -> str:
    """A reply as errors and reasons quote it: escaped (`errors.printable`), cut to SAMPLE_CHARS."""
    text = printable(reply.strip())
    return "'" + (text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…") + "'"


def build_messages(request: CheckRequest, max_doc_chars: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_prompt(request, max_doc_chars)},
    ]


PROMPT_ID = _prompt_id()


class LLMChecker(CheckerDefaults):
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
        max_unparsable_frac: float = 1.0,
        min_calls_for_unparsable: int = 0,
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
        self.max_unparsable_frac = max_unparsable_frac
        """Stop once more than this share of the replies were unparsable (1: never)."""
        self.min_calls_for_unparsable = min_calls_for_unparsable
        """Replies needed before `max_unparsable_frac` applies."""
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="checker")
        self._lock = threading.Lock()
        self._requests = 0
        self._cache_hits = 0
        self._unparsable = 0
        self._replies = 0
        self._sample = ""
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
        with self._lock:
            self._replies += 1
            if label is None:
                self._unparsable += 1
                self._sample = self._sample or text
        if label is None:
            return Verdict(Label.IRRELEVANT, f"{UNPARSABLE} {quoted(self.client.redact(text))}")
        probs, why = label_probs(reply, text, label)
        if probs is None:
            with self._lock:
                self._no_probs += 1
                self.probs_note = self.probs_note or why
        return Verdict(label, "llm", probs)

    def _check_unparsable_share(self) -> None:
        """Raise UnparsableReplies when the running share passes `max_unparsable_frac`."""
        with self._lock:
            replies, unparsable, sample = self._replies, self._unparsable, self._sample
        if replies < max(self.min_calls_for_unparsable, 1) or unparsable <= self.max_unparsable_frac * replies:
            return
        raise UnparsableReplies(
            f"checker server {self.client.base_url} ({self.model}): {unparsable} of {replies} replies "
            f"({unparsable / replies:.0%}) were not exactly a label, above checker.max_unparsable_frac = "
            f"{self.max_unparsable_frac:g}; e.g. {quoted(self.client.redact(sample))}; use a model that "
            "follows the prompt or a structured-output mode its server supports (checker.structured_output)"
        )

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
        readable = [
            (k, CachedVerdict(v.label.value, v.reason, v.probs))
            for k, v in fresh.items()
            if not v.reason.startswith(UNPARSABLE)
        ]
        if self.cache is not None and readable:
            self.cache.put_rows(readable)  # never an unparsable reply: a later run asks again
        known.update(fresh)
        with self._lock:
            self._requests += len(requests)
            self._cache_hits += len(requests) - len(todo)
            self._wall_s += time.monotonic() - start
        self._check_unparsable_share()
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
                "replies": float(self._replies),
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
