"""Commands that check and show before anything runs: `check` (config, data, search, checker,
model and one forward pass), `config` (the resolved config, documented) and `prompt` (the
Executor's prompt for states of the data)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from searchgrpo.commands.options import ConfigOpt, SetOpt, load
from searchgrpo.config import ConfigError, describe
from searchgrpo.errors import UserError, printable


def check(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    no_model: Annotated[bool, typer.Option("--no-model", help="Skip loading the model.")] = False,
) -> None:
    """Validate config, data, search, checker, model and one forward pass (the seed's quick_check)."""
    from searchgrpo.runs import quiet_libraries

    quiet_libraries()
    from rich.console import Console

    from searchgrpo.check import HealthCheck, run_health_checks
    from searchgrpo.terminal import print_health_checks

    try:
        cfg, source = load(config, overrides)
        results = run_health_checks(cfg, source, with_model=not no_model)
    except ConfigError as exc:
        results = [HealthCheck("config", "FAIL", str(exc), "fix the key named in the message")]
    print_health_checks(Console(), results)
    raise typer.Exit(1 if any(r.status == "FAIL" for r in results) else 0)


def show_config(config: ConfigOpt = None, overrides: SetOpt = None) -> None:
    """Print the resolved configuration with each key's documentation."""
    from rich.console import Console

    from searchgrpo.terminal import print_config_table

    cfg, source = load(config, overrides)
    print_config_table(Console(), describe(cfg), source)


def show_prompt(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    state: Annotated[list[str] | None, typer.Option("--state", help="A state id to render (repeatable).")] = None,
    first: Annotated[int, typer.Option(help="Without --state: render the first N states (in id order).")] = 1,
    from_folder: Annotated[
        Path | None,
        typer.Option("--from", help="Use the prompt recorded in this run folder or merged model folder."),
    ] = None,
    tokens: Annotated[
        bool, typer.Option(help="Load the tokenizer: the chat-templated prompt as the model sees it, cut to fit.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per state: its id and messages.")] = False,
    template_source: Annotated[
        bool, typer.Option("--template-source", help="Print the template file itself (to copy and edit).")
    ] = False,
) -> None:
    """Render the Executor's prompt for states of the data (prompt.template), to check it is your
    production prompt."""
    import json

    from searchgrpo.export.prompt_preview import preview, prompt_source
    from searchgrpo.runs import quiet_libraries

    if first < 1:
        raise UserError(f"--first {first} is out of range: expected >= 1")
    quiet_libraries()
    cfg, _ = load(config, overrides)
    if template_source:
        template, _ = prompt_source(cfg, from_folder)
        typer.echo(template.text, nl=False)
        return
    template, shown = preview(cfg, state_ids=state or [], first=first, from_folder=from_folder, tokens=tokens)
    for p in shown:
        if as_json:
            record: dict[str, object] = {
                "state_id": p.state_id,
                "messages": p.messages,
                "prompt_version": template.version,
            }
            if p.chat_text is not None:
                record.update(chat_text=p.chat_text, tokens=p.tokens)
            typer.echo(json.dumps(record, ensure_ascii=False))
            continue
        head = f"=== {p.state_id}   ({template.version}, {template.path}, clues: {template.clue_format})"
        typer.echo(printable(head))
        if p.chat_text is not None:
            typer.echo(printable(f"--- as the model sees it ({p.tokens} tokens)"))
            typer.echo(printable(p.chat_text, keep="\n"))
            continue
        for m in p.messages:
            typer.echo(printable(f"--- {m['role']}"))
            typer.echo(printable(m["content"], keep="\n"))
