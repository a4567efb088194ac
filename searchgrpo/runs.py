"""One front door per job: train, eval, merge and collect as the CLI, the console and the
benchmarks all run them, and how runs are found on disk.

- `newest_run` / `find_run_to_resume` / `run_checkpoints`: the one definition of "the newest run"
  (the run folder whose config.yaml was written last) and of a run's checkpoints.
- `train`: a Trainer whose events go to the caller's sink, to `runs/<id>/events.jsonl` and to the
  trackers of `train.report_to` (rank 0 only), so that a console can attach to the run and replay
  it later. The log and the trackers open once the trainer has claimed its folder (a run that
  fails its checks leaves none); every event is passed through `sinks.redacting` first, so no
  registered secret reaches any of them.
- `evaluate`, `merge`, `audit_checker`: the eval, merge and checker-audit jobs, with the libraries'
  chatter silenced.
- `launch_data_parallel`: re-run a `searchgrpo train` command line under torchrun.
- `stop_on_signals`: Ctrl-C / SIGTERM / SIGHUP ask a run to stop with a checkpoint; a second one aborts.

Heavy modules (torch, transformers) are imported inside the functions, so the console and
`searchgrpo --help` start at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.config import Config
from searchgrpo.errors import UserError
from searchgrpo.events import EventSink
from searchgrpo.train.control import TrainerControl

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
"""`train --debug`: the seed's train_debug, a few tiny steps that still touch every stage."""


def quiet_libraries() -> None:
    """Keep library progress bars and deprecation chatter out of the terminal and the console."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="peft")
    # Inductor says this once per compiled shape of the fused decoder (six lines each, from the
    # first steps of every CUDA run); it is a note on its own kernel choice, nothing to act on.
    warnings.filterwarnings("ignore", message=r"\s*Online softmax is disabled", category=UserWarning)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


# --------------------------------------------------------------------------- finding runs


def is_run(path: Path) -> bool:
    """A run folder is one that holds our run markers (`run_lock.is_run_folder`)."""
    from searchgrpo.train.run_lock import is_run_folder

    return is_run_folder(path)


def newest_run(output_dir: str | Path, *, with_checkpoints: bool = False) -> Path | None:
    """The run under `output_dir` whose config.yaml was written last (optionally: among the runs
    with at least one complete checkpoint); None if there is none."""
    out = Path(output_dir)
    candidates = [p for p in out.iterdir() if is_run(p)] if out.is_dir() else []
    if with_checkpoints:
        candidates = [p for p in candidates if run_checkpoints(p)]
    return max(candidates, key=lambda p: (p / "config.yaml").stat().st_mtime) if candidates else None


def find_run_to_resume(cfg: Config, run_dir: Path | None) -> Path:
    """`run_dir` if given, else `train.run_name`'s folder, else the newest run; one clear line if none."""
    if run_dir is not None:
        from searchgrpo.train.run_lock import check_run_folder

        check_run_folder(run_dir, resume=True)
        return run_dir
    out = Path(cfg.train.output_dir)
    if cfg.train.run_name:
        named = out / cfg.train.run_name
        if is_run(named):
            return named
        raise UserError(f"{named}: no run to resume (train.run_name = {cfg.train.run_name!r})")
    newest = newest_run(out)
    if newest is None:
        raise UserError(f"{out}: no run to resume; start one without --resume")
    return newest


def run_checkpoints(run_dir: str | Path | None) -> list[Any]:
    """The run's complete checkpoints (`CheckpointInfo`), oldest first. Only reads: a run may be
    writing a checkpoint right now."""
    if run_dir is None:
        return []
    from searchgrpo.train.checkpoints import list_checkpoints

    return list_checkpoints(Path(run_dir))


# --------------------------------------------------------------------------- train


@dataclass(frozen=True)
class TrainResult:
    summary: Any
    """The trainer's `RunSummary`."""
    events_dropped: int = 0
    """events.jsonl lines that could not be written (a full disk); checkpoints are separate."""
    events_error: str = ""


