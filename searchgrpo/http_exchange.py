"""One HTTP request with a deadline on the whole exchange and a cap on the reply's size.

urllib's `timeout` bounds each socket operation, not the request: a server that trickles its
reply a byte at a time holds a request for as long as it likes, and `read()` takes a reply of any
size into memory. `exchange` bounds both: a watchdog shuts the connection down once the whole
exchange (connecting, sending, the status line, headers and body) has taken `timeout_s`, and the
body is read in chunks and refused as soon as its announced length, or what has arrived, passes
`max_bytes`. A body that ends before its announced length is torn (`http.client.IncompleteRead`),
however the connection closed.

It also tells a request that cannot be built (a header value HTTP forbids, a malformed URL:
`RequestNotBuilt`, raised before anything is sent, and worded without the offending value, which
may be a secret) from a server that cannot be reached (`OSError`, `http.client.HTTPException`).
Redirects are not followed and environment proxies are not used: the Authorization header goes to
the configured server and nowhere else.

It sits below every pipeline stage (a foundation module) because two clients share it: the frozen
agents' chat client (`searchgrpo.agents.chat_client`) and the HTTP search backend
(`searchgrpo.retrieval.http_search`), which sits below the agents. `api_key_from_env` and
`failure_reason` are theirs too: the key read and checked the same way, and an attempt's failure
worded the same way, by both.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import threading
import time
from typing import NamedTuple
from urllib.parse import urlsplit

from searchgrpo.errors import UserError
from searchgrpo.redact import add_secret

CHUNK = 64 * 1024
_FORBIDDEN_IN_HEADER = re.compile(r"[^\x20-\x7e\t]")


class RequestNotBuilt(ValueError):
    """The request could not be built; nothing was sent. The message never quotes a header value."""


class ExchangeTimeout(TimeoutError):
    """No complete reply within the deadline."""


class ReplyTooLarge(ValueError):
    """The reply is larger than the cap; it was not read whole."""


class StatusError(Exception):
    """A complete reply whose status is not 2xx; `body` is its (capped) text, `retry_after` its
    Retry-After header ('' when absent)."""

    def __init__(self, status: int, body: str, retry_after: str = "") -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


class Reply(NamedTuple):
    """A complete 2xx reply."""

    status: int
    body: bytes
    content_type: str
    """The Content-Type header ('' when absent)."""


def check_header_value(name: str, value: str) -> None:
    """Raise RequestNotBuilt when `value` holds a character a header may not carry (CR, LF, other
    controls, anything outside printable ASCII); the message names the header, not the value."""
    bad = _FORBIDDEN_IN_HEADER.search(value)
    if bad:
        kind = {"\r": "a CR", "\n": "an LF"}.get(
            bad.group(),
            "a control character"
            if bad.group() < " " or bad.group() == "\x7f"
            else "a character outside printable ASCII",
        )
        raise RequestNotBuilt(f"the {name} header would hold {kind} (at position {bad.start()})")


def exchange(
    method: str, url: str, *, body: bytes | None, headers: dict[str, str], timeout_s: float, max_bytes: int
) -> Reply:
    """The reply to one request. Raises RequestNotBuilt, ExchangeTimeout, ReplyTooLarge,
    StatusError (non-2xx), or what the connection raised (OSError, HTTPException)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RequestNotBuilt("the URL is not an http(s):// URL with a host")
    if _FORBIDDEN_IN_HEADER.search(url) or " " in url:
        raise RequestNotBuilt("the URL holds a space or a control character")
    for name, value in headers.items():
        check_header_value(name, value)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        port = parts.port
    except ValueError:
        raise RequestNotBuilt("the URL's port is not a number from 0 to 65535") from None
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    deadline = time.monotonic() + timeout_s
    conn = cls(parts.hostname, port, timeout=timeout_s)
    cut = threading.Event()

    def watchdog() -> None:
        cut.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked read; the exchange fails at once

    timer = threading.Timer(timeout_s, watchdog)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        left = deadline - time.monotonic()
        if left <= 0 or cut.is_set():
            raise ExchangeTimeout(f"no reply within {timeout_s:.3g} s")
        conn.sock.settimeout(left)
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
        announced = resp.getheader("Content-Length", "")
        if announced.strip().isdigit() and int(announced) > max_bytes:
            raise ReplyTooLarge(f"reply of {int(announced)} bytes announced, above the {max_bytes}-byte cap")
        chunks, size = [], 0
        while True:
            chunk = resp.read(min(CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise ReplyTooLarge(f"reply longer than the {max_bytes}-byte cap; not read further")
            chunks.append(chunk)
        if announced.strip().isdigit() and size < int(announced):
            # The connection closed before the announced length: a torn reply, not a short one.
            raise http.client.IncompleteRead(b"".join(chunks), int(announced) - size)
    except (OSError, http.client.HTTPException) as exc:
        if cut.is_set() or isinstance(exc, TimeoutError):  # the watchdog, or a read that hit the deadline
            raise ExchangeTimeout(f"no complete reply within {timeout_s:.3g} s") from None
        raise
    finally:
        timer.cancel()
        conn.close()
    if cut.is_set():
        raise ExchangeTimeout(f"no complete reply within {timeout_s:.3g} s")
    data = b"".join(chunks)
    if not 200 <= resp.status < 300:
        raise StatusError(resp.status, data.decode("utf-8", "replace"), resp.getheader("Retry-After", "") or "")
    return Reply(resp.status, data, resp.getheader("Content-Type", "") or "")


def failure_reason(exc: BaseException) -> str:
    """What went wrong with an attempt, in words (never a header value: those are checked before
    anything is sent)."""
    if isinstance(exc, (ExchangeTimeout, ReplyTooLarge)):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"reply is not JSON ({exc.msg})"
    if isinstance(exc, UnicodeDecodeError):
        return "reply is not UTF-8"
    text = str(getattr(exc, "strerror", None) or exc)
    return (
        f"{type(exc).__name__}: {text}"
        if text and not text.startswith(type(exc).__name__)
        else (text or type(exc).__name__)
    )


def checked_api_key(key: str, where: str) -> str:
    """`key`, registered as a secret; refused in one line that does not show it when it holds a
    character an HTTP header cannot carry (a CR or LF pasted with it, say). `where` names its source."""
    if key:
        try:
            check_header_value("Authorization", key)
        except RequestNotBuilt as exc:
            what = str(exc).split(" would hold ", 1)[1]
            raise UserError(
                f"{where} holds {what} of its {len(key)} characters; the key was not used (set it again without it)"
            ) from None
        add_secret(key)
    return key


def api_key_from_env(name: str | None) -> str:
    """The key in `$name` ('' when unset or `name` is None), checked (`checked_api_key`)."""
    return checked_api_key(os.environ.get(name, ""), f"${name}") if name else ""


def json_headers(api_key: str | None) -> dict[str, str]:
    """The headers of a JSON request, with the bearer key when there is one."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers
