"""What the console shows of the checker: unparsable replies (Log tab, metric table, drill-down) and
the hack radar (its panel, and the header's warning of judge drift)."""

from __future__ import annotations

import io
import json

from rich.console import Console

from searchgrpo.events import DocView, SampleView, StepFinished, event_to_dict
from tests.helpers.console import SIZE, make_app, settle, text_of
from tests.helpers.scripted_events import run_started, scripted_run
from tui.model import ConsoleModel, RunModel
from tui.widgets.judge_radar import render_radar
from tui.widgets.sample_detail import render_sample

PRECISION = [0.9, 0.88, 0.85, 0.8]
RATE = [0.30, 0.32, 0.36, 0.40]


def radar_steps(drift_at: int | None = None) -> list[StepFinished]:
    out = []
    for i, (p, r) in enumerate(zip(PRECISION, RATE), 1):
        m = {
            "checker/gold_precision": p,
            "checker/gold_recall": 0.7,
            "checker/important_rate": r,
            "checker/important_rate_minus_gold": r - 0.25,
            "checker/important_rate/length_q1": 0.1,
            "checker/important_rate/length_q4": 0.6 + i / 100,
            "checker/gold_important_rate/length_q4": 0.3,
            "checker/important_rate/overlap_75": 0.5,
            "checker/judge_drift": 1.0 if drift_at is not None and i >= drift_at else 0.0,
        }
        out.append(StepFinished(i, 0, 4, m, time=1.0 + i))
    return out


def plain(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_unparsable_replies_are_noted_in_the_log():
    model = ConsoleModel()
    model.apply(StepFinished(3, 0, 10, {"checker/unparsable": 4.0, "checker/unparsable_share": 0.0125}))
    model.apply(StepFinished(4, 0, 10, {"checker/unparsable": 0.0, "checker/unparsable_share": 0.01}))
    (entry,) = model.log
    assert entry.level == "warning"
    assert entry.text == (
        "step 3: 4 checker replies were not exactly a label (labelled IRRELEVANT, not cached); "
        "1.2% of all replies so far"
    )


def test_the_drill_down_marks_a_verdict_from_an_unparsable_reply():
    doc = DocView("d1", "Mendho Pharma", "founded by", "IRRELEVANT", "unparsable reply 'Not important.'", True, 0, 0)
    sample = SampleView(0, "founder", ["founder"], 0.0, 0.0, {}, {}, [doc])
    assert "↳ unparsable reply 'Not important.'" in plain(render_sample(sample))


def test_the_radar_panel_shows_the_last_values_their_trends_and_the_bins():
    run = RunModel()
    for event in radar_steps():
        run.apply(event)
    text = plain(render_radar(run))
    first, by_length, by_overlap = text.splitlines()[:3]
    assert first.startswith("gold precision 0.80 █") and "gold recall 0.70" in first
    assert "IMPORTANT rate 0.40" in first and "minus gold +0.15" in first
    assert "q1 0.10" in by_length and "q4 0.64/0.30" in by_length and "q2 –" in by_length
    assert "≥.75 0.50" in by_overlap and "<.25 –" in by_overlap
    assert "judge drift" not in text


def test_the_radar_panel_warns_of_drift():
    run = RunModel()
    for event in radar_steps(drift_at=4):
        run.apply(event)
    assert "⚠ judge drift: the IMPORTANT rate rises while gold precision falls" in plain(render_radar(run))


def write(path, events) -> None:
    path.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in events))


async def test_a_run_with_the_radar_shows_its_panel_and_the_drift_in_the_header(cfg, tmp_path):
    path = tmp_path / "events.jsonl"
    write(path, [run_started(4), *radar_steps(drift_at=4)])
    app = make_app(cfg, source="replay", events_path=path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.query_one("#judge-radar")
        assert panel.has_class("-shown") and panel.has_class("-drift") and panel.display
        assert "judge drift: the checker's IMPORTANT rate rises" in text_of(app, "#run-hint")
        assert "gold precision 0.80" in text_of(app, "#judge-radar")


async def test_a_run_without_the_radar_has_no_panel(cfg, tmp_path):
    path = tmp_path / "events.jsonl"
    write(path, scripted_run(steps=3))
    app = make_app(cfg, source="replay", events_path=path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.query_one("#judge-radar")
        assert not panel.has_class("-shown") and not panel.display
        assert "judge drift" not in text_of(app, "#run-hint")
