"""`searchgrpo import-traces`: a multi-agent system's JSONL agent log into traces.

The documented example log converts to the traces its events describe and trains a tiny step; the
demo world's traces, written out as an agent log, come back as the very same training states; every
line or event that cannot be used is reported by file:line and counted, and the output folder is
written whole or not at all.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from searchgrpo.data.agent_log import IMPORT_REPORT, import_agent_logs
from searchgrpo.data.states import find_runs, load_states
from searchgrpo.data.traces import RoundState, parse_meta, parse_round
from searchgrpo.errors import DataError, UserError
from searchgrpo.world import resolve_data_paths
from tests.helpers import ROOT
from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import tiny_config

EXAMPLE = ROOT / "docs" / "examples" / "agent_log.jsonl"
EXAMPLE_CORPUS = ROOT / "docs" / "examples" / "corpus.jsonl"


def write_log(path: Path, events: list[object]) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events), encoding="utf-8")
    return path


def log_of_traces(traces: Path) -> list[dict]:
    """A traces folder told as the agent events that built it: what a system's log would hold."""
    events: list[dict] = []
    for run_dir in find_runs(traces):
        meta = parse_meta(json.loads((run_dir / "meta.json").read_text()))
        qid = meta.question_id
        events.append(
            {
                "event": "question",
                "question_id": qid,
                "question": meta.question,
                "answers": list(meta.answers),
                "gold_docids": list(meta.gold_docids),
            }
        )
        zero = run_dir / "round_000.json"
        prev = parse_round(json.loads(zero.read_text())) if zero.is_file() else RoundState()
        for ref in meta.rounds:
            cur = parse_round(json.loads((run_dir / ref.checkpoint).read_text()))
            base = {"question_id": qid, "round": ref.round}
            plan = {"event": "plan", **base, "strategy": ref.strategy}
            if ref.round == 1:  # what the Planner hands round 1: the state before it
                plan.update(sub_goals=list(prev.sub_goals), goals=[g.__dict__ for g in prev.goals])
            events.append(plan)
            if cur.clues:
                events.append({"event": "clues", **base, "clues": list(cur.clues)})
            new = [d for d in cur.discovered_docids if d not in prev.discovered_docids]
            if new:
                events.append({"event": "search", **base, "docids": new})
            known = {d.docid for d in prev.documents}
            checked = [d.__dict__ for d in cur.documents if d.docid not in known]
            if checked:
                events.append({"event": "verdicts", **base, "documents": checked})
            if cur.entities != prev.entities:
                events.append({"event": "entities", **base, "entities": [e.__dict__ for e in cur.entities]})
            if cur.goals != prev.goals:
                events.append({"event": "goals", **base, "goals": [g.__dict__ for g in cur.goals]})
            events += [{"event": "note", **base, "text": t} for t in cur.context[len(prev.context) :]]
            prev = cur
    return events


def test_the_example_log_becomes_the_traces_its_events_describe(tmp_path):
    result = import_agent_logs([EXAMPLE], tmp_path / "traces")
    assert (result.lines, result.used, len(result.issues)) == (51, 51, 0)
    loaded = load_states(tmp_path / "traces")
    assert len(loaded.states) == 6 and not loaded.issues.issues
    state = next(s for s in loaded.states if s.state_id == "q-inception/run_001/r003")
    assert state.original_clues == ("Christopher Nolan education", "Christopher Nolan university")
    before = state.before  # the state after round 2: what the Executor saw in round 3
    assert [e.name for e in before.entities] == ["Christopher Nolan"]
    assert [(g.status, g.answer) for g in before.goals] == [("done", "Christopher Nolan"), ("open", None)]
    assert next((d.docid, d.verdict, d.round) for d in before.documents) == ("wiki:Inception#0", "IMPORTANT", 1)
    assert before.sub_goals == ("find who directed Inception", "find where that person studied")
    assert before.context == ("round 1: searched 2 clues, 3 documents", "round 2: extracted 1 entities")
    first = next(s for s in loaded.states if s.state_id == "q-inception/run_001/r001")
    assert first.before.sub_goals == before.sub_goals and not first.before.documents  # planned before round 1
    assert loaded.labels["q-inception"].important == {"wiki:Inception#0", "wiki:Christopher_Nolan#0"}
    report = json.loads((tmp_path / "traces" / IMPORT_REPORT).read_text())
    assert report["search_rounds"] == 6 and report["issues_total"] == 0


def test_the_demo_worlds_traces_told_as_a_log_come_back_as_the_same_states(tmp_path):
    traces, _, _ = resolve_data_paths(tiny_config(tmp_path))
    log = write_log(tmp_path / "agents.jsonl", log_of_traces(traces))
    import_agent_logs([log], tmp_path / "imported")
    original, imported = load_states(traces), load_states(tmp_path / "imported")
    assert len(original.states) > 20
    assert [replace(s, source="") for s in imported.states] == [replace(s, source="") for s in original.states]
    assert {q: lab.labels for q, lab in imported.labels.items()} == {
        q: lab.labels for q, lab in original.labels.items()
    }
    assert imported.initial == original.initial


Q = {"event": "question", "question_id": "q1", "question": "Who?", "gold_docids": ["d1"]}


