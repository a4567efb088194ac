"""The embedded OpenAI-compatible server of the frozen agents: llama.cpp through `xllamacpp`.

`EmbeddedServer(gguf)` serves a GGUF model on 127.0.0.1 (a free port unless one is given) inside
this process: llama.cpp's own C++ HTTP server, with `parallel` slots and continuous batching,
from the prebuilt CPU wheel on PyPI, so it runs on a laptop and in CI with no download. By default
it serves the SmolLM2 GGUF the policy starts from, so the frozen agents are the base model, as in
the seed. Use it as a context manager; `stop()` frees the port and `start()` can take the same
port again (the tests restart it mid-run).

`start()` returns only once llama.cpp's task loop is running (a request that passes through it,
GET /slots, has been answered), not merely once the HTTP side answers /v1/models: xllamacpp starts
that loop on its own thread after the constructor returns, and the loop marks itself running when
it starts, so a stop that came before (a Ctrl-C a moment after `searchgrpo serve` said it was
serving, on a loaded machine) was forgotten and the loop, and the stop joining it, never ended.

Given an `api_key`, llama.cpp answers only requests that send it as a Bearer token (401
otherwise). `searchgrpo serve` refuses an address other than loopback without one unless told
`--insecure` (`is_loopback`); the port must be 0 to 65535, 0 meaning any free port.
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import ipaddress
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from searchgrpo.agents.chat_client import ChatClient, api_key_from_env
from searchgrpo.errors import UserError
from searchgrpo.http_exchange import StatusError, exchange, json_headers

SLOT_CONTEXT = 4096
"""Context tokens per slot: a checker prompt with max_doc_chars of text stays far below it."""

SERVER_POLL = 0
"""llama.cpp's busy-wait level (0-100; its own default is 50): how long its threads spin for more
work before they sleep. Spinning gains nothing measurable on a quiet machine and, beside busy
neighbours (a trainer, other jobs on a shared box), burns the cores they need: labelling the same
documents on 2 cores beside two CPU-bound processes took half the wall and CPU time at 0 (medians
of three runs; quiet, 0.98x; `python benchmarks/server_poll.py`, docs/performance.md)."""


def default_threads() -> int:
    """Every core, at most 8.

    A training step samples, then waits for the checker, then computes the loss, so the server
    and the trainer take turns rather than share the cores. Measured on 2 cores
    (benchmarks/checker_cache.py): 2 threads labelled the same 494 documents in 57% of the time
    1 thread took, and made the whole step 28% shorter.
    """
    return max(1, min(8, os.cpu_count() or 1))


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (127.0.0.0/8, ::1): only this machine
    can reach a server there. An address that does not resolve counts as exposed."""
    try:
        infos = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in infos}  # IP families: the host is a str
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def check_port(port: int) -> int:
    if not 0 <= port <= 65535:
        raise UserError(f"port {port} is out of range: expected 0 to 65535 (0: any free port)")
    return port


def model_name(gguf: Path) -> str:
    """The served name of a GGUF: its file name without quantisation suffix and extension."""
    return gguf.name.removesuffix(".gguf").split(".")[0]


class EmbeddedServer:
    """llama.cpp serving one GGUF over HTTP in this process (see the module docstring)."""

    def __init__(
        self,
        gguf: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        parallel: int = 4,
        threads: int = 0,
        alias: str | None = None,
        api_key: str | None = None,
        lora: str | Path | None = None,
        slot_context: int = 0,
        poll: int = SERVER_POLL,
    ) -> None:
        self.gguf = Path(gguf).expanduser()
        self.host = host
        self.port = check_port(port)
        self.api_key = api_key or None
        """Requests must send it as a Bearer token (never shown; None: no key is checked)."""
        self.parallel = parallel
        self.threads = threads or default_threads()
        self.alias = alias or model_name(self.gguf)
        self.lora = Path(lora) if lora else None
        """A GGUF LoRA adapter applied to every request (the server sampler's policy), or None."""
        self.slot_context = slot_context or SLOT_CONTEXT
        self.poll = poll
        self._server: Any = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in /v1."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self, health_timeout_s: float = 60.0) -> EmbeddedServer:
        """Load the model, listen, and wait until /v1/models answers."""
        if not self.gguf.is_file():
            raise UserError(f"checker.gguf: {self.gguf} not found")
        try:
            import xllamacpp
        except ImportError:
            raise UserError("the embedded checker server needs xllamacpp: pip install xllamacpp") from None
        params = xllamacpp.CommonParams()
        params.model.path = str(self.gguf)
        params.model_alias = {self.alias}
        params.hostnames = [self.host]
        params.port = self.port
        params.n_parallel = self.parallel
        params.n_ctx = self.slot_context * self.parallel
        if self.lora is not None:
            params.lora_adapters = [xllamacpp.CommonAdapterLoraInfo(str(self.lora), 1.0)]
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.cpuparams.poll = params.cpuparams_batch.poll = self.poll
        params.verbosity = 0  # llama.cpp's logs would flood the console
        if self.api_key:
            params.api_keys = [self.api_key]
        with self._lock:
            if self._server is not None:
                return self
            try:
                self._server = xllamacpp.Server(params)
            except RuntimeError as exc:
                where = f"{self.host}:{self.port}" if self.port else self.host
                raise UserError(
                    f"embedded checker server did not start on {where} with {self.gguf.name} "
                    f"({exc}); is the port taken or the file not a GGUF model?"
                ) from None
            self.port = int(self._server.listening_address.rstrip("/").rsplit(":", 1)[1])
        ChatClient(self.base_url, api_key=self.api_key or "").health(timeout_s=health_timeout_s)
        self._wait_for_task_loop(health_timeout_s)
        return self

    def _wait_for_task_loop(self, timeout_s: float) -> None:
        """Return once llama.cpp's task loop answers (GET /slots is a task it serves), so a `stop()`
        from now on reaches a running loop (see the module docstring: one sent earlier is lost)."""
        url = f"http://{self.host}:{self.port}/slots"
        try:
            exchange("GET", url, body=None, headers=json_headers(self.api_key), timeout_s=timeout_s, max_bytes=1 << 20)
        except (OSError, http.client.HTTPException, StatusError) as exc:
            raise UserError(f"embedded checker server {url} did not answer from its task loop ({exc})") from None

    def stop(self) -> None:
        """Stop serving and free the port (llama.cpp joins its threads when the server is freed)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            del server
            gc.collect()

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_until_interrupted(
    cfg: Any, *, host: str, port: int, api_key_env: str | None, insecure: bool, say: Callable[..., None]
) -> None:
    """`searchgrpo serve`: checker.gguf on host:port until Ctrl-C or SIGTERM. The key in `$api_key_env` (else
    $checker.api_key_env, when set) is required of every request; an address other than loopback
    needs `api_key_env` given explicitly, or `insecure` (then a warning is said)."""
    import time

    from searchgrpo.embedded import embedded_gguf_path

    cc = cfg.checker
    key = api_key_from_env(api_key_env or cc.api_key_env)
    if api_key_env and not key:
        raise UserError(f"--api-key-env {api_key_env}: ${api_key_env} is not set; export the key clients must send")
    if not is_loopback(host):
        if not (api_key_env or insecure):
            raise UserError(
                f"--host {host} can be reached from other machines: give --api-key-env VAR (a variable "
                "holding the key clients must send), or --insecure to serve without one"
            )
        if not key:
            say(
                f"warning: serving on {host} without an API key (--insecure): anyone who can reach it can use "
                "the model",
                warning=True,
            )
    gguf = Path(cc.gguf).expanduser() if cc.gguf else embedded_gguf_path()
    server = EmbeddedServer(
        gguf, host=host, port=port, parallel=cc.max_concurrency, threads=cc.server_threads, api_key=key
    )
    with server, _stopped_by_signals():
        try:
            say(
                f"serving {server.alias} at {server.base_url} ({server.parallel} slots, {server.threads} threads"
                f"{', API key required' if key else ''})"
            )
            say(f"use it with:  --set checker.backend=llm --set checker.server={server.base_url}", warning=False)
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            say("stopping")


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt here, whatever this process inherited.

    A process started from a background job of a shell (`nohup searchgrpo serve &`, a script's `&`,
    a test run that was itself started so) inherits SIGINT *ignored*, and Python then installs no
    handler of its own: a Ctrl-C or `kill -INT` did nothing and `serve` ran for ever. `serve` runs
    until it is told to stop, so it takes both signals itself while it serves (the handlers it
    found are put back after)."""
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, signal.default_int_handler) for s in stops}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
