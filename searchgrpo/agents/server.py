"""The embedded OpenAI-compatible server of the frozen agents: llama.cpp through `xllamacpp`.

`EmbeddedServer(gguf)` serves a GGUF model on 127.0.0.1 (a free port unless one is given) inside
this process: llama.cpp's own C++ HTTP server, with `parallel` slots and continuous batching,
from the prebuilt CPU wheel on PyPI, so it runs on a laptop and in CI with no download. By default
it serves the SmolLM2 GGUF the policy starts from, so the frozen agents are the base model, as in
the seed. Use it as a context manager; `stop()` frees the port and `start()` can take the same
port again (the tests restart it mid-run).
"""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import Any

from searchgrpo.agents.chat_client import ChatClient
from searchgrpo.errors import UserError

SLOT_CONTEXT = 4096
"""Context tokens per slot: a checker prompt with max_doc_chars of text stays far below it."""


def default_threads() -> int:
    """Every core, at most 8.

    A training step samples, then waits for the checker, then computes the loss, so the server
    and the trainer take turns rather than share the cores. Measured on 2 cores
    (benchmarks/checker_cache.py): 2 threads labelled the same 494 documents in 57% of the time
    1 thread took, and made the whole step 28% shorter.
    """
    return max(1, min(8, os.cpu_count() or 1))


def model_name(gguf: Path) -> str:
    """The served name of a GGUF: its file name without quantisation suffix and extension."""
    return gguf.name.removesuffix(".gguf").split(".")[0]


class EmbeddedServer:
    """llama.cpp serving one GGUF over HTTP in this process (see the module docstring)."""

    def __init__(self, gguf: str | Path, *, host: str = "127.0.0.1", port: int = 0, parallel: int = 4,
                 threads: int = 0, alias: str | None = None, lora: str | Path | None = None,
                 slot_context: int = 0) -> None:
        self.gguf = Path(gguf).expanduser()
        self.host = host
        self.port = port
        self.parallel = parallel
        self.threads = threads or default_threads()
        self.alias = alias or model_name(self.gguf)
        self.lora = Path(lora) if lora else None
        """A GGUF LoRA adapter applied to every request (the server sampler's policy), or None."""
        self.slot_context = slot_context or SLOT_CONTEXT
        self._server: Any = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in /v1."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self, health_timeout_s: float = 60.0) -> "EmbeddedServer":
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
        params.verbosity = 0  # llama.cpp's logs would flood the console
        with self._lock:
            if self._server is not None:
                return self
            try:
                self._server = xllamacpp.Server(params)
            except RuntimeError as exc:
                where = f"{self.host}:{self.port}" if self.port else self.host
                raise UserError(f"embedded checker server did not start on {where} with {self.gguf.name} "
                                f"({exc}); is the port taken or the file not a GGUF model?") from None
            self.port = int(self._server.listening_address.rstrip("/").rsplit(":", 1)[1])
        ChatClient(self.base_url).health(timeout_s=health_timeout_s)
        return self

    def stop(self) -> None:
        """Stop serving and free the port (llama.cpp joins its threads when the server is freed)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            del server
            gc.collect()

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