def train(
    cfg: Config,
    sink: EventSink,
    control: TrainerControl | None = None,
    *,
    run_dir: Path | None = None,
    resume: bool = False,
    on_trainer: Callable[[Any], None] | None = None,
    allow_changes: bool = False,
) -> TrainResult:
    """Run training to its end. Every event goes to `sink` and, on rank 0, to events.jsonl.

    `on_trainer` is called with the Trainer before it starts (the CLI uses it to report where an
    aborted run's newest checkpoint is). `allow_changes`: resume even though the config or the data
    changed in ways that alter the optimisation (recorded in the run's config history).
    """
    quiet_libraries()
    from searchgrpo.errors import one_line
    from searchgrpo.sinks import JsonlSink, fanout, redacting
    from searchgrpo.trackers import check_trackers, close_all, open_trackers
    from searchgrpo.train.trainer import Trainer

    check_trackers(cfg.train)  # before the model loads: a missing tracker package is one line at once
    trainer = Trainer(cfg, control=control, run_dir=run_dir, resume=resume, allow_changes=allow_changes)
    check_writable_run_folder(trainer.run_dir)
    jsonl, trackers = None, []
    trainer.sink = redacting(sink)
    if trainer.dist.is_main:  # one event log per job, and the trackers fed from the same events
        jsonl = JsonlSink.deferred()

        def claimed(folder: Path) -> None:
            jsonl.open(folder / "events.jsonl")
            trackers.extend(open_trackers(cfg.train, folder, sink))

        def to_trackers(event: Any) -> None:
            for t in trackers:
                t(event)

        trainer.sink = redacting(fanout(jsonl, to_trackers, sink))
        trainer.on_claimed = claimed
    if on_trainer is not None:
        on_trainer(trainer)
    try:
        summary = trainer.train()
    finally:
        if jsonl is not None:
            jsonl.close()
        close_all(trackers)
    if jsonl is None:
        return TrainResult(summary)
    error = one_line(jsonl.error.strerror or jsonl.error) if jsonl.error else ""
    return TrainResult(summary, jsonl.dropped, error)


def check_writable_run_folder(run_dir: Path) -> None:
    """Before any weight loads: one line when the run folder (or the nearest folder above it that
    exists) cannot be written, instead of failing once the model is loaded."""
    from searchgrpo.fileio import unwritable_reason
    from searchgrpo.train.run_lock import unwritable_run_folder

    existing = run_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    reason = unwritable_reason(existing) if existing.is_dir() else ""
    if reason:
        where = reason if existing == run_dir else f"{reason}: {existing.resolve()}"
        raise UserError(unwritable_run_folder(run_dir, where))


def train_headless(
    cfg: Config, *, run_dir: Path | None = None, resume: bool = False, allow_changes: bool = False
) -> int:
    """`train --headless`: rich progress on the terminal, every event in events.jsonl. The error of a
    failed run is left to the caller (the CLI prints it as its one `error:` line)."""
    from searchgrpo.errors import printable
    from searchgrpo.terminal import ConsoleSink, print_line

    control = TrainerControl()
    console = ConsoleSink(show_failure=False).open()
    trainers: list[Any] = []
    try:
        with stop_on_signals(control, lambda text: print_line(console.console, text)):
            result = train(
                cfg,
                console,
                control,
                run_dir=run_dir,
                resume=resume,
                on_trainer=trainers.append,
                allow_changes=allow_changes,
            )
    except KeyboardInterrupt:  # a second Ctrl-C: no checkpoint for the step in progress
        where = newest_checkpoint_note(trainers[0]) if trainers else "no checkpoint was written yet"
        console.close()
        print_line(console.console, f"aborted: {printable(where)}; continue with --resume")
        raise
    finally:
        console.close()
    if result.events_dropped:
        print_line(
            console.console,
            f"warning: events.jsonl: {result.events_dropped} events could not be written "
            f"({result.events_error or 'unknown'}); checkpoints are written separately",
        )
    if trainers and trainers[0].dist.is_main:
        print_line(console.console, f"run folder: {printable(result.summary.run_dir)}")
    return 0


def newest_checkpoint_note(trainer: Any) -> str:
    """Where an aborted run can be resumed from, in words."""
    from searchgrpo.train.checkpoints import latest_checkpoint

    info = latest_checkpoint(trainer.run_dir) if trainer.dist.is_main else None
    return f"the newest complete checkpoint is {info.path}" if info else "no checkpoint was written yet"


