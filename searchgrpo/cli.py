"""The `searchgrpo` command line (Typer).

    searchgrpo tui --start                   the training console, training at once
    searchgrpo tui --attach runs/<run_id>    follow a (headless) run from another terminal
    searchgrpo train --headless              train on config.yaml (the embedded demo by default)
    searchgrpo train --headless --debug      a few tiny steps, to see that everything works
    searchgrpo train --headless --resume     continue the newest run from its last checkpoint
    searchgrpo check                         validate config, data, model and one forward pass
    searchgrpo config                        the resolved config, documented
    searchgrpo demo-world --out DIR          write a demo world (corpus, questions, checkpoints)

Every command takes `--config PATH` (default: ./config.yaml if present, else built-in defaults)
and repeatable `--set section.key=value` overrides. Expected errors print one line and exit 2;
set SEARCHGRPO_DEBUG=1 to see tracebacks. Heavy imports (torch, transformers) happen inside
command bodies, so `searchgrpo --help` stays fast.
"""

from __future__ import annotations

import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from searchgrpo.config import Config, ConfigError, describe, load_config
from searchgrpo.errors import UserError

app = typer.Typer(
    name="searchgrpo",
    help="GRPO + LoRA training of a deep-search Executor's search clues.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

ConfigOpt = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="YAML config (default: ./config.yaml if present).")
]
SetOpt = Annotated[
    Optional[list[str]], typer.Option("--set", "-s", help="Override a key: --set grpo.beta=0.0 (repeatable).")
]

DEBUG_OVERRIDES = (
    "train.max_steps=4",
    "train.states_per_step=1",
    "grpo.num_generations=2",
    "grpo.max_new_tokens=24",
    "grpo.max_prompt_tokens=384",
    "data.max_table_rows=4",
    "train.eval_every=2",
    "train.eval_states=2",
    "train.save_every=2",
)
"""`--debug`: the seed's train_debug, a few tiny steps that still touch every stage."""


def resolve_config_path(path: Path | None) -> Path | None:
    if path is not None:
        return path
    default = Path("config.yaml")
    return default if default.is_file() else None


def load(config: Path | None, overrides: list[str] | None, extra: tuple[str, ...] = ()) -> tuple[Config, str]:
    path = resolve_config_path(config)
    cfg = load_config(path, [*extra, *(overrides or [])])
    return cfg, str(path) if path else "built-in defaults"


