"""Secrets and exposure: an API key that cannot be sent is refused at the start without being
shown; text that carries the key never reaches events.jsonl or the terminal; a request that cannot
be built is not an outage; `serve` checks its port, needs a key (or --insecure) off loopback, and
the server it starts checks that key.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from searchgrpo.agents.chat_client import ChatClient, RequestInvalid, ServerUnavailable
from tests.helpers.faults import FaultServer, assert_one_error_line, cli_env, main_in_process
from tests.helpers.tiny import SETS
from tests.helpers.waiting import CEILING_S, wait_until

KEY_ENV = "SEARCHGRPO_CHECKER_API_KEY"


def llm(server: FaultServer, tmp_path: Path) -> list[str]:
    return [
        "--set",
        "checker.backend=llm",
        "--set",
        f"checker.server={server.url}",
        "--set",
        f"checker.cache_path={tmp_path / 'verdicts.sqlite'}",
    ]


@pytest.mark.parametrize(
    "bad, kind",
    [
        ("\r\nX-Injected: 1", "a CR"),
        ("\n", "an LF"),
        ("\x7f", "a control character"),
        ("\x1b[31m", "a control character"),
        ("é", "a character outside printable ASCII"),
    ],
)
def test_a_key_that_cannot_go_into_a_header_is_refused_at_start_unshown(bad, kind, tmp_path, capsys, monkeypatch):
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv(KEY_ENV, secret[:10] + bad + secret[10:])
    monkeypatch.chdir(tmp_path)
    with FaultServer() as server:
        code, out = main_in_process(["train", "--headless", *SETS, *llm(server, tmp_path)], capsys, monkeypatch)
        assert server.records == []  # refused before any request
    assert code == 2, out
    assert_one_error_line(out, f"${KEY_ENV} holds {kind}", "the key was not used")
    assert secret[:10] not in out and secret[10:] not in out
    assert not (tmp_path / "runs").exists()


def test_a_key_echoed_by_the_server_never_reaches_the_terminal_or_events(tmp_path, capsys, monkeypatch):
    """The server answers 400 with the request's headers in its body (some proxies do), so the
    run fails with an error that quotes them. The key holds a quote and a backslash, which JSON
    escapes: every spelling is blanked out of the error line, the RunFailed event and its traceback."""
    secret = 'sk-"quoted\\key-0123456789'
    monkeypatch.setenv(KEY_ENV, secret)
    monkeypatch.chdir(tmp_path)
    with FaultServer() as server:
        server.mode, server.models_ok = "echo400", True
        code, out = main_in_process(
            [
                "train",
                "--headless",
                *SETS,
                *llm(server, tmp_path),
                "--set",
                "train.run_name=r",
                "--set",
                "checker.structured_output=none",
                "--set",
                "train.max_steps=1",
            ],
            capsys,
            monkeypatch,
        )
        assert any(r["headers"].get("Authorization") == f"Bearer {secret}" for r in server.records)
    assert code == 2, out
    line = assert_one_error_line(out, "rejected a request (HTTP 400)", "[api key]")
    spellings = [secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]]
    events = (tmp_path / "runs" / "r" / "events.jsonl").read_text()
    assert '"RunFailed"' in events or "RunFailed" in events
    for text in (out, line, events):
        assert not any(s in text for s in spellings), text[:400]
    assert "[api key]" in events


def test_a_request_that_cannot_be_built_is_not_an_outage(tmp_path, capsys, monkeypatch):
    with FaultServer() as server:
        bad_url = server.url + "/bad path"
        client = ChatClient(bad_url, max_retries=5)
        with pytest.raises(RequestInvalid) as info:
            client.chat({"messages": []})
        assert "could not be built" in str(info.value) and "nothing was sent" in str(info.value)
        assert client.stats.failures == 0 and server.records == []  # not retried, never sent
        monkeypatch.chdir(tmp_path)
        code, out = main_in_process(
            ["train", "--headless", *SETS, "--set", "checker.backend=llm", "--set", f"checker.server={bad_url}"],
            capsys,
            monkeypatch,
        )
        assert code == 2
        assert_one_error_line(out, "could not be built (the URL holds a space or a control character)")
        server.stop()
        with pytest.raises(ServerUnavailable, match="is unreachable"):
            ChatClient(server.url).health(timeout_s=0.3)


# --------------------------------------------------------------------------- serve


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_serve_refuses_a_port_out_of_range(port, capsys, monkeypatch):
    code, out = main_in_process(["serve", "--port", port], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"--port {port} is out of range: expected 0 to 65535 (0: any free port)")


def test_serve_off_loopback_needs_a_key_or_insecure(tmp_path, capsys, monkeypatch):
    wildcard = ".".join(["0"] * 4)  # every address: never bound here, refused before
    monkeypatch.delenv(KEY_ENV, raising=False)
    code, out = main_in_process(["serve", "--host", wildcard, "--port", "0"], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"--host {wildcard} can be reached from other machines", "--api-key-env", "--insecure")
    code, out = main_in_process(["serve", "--host", wildcard, "--api-key-env", "NO_SUCH_KEY_VAR"], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "$NO_SUCH_KEY_VAR is not set")
    missing = tmp_path / "none.gguf"  # stops the command after the checks, before anything listens
    code, out = main_in_process(
        ["serve", "--host", wildcard, "--insecure", "--set", f"checker.gguf={missing}"], capsys, monkeypatch
    )
    assert code == 2
    assert f"warning: serving on {wildcard} without an API key (--insecure)" in out
    assert_one_error_line(out, f"checker.gguf: {missing} not found")


def test_serve_with_a_key_answers_only_requests_that_send_it(tmp_path):
    key = "sk-serve-test-77aa"
    env = cli_env(SERVE_KEY=key)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "searchgrpo",
            "serve",
            "--port",
            "0",
            "--api-key-env",
            "SERVE_KEY",
            "--set",
            "checker.server_threads=1",
            "--set",
            "checker.max_concurrency=1",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    try:

        def serving() -> bool:
            lines.append(proc.stdout.readline())
            return "serving" in lines[-1]

        wait_until(serving, "the server saying it is serving", proc=proc)
        assert "API key required" in lines[-1] and key not in "".join(lines)
        base = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", lines[-1]).group(1)
        for path in ("/models", "/chat/completions"):
            body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(
                    urllib.request.Request(
                        base + path, data=body if "chat" in path else None, headers={"Content-Type": "application/json"}
                    ),
                    timeout=CEILING_S,
                )
            assert info.value.code == 401
        assert ChatClient(base, api_key=key).health(timeout_s=CEILING_S)  # the key opens it
    finally:
        proc.send_signal(signal.SIGINT)
        try:  # llama.cpp joins its threads on the way out: over 30 s once beside two busy processes
            proc.wait(timeout=CEILING_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0
