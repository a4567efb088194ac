"""A small client for OpenAI-compatible `/v1/chat/completions` servers (vLLM, llama.cpp, ...).

It speaks plain HTTP with the standard library (`searchgrpo.http_exchange`, over http.client): the frozen
agents need one POST and one GET, so a client library would add a dependency and nothing else. It
adds what a training run needs from a server it does not control:

- a health check that fails in one line, within seconds, naming the URL; a server that answers
  503 while it loads its model (llama.cpp's and vLLM's `{"error": ... "Loading model"}`, or a 503
  with Retry-After) is waited for, up to `retry_deadline_s`, with a progress line every
  `LOAD_NOTE_EVERY_S` seconds;
- retries of transient failures (connection refused or reset, timeouts, replies cut short or over
  the size cap, 429 and 5xx) with exponential backoff, until `max_retries` retries or
  `retry_deadline_s` seconds have passed (attempts are cut short so that the last one ends by
  then), so that a server that restarts mid-run costs time but no step. A 429 or 503 with a
  `Retry-After` (seconds or an HTTP date) waits that long instead of the backoff, and fails at once
  when that would pass the deadline;
- a 2xx reply whose body is not JSON (an HTML page from a proxy, a wrong URL) is its own error
  (`NotJSONReply`, one line with the content type and the first bytes), never retried: the
  server is up and answering, so waiting will not change what it says;
- `timeout_s` bounds each whole request and `max_reply_bytes` each reply, so a server that
  trickles or floods cannot hold a run or fill its memory;
- the API key from an environment variable, checked when the client is made (a CR, LF or other
  character a header cannot carry is refused in one line that does not show the key), sent as a
  Bearer token, registered with `searchgrpo.redact` and never logged or shown;
- a request that cannot be built (`RequestInvalid`, not retried) told apart from a server that
  cannot be reached (`ServerUnavailable`);
- constraining a reply to a fixed set of words or a JSON schema with whatever structured-output
  support the server has (`constrain`).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from searchgrpo.errors import UserError, one_line, printable
from searchgrpo.http_exchange import (
    ReplyTooLarge,
    RequestNotBuilt,
    StatusError,
    api_key_from_env,
    checked_api_key,
    exchange,
    json_headers,
)
from searchgrpo.http_exchange import failure_reason as _reason
from searchgrpo.redact import scrub

BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 10.0
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
STRUCTURED_MODES = ("grammar", "json_schema", "choice", "none")
DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024
RETRY_AFTER_STATUS = {429, 503}
"""Statuses whose Retry-After header is honoured."""
LOAD_NOTE_EVERY_S = 10.0
"""While a server loads its model, the health check reports progress this often."""


class ServerUnavailable(UserError):
    """The server could not be reached or kept failing past the retry budget."""


class RequestInvalid(UserError):
    """A request could not be built (nothing was sent): a fix on this side, never retried."""


class NotJSONReply(UserError):
    """The server answered 2xx with a body that is not JSON: it is up, but not the API we expect."""


class RequestRejected(UserError):
    """The server answered a request with a client error (4xx other than 408/409/425/429)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ClientStats:
    """Counters since the client was made (read them as deltas)."""

    calls: int = 0
    """Successful requests."""
    failures: int = 0
    """Failed attempts (each retry that was needed counts)."""
    latency_s: float = 0.0
    """Summed wall time of the successful requests."""
    in_flight: int = 0
    peak_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _one_line(text: str, limit: int = 200) -> str:
    return one_line(scrub(text), limit)