def quiet_libraries() -> None:
    """Keep library progress bars and deprecation chatter out of the console."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="peft")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


# --------------------------------------------------------------------------- train


def find_run_to_resume(cfg: Config, run_dir: Path | None) -> Path:
    if run_dir is not None:
        if not (run_dir / "config.yaml").is_file():
            raise UserError(f"{run_dir}: not a run folder (no config.yaml)")
        return run_dir
    out = Path(cfg.train.output_dir)
    if cfg.train.run_name:
        named = out / cfg.train.run_name
        if (named / "config.yaml").is_file():
            return named
        raise UserError(f"{named}: no run to resume (train.run_name = {cfg.train.run_name!r})")
    runs = [p for p in out.glob("*") if (p / "config.yaml").is_file()] if out.is_dir() else []
    if not runs:
        raise UserError(f"{out}: no run to resume; start one without --resume")
    return max(runs, key=lambda p: (p / "config.yaml").stat().st_mtime)


@app.command()
def train(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    headless: Annotated[bool, typer.Option(help="Train in this terminal with rich progress (no console UI).")] = False,
    debug: Annotated[bool, typer.Option(help="A few tiny steps (the seed's train_debug).")] = False,
    epochs: Annotated[Optional[int], typer.Option(help="Override train.epochs.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the newest run (or --run-dir) from its last checkpoint.")] = False,
    run_dir: Annotated[Optional[Path], typer.Option(help="The run folder to write or resume.")] = None,
    strict: Annotated[bool, typer.Option(help="Stop at the first malformed data file.")] = False,
) -> None:
    """Train the Executor with GRPO + LoRA."""
    extra = (*(DEBUG_OVERRIDES if debug else ()), *((f"train.epochs={epochs}",) if epochs else ()),
             *(("data.strict=true",) if strict else ()))
    cfg, source = load(config, overrides, extra)
    if resume:
        run_dir = find_run_to_resume(cfg, run_dir)
        cfg = load_config(run_dir / "config.yaml", [*extra, *(overrides or [])])
        source = str(run_dir / "config.yaml")
    if not headless:
        from tui.launch import launch_console  # the core imports the console only here, in cli.py

        raise typer.Exit(launch_console(cfg, source, start=True, run_dir=run_dir, resume=resume))
    raise typer.Exit(run_headless(cfg, run_dir=run_dir, resume=resume))


@app.command()
def tui(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    start: Annotated[bool, typer.Option(help="Start training at once (else press s).")] = False,
    attach: Annotated[Optional[Path], typer.Option(help="Follow a run (its folder or events.jsonl) as it trains, e.g. a headless run.")] = None,
    replay: Annotated[Optional[Path], typer.Option(help="Show a finished run from its folder or events.jsonl.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the newest run (or --run-dir) from its last checkpoint.")] = False,
    run_dir: Annotated[Optional[Path], typer.Option(help="The run folder to write or resume.")] = None,
) -> None:
    """Open the training console: watch and steer training live, eval and merge, attach or replay."""
    if attach and replay:
        raise UserError("--attach and --replay are exclusive")
    if (attach or replay) and (start or resume):
        raise UserError("--start and --resume train; --attach and --replay only watch a run")
    cfg, source = load(config, overrides)
    if resume:
        run_dir = find_run_to_resume(cfg, run_dir)
        cfg = load_config(run_dir / "config.yaml", overrides or [])
        source = str(run_dir / "config.yaml")
    from tui.launch import launch_console  # the core imports the console only here, in cli.py

    raise typer.Exit(launch_console(cfg, source, start=start or resume, run_dir=run_dir, resume=resume,
                                    attach=attach, replay=replay))


def run_headless(cfg: Config, *, run_dir: Path | None = None, resume: bool = False) -> int:
    """Train with rich progress on the terminal and every event in runs/<id>/events.jsonl."""
    quiet_libraries()
    from searchgrpo.sinks import ConsoleSink, JsonlSink, fanout
    from searchgrpo.trainer import Trainer, TrainerControl

    control = TrainerControl()
    console = ConsoleSink()
    trainer = Trainer(cfg, control=control, run_dir=run_dir, resume=resume)
    jsonl = JsonlSink(trainer.run_dir / "events.jsonl")
    trainer.sink = fanout(console, jsonl)

    def on_signal(signum: int, frame: Any) -> None:
        if control.stop.is_set():
            raise KeyboardInterrupt
        control.stop.set()
        console.console.print(
            f"[yellow]{signal.Signals(signum).name}: stopping after this step with a checkpoint "
            "(again to abort)[/]"
        )

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary = trainer.train()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        jsonl.close()
    console.console.print(f"run folder: {summary.run_dir}")
    return 0


# --------------------------------------------------------------------------- other commands


@app.command()
def check(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    no_model: Annotated[bool, typer.Option("--no-model", help="Skip loading the model.")] = False,
) -> None:
    """Validate config, data, search, checker, model and one forward pass (the seed's quick_check)."""
    quiet_libraries()
    from rich.console import Console
    from rich.table import Table

    from searchgrpo.check import CheckResult, run_checks

    try:
        cfg, source = load(config, overrides)
        results = run_checks(cfg, source, with_model=not no_model)
    except ConfigError as exc:
        results = [CheckResult("config", "FAIL", str(exc), "fix the key named in the message")]
    table = Table(title="searchgrpo check")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    colours = {"PASS": "green", "FAIL": "red", "SKIP": "yellow"}
    for r in results:
        table.add_row(r.name, f"[{colours[r.status]}]{r.status}[/]", r.detail, r.fix)
    Console().print(table)
    raise typer.Exit(1 if any(r.status == "FAIL" for r in results) else 0)


@app.command("config")
def show_config(config: ConfigOpt = None, overrides: SetOpt = None) -> None:
    """Print the resolved configuration with each key's documentation."""
    from rich.console import Console
    from rich.table import Table

    cfg, source = load(config, overrides)
    table = Table(title=f"config: {source}")
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("meaning", overflow="fold")
    for key, value, doc in describe(cfg):
        table.add_row(key, repr(value), doc)
    Console().print(table)


@app.command("demo-world")
def demo_world(
    out: Annotated[Path, typer.Option(help="Folder to write corpus.jsonl, questions.jsonl and checkpoints/.")],
    questions: Annotated[int, typer.Option(help="Multi-hop questions.")] = 160,
    distractors: Annotated[int, typer.Option(help="Extra documents.")] = 400,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
    top_k: Annotated[int, typer.Option(help="Documents per clue in the baseline pass.")] = 5,
) -> None:
    """Generate a demo world of any size (also a scale corpus for benchmarks)."""
    from rich.progress import Progress

    from searchgrpo.config import DemoConfig
    from searchgrpo.data import build_demo

    if questions < 1 or distractors < 0:
        raise UserError("--questions must be >= 1 and --distractors >= 0")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: folder exists and is not empty")
    with Progress() as progress:
        task = progress.add_task("baseline multi-agent pass", total=questions)
        paths = build_demo(out, DemoConfig(questions, seed, distractors), top_k=top_k,
                           progress=lambda n, total: progress.update(task, completed=n))
    typer.echo(f"corpus: {paths.corpus}\nquestions: {paths.questions}\ncheckpoints: {paths.checkpoints}")


def main() -> None:
    """Entry point: run the app, turning expected errors into one line."""
    try:
        app()
    except UserError as exc:
        if os.environ.get("SEARCHGRPO_DEBUG"):
            raise
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.secho("aborted", fg=typer.colors.RED, err=True)
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("SEARCHGRPO_DEBUG"):
            raise
        typer.secho(f"error: {type(exc).__name__}: {exc} (set SEARCHGRPO_DEBUG=1 for the traceback)",
                    fg=typer.colors.RED, err=True)
        sys.exit(1)