@contextlib.contextmanager
def stop_on_signals(control: TrainerControl, notify: Callable[[str], None]) -> Iterator[None]:
    """While inside: SIGINT, SIGTERM and SIGHUP (the terminal closed) ask the run to stop after this
    step with a checkpoint; a second signal raises KeyboardInterrupt (no checkpoint for the step in
    progress)."""

    def on_signal(signum: int, frame: Any) -> None:
        if control.stop.is_set():
            raise KeyboardInterrupt
        control.stop.set()
        notify(f"{signal.Signals(signum).name}: stopping after this step with a checkpoint (again to abort)")

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def launch_data_parallel(argv: Sequence[str], num_processes: int) -> int:
    """Re-run the `searchgrpo` command line `argv` (without the program name) in `num_processes`
    processes under torchrun, headless; returns torchrun's exit code."""
    args, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--num-processes":
            skip = True
        elif not arg.startswith("--num-processes="):
            args.append(arg)
    if "--headless" not in args:
        args.append("--headless")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={num_processes}",
        "-m",
        "searchgrpo",
        *args,
    ]
    return subprocess.call(cmd)


# --------------------------------------------------------------------------- eval and merge


def evaluate(cfg: Config, request: Any, sink: EventSink | None = None, stop: threading.Event | None = None) -> Path:
    """Score the requested policies (`EvalRequest`) and write the JSON report; returns its path."""
    quiet_libraries()
    from searchgrpo.evaluate import run_eval

    return run_eval(cfg, request, sink, stop)


def merge(cfg: Config, request: Any, sink: EventSink | None = None, stop: threading.Event | None = None) -> list[Path]:
    """Merge the requested checkpoints (`MergeRequest`; with neither checkpoints nor a run folder,
    every checkpoint of the newest run that has some); returns the model folders written."""
    import dataclasses

    quiet_libraries()
    from searchgrpo.export.merge import run_merge

    if not request.checkpoints and not request.run_dir:
        out = Path(cfg.train.output_dir)
        run_dir = newest_run(out, with_checkpoints=True)
        if run_dir is None:
            raise UserError(f"{out}: no runs with checkpoints; give --run-dir or --checkpoint")
        request = dataclasses.replace(request, run_dir=str(run_dir))
    return run_merge(cfg, request, sink, stop)


def audit_checker(
    cfg: Config, request: Any, sink: EventSink | None = None, stop: threading.Event | None = None
) -> Path:
    """Audit the configured checker against gold (`AuditRequest`); returns the report's path."""
    quiet_libraries()
    from searchgrpo.evaluate.checker_audit import run_audit

    return run_audit(cfg, request, sink, stop)


# --------------------------------------------------------------------------- data


def collect(cfg: Config, questions: str, out: Path, **options: Any) -> Any:
    """`collect_to_folder` (a question set, or `demo`, to traces and a corpus in `out`) with a
    progress bar; returns its `CollectResult`."""
    quiet_libraries()
    from searchgrpo.episodes.collect import collect_to_folder
    from searchgrpo.terminal import count_progress

    with count_progress("collect", "questions") as progress:
        return collect_to_folder(cfg, questions, out, progress=progress, **options)


def demo_world(out: Path, *, questions: int, distractors: int, seed: int, top_k: int) -> Any:
    """Write a demo world of this size into the empty or new folder `out`; returns its paths."""
    from searchgrpo.config import DemoConfig, EnvConfig, check_option
    from searchgrpo.fileio import claim_output
    from searchgrpo.terminal import count_progress
    from searchgrpo.world import DEMO_WORLD, build_demo

    check_option("--questions", DemoConfig, "questions", questions)
    check_option("--distractors", DemoConfig, "distractors", distractors)
    check_option("--top-k", EnvConfig, "top_k", top_k)
    out = claim_output(out, DEMO_WORLD)
    with count_progress("baseline multi-agent pass", "questions") as progress:
        return build_demo(out, DemoConfig(questions, seed, distractors), top_k=top_k, progress=progress)
