"""Shared tools of the fault suite: the CLI in a subprocess or in-process, a fault-injecting HTTP
server, a copy of the tiny demo world to damage, and checks that a checkpoint really loads.

The fault server is not a mock of the checker: the real `ChatClient` / `LLMChecker` talk to it
over HTTP on 127.0.0.1, and it answers as a healthy OpenAI-compatible server would until it is
told to fail (down, slow, HTTP 500, garbage, a torn reply, 401, or a 400 that echoes the request).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from tests.helpers.waiting import CEILING_S

# One OpenMP thread per training process: on a shared 2-core machine torch's default of one
# thread per core makes a busy neighbour slow each step by 10-50x (threads spin at barriers).
FAST_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


# --------------------------------------------------------------------------- the CLI


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **FAST_ENV, **extra}


def spawn(*args: str, cwd: Path, fault: str | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -m searchgrpo ARGS` (or, with `fault`, the same CLI with a fault installed first)."""
    module = ["-m", "tests.helpers.inject"] if fault else ["-m", "searchgrpo"]
    full_env = {**(env or cli_env()), **({"SEARCHGRPO_FAULT": fault} if fault else {})}
    return subprocess.Popen(
        [sys.executable, *module, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=full_env,
    )


def run_cli(*args: str, cwd: Path, timeout: float = 240, **kw: Any) -> tuple[int, str]:
    proc = spawn(*args, cwd=cwd, **kw)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"searchgrpo {' '.join(args)} timed out:\n{out}")
    return proc.returncode, out