class ChatClient:
    """POSTs chat completions to `base_url` (which ends in /v1) with retries (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 20,
        retry_deadline_s: float = 300.0,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self._api_key = (
            checked_api_key(api_key, "the API key") if api_key is not None else api_key_from_env(api_key_env)
        )
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.retry_deadline_s = retry_deadline_s
        self.max_reply_bytes = max_reply_bytes
        self.stats = ClientStats()
        self._closed = threading.Event()
        self._sleep = sleep or self._closed.wait  # close() cuts a backoff short

    def __repr__(self) -> str:  # never shows the key
        return f"ChatClient({self.base_url!r})"

    def close(self) -> None:
        """Stop retrying: requests waiting for a retry fail at once (a closing run must not wait)."""
        self._closed.set()

    def redact(self, text: str) -> str:
        """`text` from the server with the API key blanked out: a server or proxy that echoes the
        request (its headers in an error body, say) must not put the key into errors or events."""
        return scrub(text)

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        url = self.base_url + path
        try:
            reply = exchange(
                method,
                url,
                body=data,
                headers=json_headers(self._api_key),
                timeout_s=timeout,
                max_bytes=self.max_reply_bytes,
            )
        except RequestNotBuilt as exc:
            raise RequestInvalid(f"checker request to {url} could not be built ({exc}); nothing was sent") from None
        except ReplyTooLarge as exc:
            raise ReplyTooLarge(f"{exc} (checker.max_reply_bytes)") from None
        try:
            return json.loads(reply.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            start = printable(reply.body[:60].decode("utf-8", "replace"))
            raise NotJSONReply(
                f"checker server {url} answered HTTP {reply.status} with a non-JSON body (content-type "
                f"{one_line(self.redact(reply.content_type), 60) or 'none'}; it begins "
                f"'{one_line(self.redact(start), 60)}'); is checker.server the API's base URL (ending in /v1)?"
            ) from None

    # ------------------------------------------------------------------ health

    def health(self, timeout_s: float = 5.0, *, progress: Callable[[str], None] | None = None) -> list[str]:
        """The served model ids (GET /models). Raises a one-line UserError naming the URL. A server
        still loading its model (503, see `is_loading`) is waited for up to `retry_deadline_s`
        instead of `timeout_s`, telling `progress` so every LOAD_NOTE_EVERY_S seconds."""
        url = f"{self.base_url}/models"
        start = time.monotonic()
        deadline = start + timeout_s
        noted = None  # when progress was last told
        while True:
            wait = 0.2
            try:
                left = min(deadline - time.monotonic(), max(timeout_s, 0.5))
                listing = self._request("GET", "/models", None, timeout=max(left, 0.5))
                break
            except StatusError as exc:
                if exc.status in (401, 403):
                    where = f"${self.api_key_env}" if self.api_key_env else "the API key"
                    raise UserError(
                        f"checker server {url} refused the API key (HTTP {exc.status}); check {where}"
                    ) from None
                now = time.monotonic()
                if is_loading(exc):
                    deadline = max(deadline, start + self.retry_deadline_s)
                    said = _one_line(self.redact(exc.body), 80) or "no body"
                    if now >= deadline:
                        raise ServerUnavailable(
                            f"checker server {url} was still loading its model after {now - start:.0f} s "
                            f"(HTTP 503: {said}); start training once it is up, or raise checker.retry_deadline_s"
                        ) from None
                    if progress is not None and (noted is None or now - noted >= LOAD_NOTE_EVERY_S):
                        noted = now
                        progress(
                            f"checker server {url} is loading its model (HTTP 503: {said}); waited "
                            f"{now - start:.0f} s of up to {self.retry_deadline_s:.0f} s (checker.retry_deadline_s)"
                        )
                    wait = min(retry_after_s(exc.retry_after) or 1.0, max(deadline - now, 0.01))
                elif exc.status != 503 or now >= deadline:
                    raise ServerUnavailable(
                        f"checker server {url} answered HTTP {exc.status}; is it an "
                        "OpenAI-compatible server (base URL ending in /v1)?"
                    ) from None
            except (OSError, ValueError, http.client.HTTPException) as exc:
                if time.monotonic() >= deadline:
                    raise ServerUnavailable(
                        f"checker server {url} is unreachable ({_one_line(_reason(exc))}); start it "
                        "(`searchgrpo serve`) or set checker.server"
                    ) from None
            self._sleep(wait)
        ids = [m.get("id") for m in listing.get("data", []) if isinstance(m, dict)] if isinstance(listing, dict) else []
        return [i for i in ids if isinstance(i, str)]

    # ------------------------------------------------------------------ completions

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /chat/completions, retrying transient failures; the decoded JSON reply."""
        url = f"{self.base_url}/chat/completions"
        first = time.monotonic()
        deadline = first + self.retry_deadline_s
        backoff = BACKOFF_START_S
        attempt = 0
        while True:
            start = time.monotonic()
            asked: float | None = None  # what a Retry-After header asked for, in seconds
            with self.stats.lock:
                self.stats.in_flight += 1
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
            try:
                # The last attempt ends by the deadline: it gets what is left of it, at most timeout_s.
                timeout = min(self.timeout_s, max(deadline - start, 0.001))
                reply = self._request("POST", "/chat/completions", body, timeout=timeout)
                if not isinstance(reply, dict):
                    raise ValueError("reply is not a JSON object")
                with self.stats.lock:
                    self.stats.calls += 1
                    self.stats.latency_s += time.monotonic() - start
                return reply
            except StatusError as exc:
                if exc.status not in RETRYABLE_STATUS:
                    raise RequestRejected(
                        f"checker server {url} rejected a request (HTTP {exc.status}): {_one_line(exc.body)}",
                        exc.status,
                    ) from None
                error = f"HTTP {exc.status}"
                asked = retry_after_s(exc.retry_after) if exc.status in RETRY_AFTER_STATUS else None
            except (OSError, ValueError, http.client.HTTPException) as exc:
                # HTTPException: a reply cut short (IncompleteRead) or a bad status line.
                error = _one_line(_reason(exc))
            finally:
                with self.stats.lock:
                    self.stats.in_flight -= 1
            with self.stats.lock:
                self.stats.failures += 1
            attempt += 1
            now = time.monotonic()
            elapsed = now - first
            if self._closed.is_set():
                raise ServerUnavailable(f"checker client for {url} was closed during a retry (last: {error})")
            wait = backoff if asked is None else asked
            if asked is not None and now + asked >= deadline:
                raise ServerUnavailable(
                    f"checker server {url} answered {error} asking to retry after {asked:.0f} s (Retry-After), "
                    f"past checker.retry_deadline_s = {self.retry_deadline_s:g} s from the first attempt "
                    f"{elapsed:.1f} s ago; the run stops here and resumes from its last checkpoint with --resume"
                )
            if attempt > self.max_retries or now + wait >= deadline:
                raise ServerUnavailable(
                    f"checker server {url} failed {attempt} times over {elapsed:.1f} s (last: {error}); "
                    "the run stops here and resumes from its last checkpoint with --resume"
                )
            self._sleep(wait)
            if asked is None:
                backoff = min(backoff * 2, BACKOFF_MAX_S)


