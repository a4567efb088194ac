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
transformers) happen inside command bodies, so `searchgrpo --help` stays fast.

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

from searchgrpo.config import Config, ConfigError, describe, load_config
from searchgrpo.errors import MAX_ERROR_CHARS, UserError, debug_enabled, one_line, printable

app = typer.Typer(
    name="searchgrpo",
    help="GRPO + LoRA training of a deep-search Executor's search clues.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config (default: ./config.yaml if present).")
]
MAX_PROCESSES = 1024
"""Most data-parallel processes one `train --num-processes` launches (one per GPU of this machine)."""
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="Override a key: --set grpo.beta=0.0 (repeatable).")
]


def resolve_config_path(path: Path | None) -> Path | None:
    if path is not None:
        return path
    default = Path("config.yaml")
    return default if default.is_file() else None


def load(config: Path | None, overrides: list[str] | None, extra: tuple[str, ...] = ()) -> tuple[Config, str]:
    path = resolve_config_path(config)
    cfg = load_config(path, [*extra, *(overrides or [])])
    return cfg, str(path) if path else "built-in defaults"


def load_run(
    config: Path | None, overrides: list[str] | None, extra: tuple[str, ...], resume: bool, run_dir: Path | None
) -> tuple[Config, str, Path | None]:
    """(config, its source, run folder): with `resume`, the run's own config.yaml plus the overrides."""
    cfg, source = load(config, overrides, extra)
    if not resume:
        return cfg, source, run_dir
    from searchgrpo.runs import find_run_to_resume

    run_dir = find_run_to_resume(cfg, run_dir)
    return load_config(run_dir / "config.yaml", [*extra, *(overrides or [])]), str(run_dir / "config.yaml"), run_dir


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


@app.command()
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


@app.command("config")
def show_config(config: ConfigOpt = None, overrides: SetOpt = None) -> None:
    """Print the resolved configuration with each key's documentation."""
    from rich.console import Console

    from searchgrpo.terminal import print_config_table

    cfg, source = load(config, overrides)
    print_config_table(Console(), describe(cfg), source)


@app.command("prompt")
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
            record = {"state_id": p.state_id, "messages": p.messages, "prompt_version": template.version}
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


@app.command("demo-world")
def demo_world(
    out: Annotated[Path, typer.Option(help="Folder to write corpus.jsonl, questions.jsonl and traces/.")],
    questions: Annotated[int, typer.Option(help="Multi-hop questions.")] = 160,
    distractors: Annotated[int, typer.Option(help="Extra documents.")] = 400,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 0,
    top_k: Annotated[int, typer.Option(help="Documents per clue in the baseline pass.")] = 5,
) -> None:
    """Generate a demo world of any size (also a scale corpus for benchmarks)."""
    from searchgrpo.runs import demo_world as write_demo_world

    paths = write_demo_world(out, questions=questions, distractors=distractors, seed=seed, top_k=top_k)
    typer.echo(
        printable(f"corpus: {paths.corpus}")
        + "\n"
        + printable(f"questions: {paths.questions}")
        + "\n"
        + printable(f"traces: {paths.traces}")
    )


@app.command("eval")
def evaluate(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    baseline: Annotated[bool, typer.Option("--baseline", help="Score the base model without adapter.")] = False,
    checkpoint: Annotated[
        list[Path] | None, typer.Option("--checkpoint", help="A checkpoint folder (repeatable).")
    ] = None,
    samples: Annotated[int, typer.Option(help="1: greedy clues; more: samples per state at --temperature.")] = 1,
    temperature: Annotated[float, typer.Option(help="Sampling temperature when --samples > 1.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seeds sampling and the bootstrap.")] = 0,
    questions: Annotated[Path | None, typer.Option(help="Evaluate on this question set (normalised JSONL).")] = None,
    traces: Annotated[
        Path | None,
        typer.Option(
            "--traces", "--checkpoints-dir", help="Evaluate every state of this folder of multi-agent traces."
        ),
    ] = None,
    corpus: Annotated[Path | None, typer.Option(help="The corpus for --traces.")] = None,
    limit: Annotated[int | None, typer.Option(help="Score at most this many states (--episodes: questions).")] = None,
    output: Annotated[Path | None, typer.Option(help="The JSON report (default runs/evals/eval-<time>.json).")] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Replace an existing file at --output that is not an eval report.")
    ] = False,
    allow_overlap: Annotated[
        bool,
        typer.Option(help="Score a checkpoint even on questions its run trained on (recorded in the report)."),
    ] = False,
    strict: Annotated[bool, typer.Option(help="Stop at the first malformed data file or line.")] = False,
    episodes: Annotated[
        bool, typer.Option("--episodes", help="Play whole multi-agent episodes per question instead of single rounds.")
    ] = False,
    max_rounds: Annotated[
        int | None, typer.Option(help="--episodes: rounds per episode (default eval.episode_rounds).")
    ] = None,
    doc_budget: Annotated[
        int | None,
        typer.Option(
            help="--episodes: documents per SEARCH round sent to the checker (default eval.episode_doc_budget: all)."
        ),
    ] = None,
) -> None:
    """Compare fine-tuned checkpoints with the baseline on held-out states (or, with --episodes,
    whole multi-agent episodes of held-out questions); write a JSON report."""
    from rich.console import Console

    from searchgrpo import runs
    from searchgrpo.evaluate.inputs import EvalRequest, cancelled_note
    from searchgrpo.evaluate.report import eval_tables
    from searchgrpo.terminal import eval_progress, plain

    request = EvalRequest(
        baseline=baseline,
        checkpoints=[str(c) for c in checkpoint or []],
        output=str(output) if output else None,
        overwrite=overwrite,
        allow_overlap=allow_overlap,
        num_samples=samples,
        temperature=temperature,
        seed=seed,
        questions=str(questions) if questions else None,
        traces=str(traces) if traces else None,
        corpus=str(corpus) if corpus else None,
        limit=limit,
        episodes=episodes,
        max_rounds=max_rounds,
        doc_budget=doc_budget,
    ).validated()
    cfg, _ = load(config, overrides, ("data.strict=true",) if strict else ())
    console = Console()
    unit = "questions (whole episodes)" if episodes else "states"
    with eval_progress(Console(stderr=True), unit, "" if limit else "--limit N scores fewer") as sink:
        try:
            path = runs.evaluate(cfg, request, sink)
        except KeyboardInterrupt:
            done = sink.progress  # type: ignore[attr-defined]
            interrupted(cancelled_note(done.done, done.total or 0, unit.split()[0]))
    for table in eval_tables(path):
        console.print(table)
    console.print(plain(f"report: {path}"), highlight=False)


