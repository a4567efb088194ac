"""The console's run model and event plumbing, without Textual."""

from __future__ import annotations

import json
import threading

from searchgrpo.events import (
    EvalFinished,
    EvalProgress,
    EvalStarted,
    JobFailed,
    StepFinished,
    TrainEvalProgress,
    event_to_dict,
)
from tests.helpers.scripted_events import run_started, scripted_run, step_events
from tui.format import fmt_duration, printable, sparkline, thin
from tui.inbox import EventInbox
from tui.model import ConsoleModel, Earlier
from tui.sources import JsonlFollower, follow_events


def test_model_follows_a_run_and_estimates_the_time_left():
    model = ConsoleModel()
    for event in scripted_run(steps=4, total=12, finish=False):
        model.apply(event)
    run = model.run
    assert (run.status, run.step, run.total_steps) == ("running", 4, 12)
    assert run.eta_seconds() == 8 * 10.0  # 8 steps left at the scripted 10 s per step
    assert [s for s, _ in run.history["eval/reward_mean"]] == [4]
    assert len(run.groups) == 8 and run.checkpoints[-1].step == 4
    assert [e.level for e in model.log][:2] == ["warning", "info"]


def test_a_resumed_run_forgets_the_steps_after_its_checkpoint():
    model = ConsoleModel()
    for event in [run_started(10), *step_events(1), *step_events(2), *step_events(3)]:
        model.apply(event)
    model.apply(run_started(10, start_step=2))
    assert [s for s, _ in model.run.history["reward/mean"]] == [1, 2]
    assert {g.step for g in model.run.groups} == {1, 2} and model.run.step == 2
    for event in step_events(3):
        model.apply(event)
    assert [s for s, _ in model.run.history["reward/mean"]] == [1, 2, 3]


def test_jobs_track_progress_and_failure():
    model = ConsoleModel()
    model.eval.reset()
    model.apply(EvalStarted(["baseline", "step-000004"], 5, "r.json"))
    model.apply(EvalProgress("baseline", 5, 5))
    model.apply(EvalProgress("step-000004", 2, 5))
    assert model.eval.progress == {"baseline": (5, 5), "step-000004": (2, 5)}
    model.apply(JobFailed("eval", "boom"))
    assert model.eval.status == "failed" and model.eval.error == "boom"
    assert model.merge.status == "idle"