def retry_after_s(value: str, now: float | None = None) -> float | None:
    """Seconds a Retry-After header value asks to wait: a number of seconds, or an HTTP date (its
    distance from `now`, a time.time(), at least 0); None when absent or malformed.

    >>> retry_after_s("4"), retry_after_s("Thu, 01 Jan 1970 00:01:00 GMT", now=0.0), retry_after_s("soon")
    (4.0, 60.0, None)
    """
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return max(when.timestamp() - (time.time() if now is None else now), 0.0)
    return seconds if 0.0 <= seconds < float("inf") else None


def is_loading(exc: StatusError) -> bool:
    """A 503 that says the server is still loading its model: its body says "loading" (llama.cpp
    and vLLM: `{"error": {"message": "Loading model", ...}}`), or it carries a Retry-After."""
    return exc.status == 503 and ("loading" in exc.body.lower() or bool(exc.retry_after.strip()))


def reply_text(reply: dict[str, Any]) -> str:
    """The assistant message of a chat completion ('' if absent)."""
    try:
        content = reply["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return content if isinstance(content, str) else ""


def gbnf_choice(words: Sequence[str]) -> str:
    """A llama.cpp GBNF grammar whose only sentences are `words`."""
    return "root ::= " + " | ".join(json.dumps(w) for w in words)


def constrain(
    body: dict[str, Any],
    mode: str,
    *,
    choices: Sequence[str] | None = None,
    schema: dict[str, Any] | None = None,
    name: str = "answer",
) -> dict[str, Any]:
    """`body` with the reply constrained to one of `choices` or to `schema`, in the server's dialect.

    `grammar`: llama.cpp (GBNF for choices; its `json_schema` field for schemas). `json_schema`:
    OpenAI's response_format (vLLM, llama.cpp, hosted APIs); choices become {"label": one of}.
    `choice`: vLLM's structured_outputs (choice or json). `none`: unchanged.
    """
    if mode not in STRUCTURED_MODES:
        raise ValueError(f"unknown structured-output mode {mode!r}")
    out = dict(body)
    if mode == "none":
        return out
    if choices is not None and schema is not None:
        raise ValueError("give choices or a schema, not both")
    if mode == "grammar":
        if choices is not None:
            out["grammar"] = gbnf_choice(choices)
        else:
            out["json_schema"] = schema
    elif mode == "choice":
        out["structured_outputs"] = {"choice": list(choices)} if choices is not None else {"json": schema}
    else:
        if choices is not None:
            schema = choice_schema(choices)
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": True, "schema": schema},
        }
    return out


def choice_schema(choices: Sequence[str]) -> dict[str, Any]:
    """The JSON schema {"label": one of choices} used where a server has no plain choice constraint."""
    return {
        "type": "object",
        "properties": {"label": {"type": "string", "enum": list(choices)}},
        "required": ["label"],
        "additionalProperties": False,
    }