def main_in_process(args: list[str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Run the real entry point (`searchgrpo.cli.main`, which turns errors into one line) here."""
    from searchgrpo.cli import main

    monkeypatch.setattr(sys, "argv", ["searchgrpo", *args])
    monkeypatch.delenv("SEARCHGRPO_DEBUG", raising=False)
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def assert_one_error_line(out: str, *words: str) -> str:
    """Exactly one `error: ...` line, holding every word, and no traceback anywhere."""
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    for w in words:
        assert w in errors[0], (w, errors[0])
    return errors[0]


# --------------------------------------------------------------------------- data


def tiny_world(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the tiny demo world's (checkpoints folder, corpus file), safe to damage."""
    from searchgrpo.world import build_demo, demo_dir
    from tests.helpers.tiny import tiny_config

    cfg = tiny_config(tmp_path)
    demo = build_demo(demo_dir(cfg), cfg.data.demo, top_k=cfg.env.top_k)
    ckpts, corpus = tmp_path / "world" / "checkpoints", tmp_path / "world" / "corpus.jsonl"
    shutil.copytree(demo.traces, ckpts)
    shutil.copy(demo.corpus, corpus)
    return ckpts, corpus


def assert_checkpoint_loads(info: Any) -> None:
    """Every file of a training checkpoint opens: safetensors, torch (weights only) and JSON."""
    import torch
    from safetensors import safe_open

    for f in (info.path / "adapter" / "adapter_model.safetensors", info.path / "rng.safetensors"):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():  # noqa: SIM118 (safe_open has keys() but is not iterable)
                assert torch.isfinite(st.get_tensor(key).float()).all() or "rng" in f.name, (f, key)
    for f in ("optimizer.pt", "scheduler.pt"):
        torch.load(info.path / f, weights_only=True, map_location="cpu")
    assert json.loads((info.path / "trainer_state.json").read_text())["step"] == info.step
    json.loads((info.path / "adapter" / "adapter_config.json").read_text())


def step_folders(run_dir: Path) -> list[Path]:
    root = run_dir / "checkpoints"
    return sorted(p for p in root.iterdir() if re.fullmatch(r"step-\d+", p.name)) if root.is_dir() else []


# --------------------------------------------------------------------------- the fault server


class FaultServer:
    """An OpenAI-compatible server on 127.0.0.1 that fails on request.

    `mode` (settable at any time): `ok`; `500` (HTTP 500); `slow` (waits `delay` s, then ok);
    `garbage` (200 with a body that is not JSON); `html` (200 with an HTML page, as a proxy or a
    wrong URL gives); `nonsense` (200 with JSON that is no completion); `torn` (200 whose body
    stops halfway: the connection closes early); `401`; `echo400` (a 400 whose body echoes the
    request headers, as some proxies do); `429` and `503` (with `Retry-After: {retry_after}` when
    that is set); `loading` (503 with llama.cpp's "Loading model" error). `fail_next(n, mode)` fails
    the next `n` requests, then returns to `ok`. Every request's path and headers are recorded.
    """

    def __init__(self, label: str = "IMPORTANT", model: str = "fault-model") -> None:
        self.mode = "ok"
        self.models_ok = False
        """True: /models always answers (the health check passes; the faults hit completions)."""
        self.delay = 2.0
        self.retry_after: str | None = None
        """The Retry-After header of `429` and `503` replies (None: none)."""
        self.label = label
        self.model = model
        self.records: list[dict[str, Any]] = []
        self._pending: list[str] = []
        self._lock = threading.Lock()
        self.closed = threading.Event()
        """Set by `close`: a slow reply still waiting ends without a reply."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: bytes, length: int | None = None, content_type: str = "application/json"
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if status in (429, 503) and server.retry_after is not None:
                    self.send_header("Retry-After", server.retry_after)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                listing = self.path.rstrip("/").endswith("/models")
                mode = "ok" if listing and server.models_ok else server._next_mode()
                with server._lock:
                    server.records.append({"path": self.path, "headers": dict(self.headers), "mode": mode})
                if mode == "slow":
                    if server.closed.wait(server.delay):
                        return  # closed meanwhile: hang up, so that no reply outlives its test
                    mode = "ok"
                if mode == "500":
                    return self._send(500, b'{"error": "internal error"}')
                if mode == "401":
                    return self._send(401, b'{"error": "bad key"}')
                if mode == "echo400":
                    echo = f"bad request: Authorization: {self.headers.get('Authorization')}"
                    return self._send(400, json.dumps({"error": echo, "headers": dict(self.headers)}).encode())
                if mode in ("429", "503"):
                    return self._send(int(mode), b'{"error": "busy"}')
                if mode == "loading":
                    return self._send(
                        503, b'{"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}'
                    )
                if mode == "html":
                    page = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>proxy login</body></html>"
                    return self._send(200, page, content_type="text/html; charset=utf-8")
                if mode == "garbage":
                    return self._send(200, b"<html>502 Bad Gateway \xff\xfe</html>")
                if mode == "torn":
                    return self._send(200, b'{"choices": [{"message": {"con', length=400)
                if self.path.rstrip("/").endswith("/models"):
                    return self._send(200, json.dumps({"data": [{"id": server.model}]}).encode())
                if mode == "nonsense":
                    return self._send(200, b'{"id": "x", "object": "chat.completion", "choices": []}')
                reply = {"choices": [{"message": {"role": "assistant", "content": server.label}}]}
                return self._send(200, json.dumps(reply).encode())

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

        self._handler = Handler
        self.port = 0
        self.start()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Listen (again, on the same port after `stop`)."""
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop listening: the server is down (connection refused)."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def _next_mode(self) -> str:
        with self._lock:
            return self._pending.pop(0) if self._pending else self.mode

    def fail_next(self, n: int, mode: str) -> None:
        with self._lock:
            self._pending = [mode] * n

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["path"].endswith("/chat/completions")]

    def close(self) -> None:
        self.closed.set()
        self.stop()

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- a raw socket server


class RawServer:
    """A bare TCP server on 127.0.0.1 whose `reply(conn, request_bytes)` writes whatever it likes:
    a reply trickled a byte at a time, or a body far larger than any cap. It serves one connection
    at a time until closed, counts the bytes it managed to send (`sent`), and stops by itself
    after `lifetime` seconds."""

    def __init__(self, reply, lifetime: float = CEILING_S) -> None:
        import socket

        self.reply = reply
        self.sent = 0
        self.connections = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._stop = threading.Event()
        self._deadline = time.monotonic() + lifetime
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(5)
                try:
                    request = conn.recv(65536)
                    self.reply(self, conn, request)
                except OSError:
                    pass  # the client hung up: what a capped or timed-out client does

    def send(self, conn, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        """Stop, and wait until the connection being served has ended (`sent` is final then)."""
        self._stop.set()
        self._thread.join(timeout=CEILING_S)
        assert not self._thread.is_alive(), f"hang guard: the raw server still serving after {CEILING_S:g} s"
        self._sock.close()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
