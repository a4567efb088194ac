"""A server that trickles or floods: bounded time and memory against it.

A real TCP server on 127.0.0.1 (`RawServer`) answers the real `ChatClient` one byte at a time
(headers or body), or with a body far past the cap, announced or chunked. `checker.timeout_s`
bounds the whole exchange, `checker.max_reply_bytes` the reply (refused without being read whole),
and retries end by `checker.retry_deadline_s`; through `train`, each is one line and exit 2.
"""

from __future__ import annotations

import json
import re
import time

import pytest

import searchgrpo.agents.chat_client as chat_client
from searchgrpo.agents.chat_client import ChatClient, ServerUnavailable
from tests.helpers.faults import RawServer, assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS

REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "IMPORTANT"}}]}).encode()
SLOW_REPLY = REPLY + b" " * 1000
"""A valid reply (JSON may end in spaces) that takes minutes to trickle: a client that waited for it
whole, each read being fast, would still be reading when the test looks (state, not time)."""
HANG_GUARD_S = 60.0
"""How long a client bounded by a 1-2 s timeout may take before the test calls it a hang: far past
its timeout on the busiest machine; the claim itself is checked by what the server managed to send."""


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(chat_client, "BACKOFF_START_S", 0.05)
    monkeypatch.setattr(chat_client, "BACKOFF_MAX_S", 0.1)


TRICKLE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(SLOW_REPLY)
TRICKLE_HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Pad: " + b"a" * 2000 + b"\r\n"


def trickle_body(server, conn, request):
    server.send(conn, TRICKLE_HEAD)
    for byte in SLOW_REPLY:  # a byte every 0.2 s: each read gets one, none times out on its own
        if server.stopped():
            return
        server.send(conn, bytes([byte]))
        time.sleep(0.2)


def trickle_headers(server, conn, request):
    for byte in TRICKLE_HEADERS:
        if server.stopped():
            return
        server.send(conn, bytes([byte]))
        time.sleep(0.05)


def huge(chunked: bool):
    def reply(server, conn, request):
        block = b"x" * 65536
        if chunked:
            server.send(
                conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            for _ in range(3200):  # 200 MiB, if anyone read it
                server.send(conn, b"%x\r\n" % len(block) + block + b"\r\n")
        else:
            server.send(
                conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (1 << 30)
            )
            for _ in range(16384):
                server.send(conn, block)

    return reply


@pytest.mark.parametrize(
    "reply, whole",
    [(trickle_body, len(TRICKLE_HEAD) + len(SLOW_REPLY)), (trickle_headers, len(TRICKLE_HEADERS))],
    ids=["body", "headers"],
)
def test_a_trickling_reply_times_out_as_a_whole(reply, whole):
    with RawServer(reply) as server:
        client = ChatClient(server.url, timeout_s=1.0, max_retries=0)
        start = time.monotonic()
        with pytest.raises(ServerUnavailable) as info:
            client.chat({"messages": []})
        took = time.monotonic() - start
        sent = server.sent
    # The whole reply takes over 200 s, or 100 s of headers; each read alone is fast. The client
    # gave up with the reply still coming (a per-read timeout would have read it to its end).
    assert sent < whole, f"the client read the whole trickled reply ({sent} bytes) before giving up"
    assert took < HANG_GUARD_S, f"hang guard: the 1 s timeout took {took:.1f} s"
    assert "no complete reply within 1 s" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_huge_reply_is_refused_without_being_read(chunked):
    cap = 64 * 1024
    with RawServer(huge(chunked)) as server:
        client = ChatClient(server.url, timeout_s=20.0, max_retries=0, max_reply_bytes=cap)
        start = time.monotonic()
        with pytest.raises(ServerUnavailable) as info:
            client.chat({"messages": []})
        took = time.monotonic() - start
    sent = server.sent  # read once the server has stopped: its sending is over (see RawServer.close)
    message = str(info.value)
    assert "byte cap" in message and "checker.max_reply_bytes" in message, message
    assert took < HANG_GUARD_S, f"hang guard: refusing the reply took {took:.1f} s"
    assert sent < 16 * 2**20, sent  # of 200 MiB to 1 GiB offered: the client stopped at the cap (plus socket buffers)


def test_retries_end_by_the_retry_deadline():
    def slow(server, conn, request):
        for _ in range(50):  # never answers within a 1 s attempt
            if server.stopped():
                return
            time.sleep(0.1)

    with RawServer(slow) as server:
        client = ChatClient(server.url, timeout_s=1.5, max_retries=100, retry_deadline_s=2.0)
        timeouts = []  # what each attempt was given
        real_request = client._request

        def request(method, path, body, timeout):
            timeouts.append(timeout)
            return real_request(method, path, body, timeout)

        client._request = request
        start = time.monotonic()
        with pytest.raises(ServerUnavailable, match="failed"):
            client.chat({"messages": []})
        took = time.monotonic() - start
    # The second attempt gets what is left of the 2 s deadline (at most 0.5 s), not 1.5 s more. No
    # attempt ends before its timeout (the server never answers), so each starts after the earlier
    # ones' timeouts: together they fit in the deadline, however slow the machine.
    assert len(timeouts) >= 2 and timeouts[0] == 1.5 and timeouts[1] <= 0.5, timeouts
    assert sum(timeouts) <= 2.0 + 0.001 * len(timeouts), timeouts
    assert took >= 1.9, took  # the deadline was used, not cut short
    assert took < HANG_GUARD_S, f"hang guard: a 2 s retry deadline took {took:.1f} s"


def test_train_against_a_trickling_server_stops_in_one_line_within_its_limits(tmp_path, capsys, monkeypatch):
    def models_then_trickle(server, conn, request):
        if b"/models" in request.split(b"\r\n", 1)[0]:
            body = json.dumps({"data": [{"id": "raw"}]}).encode()
            server.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        else:
            trickle_body(server, conn, request)

    monkeypatch.chdir(tmp_path)
    with RawServer(models_then_trickle) as server:
        start = time.monotonic()
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
                "--set",
                "checker.timeout_s=1",
                "--set",
                "checker.retry_deadline_s=2.5",
                "--set",
                "train.max_steps=1",
            ],
            capsys,
            monkeypatch,
        )
        took = time.monotonic() - start
    assert code == 2, out
    # Each attempt is cut at 1 s, the last one shorter, so that all end by the 2.5 s deadline.
    line = assert_one_error_line(
        out, f"checker server {server.url}/chat/completions failed", "no complete reply within"
    )
    assert float(re.search(r"over ([\d.]+) s", line).group(1)) <= 2.6, line
    assert took < 60, took
