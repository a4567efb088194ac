"""`serve`: the frozen agents' model over an OpenAI-compatible API (llama.cpp), until Ctrl-C or SIGTERM."""

from __future__ import annotations

from typing import Annotated

import typer

from searchgrpo.commands.options import ConfigOpt, SetOpt, load
from searchgrpo.errors import UserError, printable


def serve(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port, 0 to 65535 (0: any free port).")] = 8765,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Require the API key held in this environment variable "
            "(default: checker.api_key_env, when set). Needed on an "
            "address other than loopback."
        ),
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Listen on an address other than loopback without an "
            "API key: anyone who reaches it may use the model.",
        ),
    ] = False,
) -> None:
    """Serve the frozen agents' model (checker.gguf, default the embedded SmolLM2) over an
    OpenAI-compatible API with llama.cpp, until Ctrl-C (or SIGTERM)."""
    from searchgrpo.agents.server import serve_until_interrupted

    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is out of range: expected 0 to 65535 (0: any free port)")
    cfg, _ = load(config, overrides)

    def say(text: str, warning: bool = False) -> None:
        typer.secho(printable(text), fg=typer.colors.YELLOW if warning else None, err=warning)

    serve_until_interrupted(cfg, host=host, port=port, api_key_env=api_key_env, insecure=insecure, say=say)
