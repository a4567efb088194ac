"""The `searchgrpo` command line (Typer).

    searchgrpo tui --start                   the training console, training at once
    searchgrpo tui --attach runs/<run_id>    follow a (headless) run from another terminal
    searchgrpo train --headless              train on config.yaml (the embedded demo by default)
    searchgrpo train --headless --debug      a few tiny steps, to see that everything works
    searchgrpo train --headless --resume     continue the newest run from its last checkpoint
    searchgrpo check                         validate config, data, model and one forward pass
    searchgrpo config                        the resolved config, documented
    searchgrpo prompt --first 3              the Executor's prompt for states of the data
    searchgrpo demo-world --out DIR          write a demo world (corpus, questions, traces)
    searchgrpo collect --questions FILE --out DIR   traces + corpus from a question set
    searchgrpo import-traces LOG.jsonl --out DIR    traces from your multi-agent system's own logs
    searchgrpo audit-checker --questions FILE    the configured checker against gold labels
    searchgrpo serve                         the frozen agents' OpenAI-compatible server (llama.cpp)

Every command takes `--config PATH` (default: ./config.yaml if present, else built-in defaults)
and repeatable `--set section.key=value` overrides. Expected errors print one line and exit 2;
set SEARCHGRPO_DEBUG=1 to see tracebacks (0, false, no and off mean off). Heavy imports (torch,
transformers) happen inside command bodies, so `searchgrpo --help` stays fast. `train` and `tui`
(the two that open the console) are defined here; the other commands in `searchgrpo.commands`.

Text that comes from data, a server or a file name (questions, titles, paths, details) is printed
as plain text: never read as rich markup (`Text`, `markup=False`), with control characters shown
as escapes (`errors.printable`), and with any registered secret blanked out (`redact.scrub`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from searchgrpo.commands.checking import check, show_config, show_prompt
from searchgrpo.commands.data import collect, demo_world, import_traces
from searchgrpo.commands.options import ConfigOpt, SetOpt, load_run
from searchgrpo.commands.results import audit_checker, evaluate, merge
from searchgrpo.commands.serving import serve
from searchgrpo.errors import MAX_ERROR_CHARS, UserError, debug_enabled, one_line

app = typer.Typer(
    name="searchgrpo",
    help="GRPO + LoRA training of a deep-search Executor's search clues.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

MAX_PROCESSES = 1024
"""Most data-parallel processes one `train --num-processes` launches (one per GPU of this machine)."""

# --------------------------------------------------------------------------- train


@app.command()
def train(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    headless: Annotated[bool, typer.Option(help="Train in this terminal with rich progress (no console UI).")] = False,
    debug: Annotated[bool, typer.Option(help="A few tiny steps (the seed's train_debug).")] = False,
    epochs: Annotated[int | None, typer.Option(help="Override train.epochs.")] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the newest run (or --run-dir) from its last checkpoint.")
    ] = False,
    run_dir: Annotated[Path | None, typer.Option(help="The run folder to write or resume.")] = None,
    strict: Annotated[bool, typer.Option(help="Stop at the first malformed data file.")] = False,
    num_processes: Annotated[
        int, typer.Option(help="Data-parallel processes (one per GPU), launched with torchrun.")
    ] = 1,
    allow_changes: Annotated[
        bool,
        typer.Option(
            help="With --resume: go on even though the config or the data "
            "changed in ways that alter the optimisation (recorded)."
        ),
    ] = False,
) -> None:
    """Train the Executor with GRPO + LoRA."""
    from searchgrpo.config import TrainConfig, check_option

    if epochs is not None:
        check_option("--epochs", TrainConfig, "epochs", epochs)
    if not 1 <= num_processes <= MAX_PROCESSES:
        raise UserError(f"--num-processes {num_processes} is out of range: expected >= 1 and <= {MAX_PROCESSES}")
    if num_processes > 1 and "WORLD_SIZE" not in os.environ:
        from searchgrpo.runs import launch_data_parallel

        raise typer.Exit(launch_data_parallel(sys.argv[1:], num_processes))
    from searchgrpo.runs import DEBUG_OVERRIDES

    extra = (
        *(DEBUG_OVERRIDES if debug else ()),
        *((f"train.epochs={epochs}",) if epochs is not None else ()),
        *(("data.strict=true",) if strict else ()),
    )
    cfg, source, run_dir = load_run(config, overrides, extra, resume, run_dir)
    if allow_changes and not (resume and headless):
        raise UserError("--allow-changes goes with --resume --headless (the console resumes only unchanged runs)")
    if not headless:
        from tui.launch import launch_console  # the core imports the console only here, in cli.py

        raise typer.Exit(launch_console(cfg, source, start=True, run_dir=run_dir, resume=resume))
    from searchgrpo.runs import train_headless

    raise typer.Exit(train_headless(cfg, run_dir=run_dir, resume=resume, allow_changes=allow_changes))


@app.command()
def tui(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    start: Annotated[bool, typer.Option(help="Start training at once (else press s).")] = False,
    attach: Annotated[
        Path | None,
        typer.Option(help="Follow a run (its folder or events.jsonl) as it trains, e.g. a headless run."),
    ] = None,
    replay: Annotated[
        list[Path] | None,
        typer.Option(help="Show a finished run from its folder or events.jsonl; repeat to compare runs."),
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the newest run (or --run-dir) from its last checkpoint.")
    ] = False,
    run_dir: Annotated[Path | None, typer.Option(help="The run folder to write or resume.")] = None,
) -> None:
    """Open the training console: watch and steer training live, eval and merge, attach or replay."""
    if attach and replay:
        raise UserError("--attach and --replay are exclusive")
    if (attach or replay) and (start or resume):
        raise UserError("--start and --resume train; --attach and --replay only watch a run")
    cfg, source, run_dir = load_run(config, overrides, (), resume, run_dir)
    from tui.launch import launch_console  # the core imports the console only here, in cli.py

    raise typer.Exit(
        launch_console(cfg, source, start=start or resume, run_dir=run_dir, resume=resume, attach=attach, replay=replay)
    )


# --------------------------------------------------------------------------- other commands
# In `--help`'s order; each group's module says what its commands do.

app.command()(check)
app.command("config")(show_config)
app.command("prompt")(show_prompt)
app.command("demo-world")(demo_world)
app.command("eval")(evaluate)
app.command("audit-checker")(audit_checker)
app.command()(merge)
app.command()(collect)
app.command("import-traces")(import_traces)
app.command()(serve)


def main() -> None:
    """Entry point: run the app, turning expected errors into one line (secrets blanked out)."""
    from searchgrpo.redact import scrub

    try:
        app()
    except UserError as exc:
        if debug_enabled():
            raise
        typer.secho(f"error: {scrub(one_line(scrub(str(exc)), MAX_ERROR_CHARS))}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("aborted", fg=typer.colors.RED, err=True)
        sys.exit(130)
    except Exception as exc:
        if debug_enabled():
            raise
        typer.secho(
            f"error: {type(exc).__name__}: {scrub(one_line(scrub(str(exc)), 500))} "
            "(set SEARCHGRPO_DEBUG=1 for the traceback)",
            fg=typer.colors.RED,
            err=True,
        )
        sys.exit(1)
