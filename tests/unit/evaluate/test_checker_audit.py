"""`searchgrpo audit-checker`: stratified pairs, the report's figures, bad input and output safety."""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from searchgrpo.agents.checker import CheckerDefaults
from searchgrpo.data.demo_world import generate_world
from searchgrpo.data.labels import Label
from searchgrpo.data.questions import QuestionRecord, write_questions
from searchgrpo.errors import UserError
from searchgrpo.evaluate.audit_pairs import STRATA, load_audit_data, sample_pairs
from searchgrpo.evaluate.audit_report import audit_tables, load_audit_report
from searchgrpo.evaluate.checker_audit import REPORT_FORMAT, AuditRequest, run_audit
from searchgrpo.events import AuditProgress, AuditReportWritten, AuditStarted
from searchgrpo.terminal import audit_progress
from searchgrpo.world import make_retriever, resolve_data_paths
from tests.helpers.tiny import tiny_config
from tests.helpers.waiting import wait_until


def audit(cfg, tmp_path: Path, name: str = "audit.json", **kw):
    events: list = []
    request = AuditRequest(output=str(tmp_path / name), plot=False, bootstrap=200, **kw)
    path = run_audit(cfg, request, events.append)
    return json.loads(path.read_text()), events


def test_pairs_are_stratified_seeded_and_grouped_by_context(tmp_path):
    cfg = tiny_config(tmp_path)
    data = load_audit_data(cfg)
    retriever = make_retriever(cfg, data.dataset)
    pairs = sample_pairs(data, retriever, 90, seed=3)
    assert len(pairs) == 90
    assert {s: sum(p.stratum == s for p in pairs) for s in STRATA} == {s: 30 for s in STRATA}
    for p in pairs:
        gold = data.gold[p.request.question_id]
        assert (p.stratum == "gold") == (p.request.docid in gold) == (p.gold is Label.IMPORTANT)
    keys = [(p.request.question_id, p.request.sub_goals) for p in pairs]
    assert len(set(keys)) == len({k: None for k in keys})  # each context's pairs are consecutive
    again = sample_pairs(data, retriever, 90, seed=3)
    assert [p.request for p in again] == [p.request for p in pairs]
    other = sample_pairs(data, retriever, 90, seed=4)
    assert [p.request for p in other] != [p.request for p in pairs]


def test_gold_backend_agrees_with_itself_and_the_report_is_complete(tmp_path):
    report, events = audit(tiny_config(tmp_path), tmp_path, pairs=120)
    assert report["format"] == REPORT_FORMAT
    assert report["three_label"]["accuracy"]["value"] == 1.0
    assert report["three_label"]["kappa"]["value"] == pytest.approx(1.0)
    assert report["important_vs_rest"]["precision"]["IMPORTANT"]["value"] == 1.0
    assert sum(report["data"]["strata"].values()) == len(report["pairs"]) == 120
    assert report["calibration"] is None  # gold verdicts carry no probabilities
    assert report["speed"]["verdicts"] == 120 and report["speed"]["verdicts_per_second"] > 0
    for probe in ("length", "overlap"):
        bins = report["bias"][probe]["bins"]
        assert sum(b["pairs"] for b in bins) == 120
        assert all(b["excess"]["value"] == 0 for b in bins if b["pairs"])
    assert isinstance(events[0], AuditStarted) and events[0].pairs == 120
    assert [e.done for e in events if isinstance(e, AuditProgress)][-1] == 120
    assert isinstance(events[-1], AuditReportWritten)
    assert events[-1].summary["agreement"] == 1.0


def test_simulated_noise_is_measured_by_the_audit(tmp_path):
    cfg = tiny_config(tmp_path, "checker.backend=simulated", "checker.judge_noise=0.3")
    report, _ = audit(cfg, tmp_path, pairs=2000)
    n = report["three_label"]["pairs"]
    agreement = report["three_label"]["accuracy"]
    wrong = sum(p["gold"] != p["verdict"] for p in report["pairs"])
    assert agreement["value"] == pytest.approx(1 - wrong / n)
    assert agreement["ci"][0] < 0.7 < agreement["ci"][1]  # seeded: the same sample and draws on every run
    assert report["checker"]["backend"] == "simulated"


@dataclass(frozen=True)
class SoftVerdict:
    label: Label
    reason: str = ""
    probs: tuple[float, float, float] | None = None


class SoftChecker(CheckerDefaults):
    """Says IMPORTANT with probability 0.8 for the gold documents, 0.3 for the others."""

    name = "soft"

    def __init__(self, gold: dict[str, frozenset[str]]) -> None:
        self.gold = gold

    def check(self, requests):
        out = []
        for r in requests:
            p = 0.8 if r.docid in self.gold[r.question_id] else 0.3
            probs = (p, (1 - p) / 2, (1 - p) / 2)
            out.append(SoftVerdict(Label.IMPORTANT if p > 0.5 else Label.IRRELEVANT, "", probs))
        return out