@app.command("audit-checker")
def audit_checker(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    questions: Annotated[
        Path | None, typer.Option(help="A question set with gold evidence (the JSONL collect --questions reads).")
    ] = None,
    traces: Annotated[
        Path | None, typer.Option(help="Or traces whose runs' meta.json list gold_docids (with --corpus).")
    ] = None,
    corpus: Annotated[Path | None, typer.Option(help="The corpus for --traces.")] = None,
    pairs: Annotated[int, typer.Option(help="(state, document) pairs to label.")] = 500,
    seed: Annotated[int, typer.Option(help="Seeds the sample and the bootstrap.")] = 0,
    output: Annotated[
        Path | None, typer.Option(help="The JSON report (default runs/audits/audit-<time>.json; the PNG beside it).")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing --output that is not an audit report.")] = False,
    plot: Annotated[bool, typer.Option(help="Write the PNG beside the report (needs matplotlib).")] = True,
) -> None:
    """Audit the configured checker (checker.backend) against gold labels: agreement, kappa, precision
    and recall with CIs, calibration, speed and bias probes; write a JSON report and a PNG."""
    from rich.console import Console

    from searchgrpo import runs
    from searchgrpo.evaluate.audit_report import audit_tables, load_audit_report
    from searchgrpo.evaluate.checker_audit import AuditRequest
    from searchgrpo.terminal import audit_progress, plain

    request = AuditRequest(
        questions=str(questions) if questions else None,
        traces=str(traces) if traces else None,
        corpus=str(corpus) if corpus else None,
        pairs=pairs,
        seed=seed,
        output=str(output) if output else None,
        overwrite=overwrite,
        plot=plot,
    ).checked()
    cfg, _ = load(config, overrides)
    console = Console()
    with audit_progress(Console(stderr=True)) as sink:
        try:
            path = runs.audit_checker(cfg, request, sink)
        except KeyboardInterrupt:
            done = sink.progress  # type: ignore[attr-defined]
            interrupted(f"audit interrupted after {done.done} of {done.total or 0} verdicts: no report written")
    for table in audit_tables(load_audit_report(path)):
        console.print(table)
    console.print(plain(f"report: {path}" + (f", plot: {path.with_suffix('.png')}" if plot else "")), highlight=False)


@app.command()
def merge(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    checkpoint: Annotated[
        list[Path] | None, typer.Option("--checkpoint", help="A checkpoint to merge (repeatable).")
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option(help="Merge every checkpoint of this run (default: the newest run).")
    ] = None,
    output_dir: Annotated[Path, typer.Option(help="Where {base}-grpo-step{N}/ folders go.")] = Path("merged"),
    overwrite: Annotated[bool, typer.Option(help="Replace existing output folders.")] = False,
    device: Annotated[str, typer.Option(help="Merge on cpu (default, avoids GPU OOM) or cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option(help="Output dtype: bfloat16, float16 or float32.")] = "bfloat16",
) -> None:
    """Merge LoRA checkpoints into full models that transformers and vLLM load, with a parity check."""
    from rich.console import Console

    from searchgrpo import runs
    from searchgrpo.events import MergeFinished
    from searchgrpo.export.merge import MergeRequest, MergesRefused
    from searchgrpo.terminal import merge_progress, print_merge_summary

    cfg, _ = load(config, overrides)
    request = MergeRequest(
        checkpoints=[str(c) for c in checkpoint or []],
        output_dir=str(output_dir),
        overwrite=overwrite,
        run_dir=str(run_dir) if run_dir else None,
        device=device,
        dtype=dtype,
    )
    console = Console()
    finished: list[MergeFinished] = []
    with merge_progress(Console(stderr=True), finished) as sink:
        try:
            runs.merge(cfg, request, sink)
        except MergesRefused as exc:
            print_merge_summary(console, finished)
            typer.secho(
                f"error: {len(exc.refused)} of {len(exc.refused) + len(exc.outputs)} merges refused "
                f"({len(exc.outputs)} written); each reason and its remedy is above",
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            kept = ", ".join(Path(c).name for c in sink.kept)  # type: ignore[attr-defined]
            interrupted(
                f"merge interrupted: the merges of {kept} are complete and kept; the one in progress left nothing"
                if kept
                else "merge interrupted: nothing was written (a folder is written only once its merge passes)"
            )
    print_merge_summary(console, finished)


@app.command()
def collect(
    out: Annotated[Path, typer.Option(help="Folder for corpus.jsonl and traces/ (resumes if it exists).")],
    questions: Annotated[str, typer.Option(help="Question set in the normalised JSONL schema, or `demo`.")] = "demo",
    limit: Annotated[int | None, typer.Option(help="Play only the first N questions.")] = None,
    max_rounds: Annotated[int, typer.Option(help="Rounds per question, at most.")] = 6,
    seed: Annotated[int, typer.Option(help="Seed of the rule-based Executor.")] = 0,
    checker: Annotated[str | None, typer.Option(help="gold, llm or base (default: checker.backend).")] = None,
    planner: Annotated[str, typer.Option(help="rule or llm.")] = "rule",
    executor: Annotated[str, typer.Option(help="rule or policy (the base model.base, greedy).")] = "rule",
    entity_manager: Annotated[str, typer.Option(help="rule or llm.")] = "rule",
    strict: Annotated[bool, typer.Option(help="Stop at the first malformed line of the question set.")] = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Turn a question set into multi-agent traces with a baseline pass (the training data)."""
    from searchgrpo import runs
    from searchgrpo.config import EvalConfig, check_option

    if limit is not None and limit < 1:
        raise UserError(f"--limit {limit} is out of range: expected >= 1 (or leave it out)")
    check_option("--max-rounds", EvalConfig, "episode_rounds", max_rounds)
    cfg, _ = load(
        config,
        overrides,
        (*((f"checker.backend={checker}",) if checker else ()), *(("data.strict=true",) if strict else ())),
    )
    try:
        result = runs.collect(
            cfg,
            questions,
            out,
            limit=limit,
            max_rounds=max_rounds,
            seed=seed,
            planner=planner,
            executor=executor,
            entity_manager=entity_manager,
        )
    except KeyboardInterrupt:
        interrupted(
            f"collect interrupted: every question finished so far is written in {printable(out)}; "
            "the same command continues where it stopped"
        )
    warnings, lines = result.summary_lines()
    for line in warnings:
        typer.echo(f"warning: {printable(line)}", err=True)
    for line in lines:
        typer.echo(printable(line))


@app.command("import-traces")
def import_traces(
    logs: Annotated[list[Path], typer.Argument(help="JSONL agent logs, one event per line (docs/traces.md).")],
    out: Annotated[
        Path, typer.Option(help="The traces folder to write (new or empty; an earlier import with --overwrite).")
    ],
    overwrite: Annotated[bool, typer.Option(help="Replace a traces folder an earlier import-traces wrote.")] = False,
    strict: Annotated[bool, typer.Option(help="Stop at the first line or event that cannot be used.")] = False,
) -> None:
    """Turn your multi-agent system's own JSONL logs (one agent event a line) into traces for data.traces."""
    from searchgrpo.data.agent_log import import_agent_logs

    result = import_agent_logs(logs, out, overwrite=overwrite, strict=strict)
    *issues, last = result.summary_lines()
    for line in issues:
        typer.echo(f"warning: {printable(line)}", err=True)
    typer.echo(printable(last))
    typer.echo(printable(f"train on it: --set data.traces={result.out} --set data.corpus=YOUR_CORPUS.jsonl"))


@app.command()
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
    OpenAI-compatible API with llama.cpp, until Ctrl-C."""
    from searchgrpo.agents.server import serve_until_interrupted

    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is out of range: expected 0 to 65535 (0: any free port)")
    cfg, _ = load(config, overrides)

    def say(text: str, warning: bool = False) -> None:
        typer.secho(printable(text), fg=typer.colors.YELLOW if warning else None, err=warning)

    serve_until_interrupted(cfg, host=host, port=port, api_key_env=api_key_env, insecure=insecure, say=say)


def interrupted(note: str) -> None:
    """After Ctrl-C: say what was kept, then end as an abort does (exit 130, `main`)."""
    typer.secho(printable(note), fg=typer.colors.YELLOW, err=True)
    raise KeyboardInterrupt


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
