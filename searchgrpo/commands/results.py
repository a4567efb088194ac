"""Commands on what training made: `eval` (checkpoints against the baseline on held-out states or
episodes), `audit-checker` (the configured checker against gold labels) and `merge` (LoRA
checkpoints into full models, with a parity check)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from searchgrpo.commands.options import ConfigOpt, SetOpt, interrupted, load


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
    # Whole episodes advance in lockstep, a round of every question at a time (episode_eval.rounds_played).
    unit = "question-rounds (whole episodes)" if episodes else "states"
    with eval_progress(Console(stderr=True), unit, "" if limit else "--limit N scores fewer") as sink:
        try:
            path = runs.evaluate(cfg, request, sink)
        except KeyboardInterrupt:
            done = sink.progress
            interrupted(cancelled_note(done.done, done.total or 0, unit.split()[0]))
    for table in eval_tables(path):
        console.print(table)
    console.print(plain(f"report: {path}"), highlight=False)


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
            done = sink.progress
            interrupted(f"audit interrupted after {done.done} of {done.total or 0} verdicts: no report written")
    for table in audit_tables(load_audit_report(path)):
        console.print(table)
    console.print(plain(f"report: {path}" + (f", plot: {path.with_suffix('.png')}" if plot else "")), highlight=False)


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
            kept = ", ".join(Path(c).name for c in sink.kept)
            interrupted(
                f"merge interrupted: the merges of {kept} are complete and kept; the one in progress left nothing"
                if kept
                else "merge interrupted: nothing was written (a folder is written only once its merge passes)"
            )
    print_merge_summary(console, finished)