def ev(event: str, r: int, **kw) -> dict:
    return {"event": event, "question_id": "q1", "round": r, **kw}


BAD_LINES = [
    ("{not json", "invalid JSON"),
    ('["a list"]', "expected a JSON object"),
    ({"event": "telemetry", "question_id": "q1"}, "field 'event' = 'telemetry'"),
    ({"event": "clues", "round": 1, "clues": ["a"]}, "field 'question_id'"),
    (ev("clues", 0, clues=["a b"]), "field 'round' must be an integer >= 1"),
    (ev("clues", 1, clues="a b"), "field 'clues' must be a list of strings"),
    (ev("verdicts", 1, documents=[{"docid": "d1", "verdict": "GREAT"}]), "verdict = 'GREAT'"),
    (ev("verdicts", 1, documents=[{"verdict": "IMPORTANT"}]), "documents[0].docid: missing"),
    (ev("entities", 1, entities=[{"type": "x"}]), "entities[0].name: missing"),
    (ev("plan", 1, strategy=3), "field 'strategy'"),
    (ev("note", 1), "field 'text'"),
    ({**ev("clues", 1, clues=["a"]), "question_id": "q9"}, "with no question event before it"),
    (ev("plan", 2, strategy="BROWSE"), "strategy 'BROWSE'"),
    (ev("clues", 1, clues=["again"]), "a second clues event for round 1"),
    (Q, "was already started"),
]


def test_every_line_that_cannot_be_used_is_reported_by_file_and_line(tmp_path):
    good = [Q, ev("plan", 1, strategy="SEARCH", sub_goals=["find it"]), ev("clues", 1, clues=["a b", "c d"])]
    log = write_log(tmp_path / "log.jsonl", [*good, *(line for line, _ in BAD_LINES), ev("search", 1, docids=["d1"])])
    result = import_agent_logs([log], tmp_path / "out")
    issues = [str(i) for i in result.issues.issues]
    assert len(issues) == len(BAD_LINES) and result.used == len(good) + 1
    for n, (_line, reason) in enumerate(BAD_LINES, len(good) + 1):
        assert any(i.startswith(f"{log}:{n}: ") and reason in i for i in issues), (n, reason, issues)
    report = json.loads((tmp_path / "out" / IMPORT_REPORT).read_text())
    assert report["issues_total"] == len(BAD_LINES) and report["issues"] == issues
    assert report["conflicts"] == 2  # the second clues event and the second question event


def test_a_gap_in_the_rounds_and_a_question_without_rounds_are_reported(tmp_path):
    log = write_log(
        tmp_path / "log.jsonl",
        [
            Q,
            ev("clues", 1, clues=["a b", "c d"]),
            ev("clues", 3, clues=["e f", "g h"]),
            {"event": "question", "question_id": "q2", "question": "What?"},
        ],
    )
    result = import_agent_logs([log], tmp_path / "out")
    issues = [str(i) for i in result.issues.issues]
    assert any(i.startswith(f"{log}:1: ") and "no events for round 2; rounds 3 are left out" in i for i in issues)
    assert any(i.startswith(f"{log}:4: ") and "'q2' run 1: no round events" in i for i in issues)
    assert [s.round for s in load_states(tmp_path / "out").states] == [1]


def test_strict_stops_at_the_first_and_writes_nothing(tmp_path):
    log = write_log(tmp_path / "log.jsonl", [Q, ev("clues", 1, clues=["a b", "c d"]), "{oops"])
    with pytest.raises(DataError, match=r"log\.jsonl:3: invalid JSON"):
        import_agent_logs([log], tmp_path / "out", strict=True)
    assert not (tmp_path / "out").exists()


def test_the_output_folder_is_claimed_and_replaced_only_when_ours(tmp_path, capsys, monkeypatch):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    code, out = main_in_process(["import-traces", str(EXAMPLE), "--out", str(foreign)], capsys, monkeypatch)
    assert code == 2 and (foreign / "notes.txt").read_text() == "mine"
    assert_one_error_line(out, "--out", "not a traces folder written by import-traces")
    ours = tmp_path / "ours"
    code, out = main_in_process(["import-traces", str(EXAMPLE), "--out", str(ours)], capsys, monkeypatch)
    assert code == 0 and "51 of 51 events used" in out and "data.traces=" in out
    code, out = main_in_process(["import-traces", str(EXAMPLE), "--out", str(ours)], capsys, monkeypatch)
    assert code == 2 and "--overwrite" in out
    code, _ = main_in_process(["import-traces", str(EXAMPLE), "--out", str(ours), "--overwrite"], capsys, monkeypatch)
    assert code == 0 and (ours / IMPORT_REPORT).is_file()
    empty = write_log(tmp_path / "empty.jsonl", ["{bad"])
    with pytest.raises(UserError, match="no question with round events"):
        import_agent_logs([empty], tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_docs_traces_md_quotes_the_example_files_first_question():
    doc = (ROOT / "docs" / "traces.md").read_text(encoding="utf-8")
    quoted = doc.split("its first question reads:\n\n```json\n", 1)[1].split("```", 1)[0].splitlines()
    assert len(quoted) == 17 and quoted == EXAMPLE.read_text(encoding="utf-8").splitlines()[: len(quoted)]