def test_inbox_posts_once_per_burst_and_hands_out_slices():
    notices = []
    inbox = EventInbox(lambda: notices.append(1))
    threads = [threading.Thread(target=lambda: [inbox.put(i) for i in range(500)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert inbox.received == 2000 and len(notices) == 1
    batch, more = inbox.take(1500)
    assert len(batch) == 1500 and more
    batch, more = inbox.take(1500)
    assert len(batch) == 500 and not more
    inbox.put("next")
    assert len(notices) == 2


def test_follower_waits_for_whole_lines(tmp_path):
    path = tmp_path / "events.jsonl"
    follower = JsonlFollower(path)
    assert follower.read() == []  # not written yet
    lines = [json.dumps(event_to_dict(e)) + "\n" for e in step_events(1)]
    path.write_text(lines[0] + "not json\n" + lines[1][:25])
    assert len(follower.read()) == 1
    with path.open("a") as fh:
        fh.write(lines[1][25:])
    assert [type(e).__name__ for e in follower.read()] == ["GroupScored"]


def test_replay_reads_everything_then_returns(tmp_path):
    path = tmp_path / "events.jsonl"
    events = scripted_run(steps=3)
    path.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in events))
    got = []
    follow_events(path, got.append, threading.Event(), follow=False)
    assert got == events


def test_formatting_helpers():
    assert fmt_duration(75) == "1m15s" and fmt_duration(3700) == "1h01m" and fmt_duration(None) == "–"
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█" and sparkline([2, 2]) == "▄▄"
    points = [(i, float(i)) for i in range(1, 1001)]
    kept = thin(points, 100)
    assert len(kept) <= 101 and kept[0] == (1, 1.0) and kept[-1] == (1000, 1000.0)


def test_model_output_is_made_safe_to_draw():
    assert printable("a\x1b[2Jb\x00c\td\ne\u202ef") == "a\\x1b[2Jb\\x00c\td\ne\\u202ef"  # the core's sanitiser
    assert printable("a\tb\nc", one_line=True) == "a b⏎c"


def test_follower_skips_a_line_over_the_cap_without_holding_it(tmp_path, monkeypatch):
    import tui.sources as sources

    monkeypatch.setattr(sources, "READ_CHUNK", 1000)
    path = tmp_path / "events.jsonl"
    good = json.dumps(event_to_dict(step_events(1)[-1])) + "\n"
    path.write_text(good + "y" * 50_000 + "\n" + good)
    follower = JsonlFollower(path, max_line=len(good) + 10)
    events = []
    while follower.offset < path.stat().st_size:
        events += follower.read()
        assert len(follower._partial) <= follower.max_line  # never more than the cap in memory
    assert [type(e).__name__ for e in events] == ["StepFinished", "StepFinished"]
    assert follower.skipped == 1 and follower.problems == [f"line 2: longer than {len(good) + 10:,} bytes"]


def test_smoothing_is_a_debiased_moving_average():
    import pytest

    from tui.format import smooth

    assert smooth([1.0, 1.0, 1.0]) == pytest.approx([1.0, 1.0, 1.0])  # no pull towards zero at the start
    assert smooth([0.0, 10.0], weight=0.5) == pytest.approx([0.0, 5.0 / 0.75])
    assert smooth([1.0, float("nan"), 3.0], weight=0.5)[2] == pytest.approx((0.25 + 1.5) / 0.75)


def test_compared_runs_get_their_own_curves_and_a_new_run_clears_the_old():
    from tui.model import Compared

    model = ConsoleModel()
    model.compare.append(type(model.run)())
    for event in scripted_run(steps=3):
        model.apply(event)
    other = run_started(run_id="20260102-000000")
    for event in [other, *step_events(1, seed=1), *step_events(2, seed=1)]:
        model.apply(Compared(0, event))
    assert [s for s, _ in model.compare[0].history["reward/mean"]] == [1, 2]
    assert [s for s, _ in model.run.history["reward/mean"]] == [1, 2, 3]
    model.apply(run_started(run_id="20260103-000000"))  # another run in the main view
    assert model.run.history == {} and model.run.groups_added > 0 and not model.run.checkpoints


def test_ids_are_never_wrapped_and_components_never_cut_mid_word():
    import io

    from rich.console import Console

    from searchgrpo.events import DocView, SampleView
    from tui.widgets.group_table import components_text
    from tui.widgets.sample_detail import render_sample

    docid = "wiki:Harbour_Suite_(composition)#p12"
    doc = DocView(docid, "Harbour Suite", "A suite for orchestra. " * 8, "IMPORTANT", "names the composer", True, 0, 0)
    sample = SampleView(
        0,
        "{x}",
        ["Harbour Suite composer"],
        1.0,
        0.5,
        {"new_important": 1.0, "new_relevant": 0.4, "irrelevant": -0.05, "already_discovered": -0.1},
        {},
        [doc],
    )
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(render_sample(sample))
    assert docid in console.export_text()  # whole, on one line
    text = str(components_text(sample, width=22))
    assert text == "imp+1.00 rel+0.40 (+2)"
    assert str(components_text(sample)) == "imp+1.00 rel+0.40 seen-0.10 irr-0.05"


def test_the_sample_view_shows_each_clues_credit_and_the_return():
    import io

    from rich.console import Console

    from searchgrpo.events import SampleView
    from tui.widgets.sample_detail import render_sample

    sample = SampleView(
        0,
        "Krallo Systems\nZeta",
        ["Krallo Systems", "Zeta"],
        0.96,
        0.7,
        {"new_important": 1.0},
        {},
        [],
        clue_marginals=[1.0, 0.0],
        clue_shares=[1.0, 0.0],
        episode_return=1.76,
        continuation=0.8,
    )
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(render_sample(sample))
    text = console.export_text()
    assert "clue 1: Krallo Systems   credit 100% (without it -1.00)" in text
    assert "clue 2: Zeta   credit 0% (without it +0.00)" in text
    assert "return +1.760 (later rounds +0.800)" in text
    # Round credit, or an event from before per-clue credit: nothing of either is shown.
    plain = SampleView(0, "Zeta", ["Zeta"], 0.0, 0.0, {}, {}, [])
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(render_sample(plain))
    assert "credit" not in console.export_text() and "return" not in console.export_text()


def test_the_eta_leaves_out_the_warm_up_step():
    """Issue 26: after step 1 the ETA counted the warm-up step (18h22m shown)."""
    model = ConsoleModel()
    model.apply(run_started(12))
    first = step_events(1)
    first[-1] = StepFinished(1, 0, 12, {**first[-1].metrics, "time/step": 600.0})
    for event in first:
        model.apply(event)
    assert model.run.eta_seconds() is None  # only the warm-up step: no pace yet
    for event in step_events(2) + step_events(3):
        model.apply(event)
    assert model.run.eta_seconds() == 9 * 10.0  # steps 2 and 3 at 10 s; the 600 s step left out
    model.apply(run_started(12, start_step=3))  # resumed: its first step warms up again
    assert model.run.first_step == 4


def test_history_of_a_resumed_run_never_changes_the_state_of_the_run_starting():
    model = ConsoleModel()
    model.run.status = "starting"
    for event in scripted_run(steps=3, total=6):  # ends with RunFinished(completed)
        model.apply(Earlier(event))
    assert model.run.status == "starting" and model.run.active
    assert [s for s, _ in model.run.history["reward/mean"]] == [1, 2, 3]
    model.apply(run_started(6, start_step=2))
    assert model.run.status == "running" and [s for s, _ in model.run.history["reward/mean"]] == [1, 2]


def test_the_in_training_eval_shows_its_progress():
    model = ConsoleModel()
    for event in [run_started(8), *step_events(1)]:
        model.apply(event)
    model.apply(TrainEvalProgress(1, 6, 32))
    assert model.run.eval_progress == (6, 32)
    model.apply(EvalFinished(1, {"eval/reward_mean": 0.1}))
    assert model.run.eval_progress is None
