"""The chat server the frozen LLM agents talk to, and the LLM checker opened over it.

`open_endpoint` starts the embedded llama.cpp server (`checker.server: embedded`) or checks an
external one's health; `open_llm_checker` opens the `llm` checker with its verdict cache.
`close()` on an owned checker releases both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.agents.chat_client import ChatClient, api_key_from_env
from searchgrpo.agents.llm_checker import LLMChecker
from searchgrpo.agents.server import EmbeddedServer
from searchgrpo.agents.verdict_cache import VerdictCache
from searchgrpo.config import CheckerConfig
from searchgrpo.embedded import embedded_gguf_path
from searchgrpo.errors import UserError


@dataclass
class ChatEndpoint:
    """A chat-completions server the frozen LLM agents can use, ready and health-checked."""

    client: ChatClient
    model: str
    """The served model name sent with each request."""
    structured_output: str
    """`checker.structured_output` with `auto` resolved."""
    cache_model: str
    """How the model is named in the verdict cache."""
    server: EmbeddedServer | None = None
    """The embedded server, when this endpoint started one."""

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def open_endpoint(cc: CheckerConfig, notice: Callable[[str], None] | None = None) -> ChatEndpoint:
    """Start the embedded server (`checker.server: embedded`) or check the external one. The
    server must answer a health check within seconds, else a one-line error names its URL; one
    still loading its model is waited for (`checker.retry_deadline_s`), telling `notice` how long."""
    key = api_key_from_env(cc.api_key_env)  # a key that cannot be sent is refused here, at the start
    server: EmbeddedServer | None = None
    if cc.server == "embedded":
        gguf = Path(cc.gguf).expanduser() if cc.gguf else embedded_gguf_path()
        # With a key set, the embedded server checks it too: no other local user can borrow it.
        server = EmbeddedServer(gguf, parallel=cc.max_concurrency, threads=cc.server_threads, api_key=key).start()
        base_url = server.base_url
        # The file's name and size identify the model in the cache, whatever it is served as.
        cache_model = f"gguf:{gguf.name}:{gguf.stat().st_size}"
    else:
        base_url, cache_model = cc.server, ""
    try:
        client = ChatClient(
            base_url,
            api_key_env=cc.api_key_env,
            api_key=key,
            timeout_s=cc.timeout_s,
            max_retries=cc.max_retries,
            retry_deadline_s=cc.retry_deadline_s,
            max_reply_bytes=cc.max_reply_bytes,
        )
        served = client.health(timeout_s=5.0, progress=notice)
        model = cc.model or (server.alias if server else (served[0] if served else None))
        if model is None:
            raise UserError(f"checker server {base_url} lists no model at /models; set checker.model")
    except BaseException:
        if server is not None:
            server.stop()
        raise
    structured = cc.structured_output
    if structured == "auto":
        structured = "grammar" if server else "json_schema"
    return ChatEndpoint(client, model, structured, cache_model or model, server)


def open_llm_checker(
    cc: CheckerConfig,
    cache_root: Path,
    endpoint: ChatEndpoint | None = None,
    notice: Callable[[str], None] | None = None,
) -> LLMChecker:
    """The `llm` checker over `endpoint` (opened from the config, and then owned, if None; `notice`
    hears of a server still loading); its verdict cache is `checker.cache_path`, else
    `cache_root`/verdicts.sqlite."""
    owned = endpoint is None
    endpoint = endpoint or open_endpoint(cc, notice)
    cache_file = Path(cc.cache_path).expanduser() if cc.cache_path else cache_root / "verdicts.sqlite"
    return LLMChecker(
        endpoint.client,
        endpoint.model,
        structured_output=endpoint.structured_output,
        max_tokens=cc.max_tokens,
        max_doc_chars=cc.max_doc_chars,
        max_concurrency=cc.max_concurrency,
        cache=VerdictCache(cache_file) if cc.cache else None,
        cache_model=endpoint.cache_model,
        on_close=endpoint.close if owned else None,
        max_unparsable_frac=cc.max_unparsable_frac,
        min_calls_for_unparsable=cc.min_calls_for_unparsable,
    )
