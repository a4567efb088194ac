"""Commands that make training data: `demo-world` (a generated world), `collect` (traces and a
corpus from a question set, with a baseline pass) and `import-traces` (traces from your
multi-agent system's own logs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from searchgrpo.commands.options import ConfigOpt, SetOpt, interrupted, load
from searchgrpo.errors import UserError, printable


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