def test_calibration_when_verdicts_carry_probabilities(tmp_path, monkeypatch):
    import searchgrpo.world as world

    cfg = tiny_config(tmp_path)
    gold = load_audit_data(cfg).gold
    monkeypatch.setattr(world, "make_checker", lambda cfg, dataset: SoftChecker(gold))
    report, _ = audit(cfg, tmp_path, pairs=90)
    cal = report["calibration"]
    assert cal["pairs_with_probabilities"] == 90
    rows = {round(r["mean_probability"], 3): r for r in cal["important"]["table"] if r["count"]}
    assert set(rows) == {0.8, 0.3}
    assert rows[0.8]["observed"] == 1.0 and rows[0.3]["observed"] == 0.0  # gold docs are exactly the 0.8 ones
    n8, n3 = rows[0.8]["count"], rows[0.3]["count"]
    assert cal["important"]["ece"] == pytest.approx((n8 * 0.2 + n3 * 0.3) / (n8 + n3))
    tables = audit_tables(load_audit_report(tmp_path / "audit.json"))
    assert any("reliability" in str(t.title) for t in tables)


def _demo_traces_without_gold(cfg, tmp_path: Path) -> tuple[Path, Path]:
    traces, corpus, _ = resolve_data_paths(cfg)
    copy = tmp_path / "traces"
    shutil.copytree(traces, copy)
    for meta in copy.rglob("meta.json"):
        data = json.loads(meta.read_text())
        data.pop("gold_docids", None)
        meta.write_text(json.dumps(data))
    return copy, corpus


def test_data_without_gold_is_refused_in_one_line(tmp_path):
    cfg = tiny_config(tmp_path)
    traces, corpus = _demo_traces_without_gold(cfg, tmp_path)
    with pytest.raises(UserError, match=r"no run's meta.json lists gold_docids.*--questions") as err:
        run_audit(
            cfg, AuditRequest(traces=str(traces), corpus=str(corpus), output=str(tmp_path / "a.json"), plot=False)
        )
    assert "\n" not in str(err.value)
    no_gold = tmp_path / "no_gold.jsonl"
    record = generate_world(4, 4, 0).questions[0]
    plain = QuestionRecord(record.id, record.question, record.answers, record.docs, frozenset())
    no_gold.write_text(json.dumps({**plain.to_json()}) + "\n")
    with pytest.raises(UserError, match=r'no question marks a gold document \("gold": true\)'):
        run_audit(cfg, AuditRequest(questions=str(no_gold), output=str(tmp_path / "b.json"), plot=False))
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_audit_on_a_question_set_uses_its_distractors(tmp_path):
    cfg = tiny_config(tmp_path, "checker.backend=simulated", "checker.judge_noise=0.1")
    world = generate_world(6, 10, 1)
    questions = tmp_path / "questions.jsonl"
    write_questions(questions, world.questions)
    report, _ = audit(cfg, tmp_path, pairs=60, questions=str(questions))
    own = {q.id: {d.docid for d in q.docs} - q.gold for q in world.questions}
    distractors = [p for p in report["pairs"] if p["stratum"] == "distractor"]
    assert distractors and all(p["docid"] in own[p["question_id"]] for p in distractors)
    assert report["data"]["source"].startswith("question set")


def test_output_paths_that_are_not_ours_are_refused(tmp_path):
    cfg = tiny_config(tmp_path)
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n')
    with pytest.raises(UserError, match=r"is not a checker audit report.*--overwrite"):
        run_audit(cfg, AuditRequest(output=str(notes), plot=False, pairs=10))
    assert notes.read_text() == '{"mine": true}\n'
    run_audit(cfg, AuditRequest(output=str(notes), plot=False, pairs=10, overwrite=True))
    assert json.loads(notes.read_text())["format"] == REPORT_FORMAT
    run_audit(cfg, AuditRequest(output=str(notes), plot=False, pairs=12))  # an audit report is ours
    assert len(json.loads(notes.read_text())["pairs"]) == 12
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(UserError, match="is a folder; give the path of a file"):
        run_audit(cfg, AuditRequest(output=str(tmp_path / "folder.json"), plot=False, overwrite=True))
    os.symlink(notes, tmp_path / "link.json")
    with pytest.raises(UserError, match="symbolic link"):
        run_audit(cfg, AuditRequest(output=str(tmp_path / "link.json"), plot=False, overwrite=True))
    picture = tmp_path / "fresh.png"
    picture.write_bytes(b"someone's picture")
    with pytest.raises(UserError, match=r"plot .*fresh\.png: exists and is not a checker audit plot"):
        run_audit(cfg, AuditRequest(output=str(tmp_path / "fresh.json"), plot=True))
    assert picture.read_bytes() == b"someone's picture"
    with pytest.raises(UserError, match="--pairs 0"):
        AuditRequest(pairs=0).checked()


def test_off_a_terminal_progress_is_a_line_at_least_every_period(tmp_path):
    out = tmp_path / "log.txt"
    with out.open("w") as fh:
        console = Console(file=fh, force_terminal=False, width=200)
        with audit_progress(console, every_s=0.0) as sink:
            sink(AuditStarted("gold", "gold checker", 10, "x.json"))
            sink(AuditProgress(4, 10, 2.0))
            wait_until(lambda: fh.flush() or "2.00 per second" in out.read_text(), "the heartbeat line with the rate")
            heartbeats = out.read_text().count("audit: 4/10 verdicts,")
        text = out.read_text()
    assert "audit: 10 verdicts from gold checker" in text
    assert heartbeats >= 1 and "2.00 per second" in text
    assert not [t for t in threading.enumerate() if t.name == "audit-progress"]
