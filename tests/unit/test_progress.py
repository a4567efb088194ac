"""`searchgrpo.progress`: the work said up front, a line at least every period off a terminal (on a
fake clock: no test waits for time to pass), the first estimate without the warm-up unit, and the
sinks of every long command built on it."""

import io

from rich.console import Console

from searchgrpo.events import (
    AuditProgress,
    AuditStarted,
    EvalProgress,
    EvalStarted,
    LogMessage,
    MergeProgress,
    MergeStarted,
)
from searchgrpo.progress import WorkProgress
from searchgrpo.terminal import audit_progress, eval_progress, merge_progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def log_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=300), out


def test_off_a_terminal_the_work_is_announced_then_reported_at_least_every_period():
    console, out = log_console()
    clock = Clock()
    progress = WorkProgress(console, "eval", every_s=30.0, terminal=False, clock=clock)
    progress.start(20, "states", " (2 policies x 10)")
    assert out.getvalue().splitlines() == [
        "eval: 20 states (2 policies x 10); the time left shows once the first is done"
    ]
    clock.now += 29.0
    progress.tick()
    assert len(out.getvalue().splitlines()) == 1  # not yet 30 s of silence
    clock.now += 1.0
    progress.tick()  # what the timer thread calls every second
    assert out.getvalue().splitlines()[-1] == "eval: 0/20 states, 30s elapsed"
    clock.now += 10.0
    progress.update(4, detail="baseline 4/10")  # the first unit: an estimate, said at once
    assert (
        out.getvalue().splitlines()[-1]
        == "eval: 4/20 states in 40s: about 2m40s left at the pace of the first (it may include loading)"
    )
    clock.now += 20.0
    progress.update(8)
    progress.tick()
    assert (
        out.getvalue().splitlines()[-1]
        == "eval: 4/20 states in 40s: about 2m40s left at the pace of the first (it may include loading)"
    )  # < 30 s since
    clock.now += 10.0
    progress.tick()  # 30 s since the last line: the pace after the first unit (4 in 20 s), not the warm-up
    assert out.getvalue().splitlines()[-1] == "eval: 8/20 states, 1m10s elapsed, about 1m00s left; baseline 4/10"


def test_a_long_job_says_how_to_do_less_with_its_first_estimate():
    console, out = log_console()
    clock = Clock()
    progress = WorkProgress(console, "eval", terminal=False, clock=clock)
    progress.long_hint = "--limit N scores fewer"
    progress.start(1000, "states")
    clock.now += 60.0
    progress.update(10)
    assert out.getvalue().splitlines()[-1] == (
        "eval: 10/1000 states in 1m00s: about 1h39m left at the pace of the first (it may include loading) "
        "(--limit N scores fewer)"
    )


def test_a_resumed_job_counts_its_work_from_where_it_starts():
    console, out = log_console()
    clock = Clock()
    progress = WorkProgress(console, "train", terminal=False, clock=clock)
    progress.start(15, "steps", base=5)
    progress.update(5)
    assert out.getvalue().splitlines() == ["train: 10 steps; the time left shows once the first is done"]
    clock.now += 100.0  # the first step warms up
    progress.update(6)
    clock.now += 20.0
    progress.update(7)
    assert progress.left() == (160.0, False)  # 8 steps at 20 s, the warm-up step left out
    assert progress.status().startswith("train: 7/15 steps, 2m00s elapsed, about 2m40s left")


def test_on_a_terminal_a_bar_and_notes_above_it():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with WorkProgress(console, "merge") as progress:
        progress.start(10, "stages")
        progress.update(3, detail="step-000002: save")
        progress.note("warning: something")
    text = out.getvalue()
    assert "merge: 10 stages" in text and "warning: something" in text and "3/10 stages" in text


def test_the_command_sinks_announce_count_and_note():
    console, out = log_console()
    with eval_progress(console, "states", "--limit N scores fewer") as sink:
        sink(EvalStarted(["baseline", "step-000004"], 6, "r.json"))
        sink(EvalProgress("baseline", 6, 6))
        sink(EvalProgress("step-000004", 6, 6))
        sink(LogMessage("warning", "a skipped line"))
        assert (sink.progress.done, sink.progress.total) == (12, 12)
    with merge_progress(console, []) as sink:
        sink(MergeStarted(["c/step-000001", "c/step-000002"], "merged"))
        sink(MergeProgress("c/step-000001", "parity", 4, 5))
        sink(MergeProgress("c/step-000001", "done", 5, 5))
        assert sink.kept == ["c/step-000001"]
    with audit_progress(console) as sink:
        sink(AuditStarted("gold", "gold checker", 8, "a.json"))
        sink(AuditProgress(8, 8, 2.0))
    lines = out.getvalue().splitlines()
    assert (
        "eval: 12 states (2 policies x 6: baseline, step-000004); the time left shows once the first is done" in lines
    )
    assert "warning: a skipped line" in lines and any(line.startswith("eval: 12/12 states") for line in lines)
    assert any(
        line.startswith("merge: 10 stages (2 checkpoints x load, reference, merge, save, parity)") for line in lines
    )
    assert any(line.startswith("audit: 8 verdicts from gold checker") for line in lines)
    assert any(line.startswith("audit: 8/8 verdicts") and "4.00 per second" in line for line in lines)


def test_headless_training_off_a_terminal_says_the_step_running_and_the_in_training_eval():
    from searchgrpo.events import RunStarted, StepFinished, TrainEvalProgress
    from searchgrpo.terminal import ConsoleSink

    console, out = log_console()
    sink = ConsoleSink(console)
    sink(RunStarted("r1", "runs/r1", "tiny", "cpu", 15, 5, 3, 10, 4, start_step=3))
    clock = Clock()
    sink.progress.clock = clock
    sink.progress.started = sink.progress.last_line = clock.now
    clock.now += 80.0  # the first step after a resume warms up
    sink(StepFinished(4, 0, 15, {"time/step": 80.0}))
    clock.now += 20.0
    sink(StepFinished(5, 0, 15, {"time/step": 20.0}))
    sink(TrainEvalProgress(5, 8, 32))
    clock.now += 30.0
    sink.progress.tick()
    sink.close()
    lines = out.getvalue().splitlines()
    assert "train: 12 steps; the time left shows once the first is done" in lines
    assert any(line.startswith("train: 1/12 steps in 1m20s") for line in lines)
    assert lines[-1] == (
        "train: 5/15 steps, 2m10s elapsed, about 3m20s left; in-training eval after step 5: 8/32 states"
    )
