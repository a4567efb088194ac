"""The multi-agent checkpoint loader on good and malformed data."""

import json
import os
import re
from pathlib import Path

import pytest

from searchgrpo.data.labels import Label
from searchgrpo.data.states import load_states, split_by_question
from searchgrpo.data.traces import DocumentRecord, Entity, Goal, RoundState, RunWriter
from searchgrpo.errors import DataError, UserError


def write_run(root: Path, qid: str, strategies: list[str], clues_per_search: int = 2, run: str = "run_001") -> Path:
    """A run whose SEARCH rounds each find one IMPORTANT document."""
    w = RunWriter(root / qid / run, qid, f"question {qid}?", ("answer",), gold_docids=(f"{qid}-gold",))
    state = RoundState(sub_goals=("find a", "find b"), goals=(Goal("g1", "find a"),))
    for i, strategy in enumerate(strategies, 1):
        docs = state.documents
        clues: tuple[str, ...] = ()
        if strategy == "SEARCH":
            clues = tuple(f"clue {i}.{j}" for j in range(clues_per_search))
            docs = (*docs, DocumentRecord(f"{qid}-d{i}", f"Doc {i}", "IMPORTANT" if i == 1 else "RELEVANT", "", i))
        state = RoundState(
            round=i,
            strategy=strategy,
            sub_goals=state.sub_goals,
            entities=state.entities + ((Entity(f"E{i}", "person", ("fact",), ()),) if strategy == "EXTRACT" else ()),
            goals=state.goals,
            documents=docs,
            context=(*state.context, f"round {i}"),
            discovered_docids=tuple(d.docid for d in docs),
            clues=clues,
        )
        w.add_round(state)
    w.finish()
    return root / qid / run


def test_search_rounds_take_the_previous_round_as_state(tmp_path):
    write_run(tmp_path, "q1", ["SEARCH", "EXTRACT", "SEARCH", "ANSWER"])
    loaded = load_states(tmp_path)
    assert [s.round for s in loaded.states] == [1, 3]
    first, third = loaded.states
    assert first.before == RoundState(round=0)  # no round_000.json: empty tables
    assert first.original_clues == ("clue 1.0", "clue 1.1")
    assert third.before.round == 2 and third.before.strategy == "EXTRACT"
    assert third.before.entities[0].name == "E2"
    assert third.discovered == frozenset({"q1-d1"})
    assert third.state_id == "q1/run_001/r003"
    assert loaded.labels["q1"].labels == {"q1-gold": Label.IMPORTANT, "q1-d1": Label.IMPORTANT, "q1-d3": Label.RELEVANT}
    assert not loaded.issues.issues


def test_round_zero_file_is_used_when_present(tmp_path):
    run = write_run(tmp_path, "q1", ["SEARCH"])
    (run / "round_000.json").write_text(
        json.dumps({"round": 0, "sub_goals": ["from zero"], "discovered_docids": ["x"]})
    )
    (state,) = load_states(tmp_path).states
    assert state.before.sub_goals == ("from zero",) and state.discovered == {"x"}


def test_min_clues_and_max_samples(tmp_path):
    write_run(tmp_path, "few", ["SEARCH", "SEARCH"], clues_per_search=1)
    write_run(tmp_path, "many", ["SEARCH"] * 7)
    loaded = load_states(tmp_path, min_clues_per_round=2, max_samples_per_question=3)
    assert loaded.rounds_skipped_few_clues == 2
    assert [s.question_id for s in loaded.states] == ["many"] * 3
    assert loaded.states_capped == 4
    again = load_states(tmp_path, min_clues_per_round=2, max_samples_per_question=3)
    assert [s.state_id for s in again.states] == [s.state_id for s in loaded.states]  # deterministic


def test_unknown_fields_are_ignored(tmp_path):
    run = write_run(tmp_path, "q1", ["SEARCH"])
    meta = json.loads((run / "meta.json").read_text())
    meta["extra"] = {"anything": 1}
    (run / "meta.json").write_text(json.dumps(meta))
    r1 = json.loads((run / "round_001.json").read_text())
    r1["planner_notes"] = "ignored"
    (run / "round_001.json").write_text(json.dumps(r1))
    assert len(load_states(tmp_path).states) == 1


def _break(tmp_path: Path, how: str) -> Path:
    run = write_run(tmp_path, "bad", ["SEARCH", "EXTRACT", "SEARCH"])
    write_run(tmp_path, "good", ["SEARCH"])
    if how == "invalid json":
        (run / "round_002.json").write_text("{not json")
    elif how == "wrong type":
        r = json.loads((run / "round_002.json").read_text())
        r["documents"][0]["docid"] = 42
        (run / "round_002.json").write_text(json.dumps(r))
    elif how == "missing field":
        meta = json.loads((run / "meta.json").read_text())
        del meta["question"]
        (run / "meta.json").write_text(json.dumps(meta))
    elif how == "non utf8":
        (run / "round_002.json").write_bytes(b'{"round": 2, "context": ["\xff\xfe"]}')
    elif how == "missing round file":
        (run / "round_002.json").unlink()
    elif how == "symlink outside":
        outside = tmp_path.parent / f"outside-{os.getpid()}.json"
        outside.write_text(json.dumps({"round": 2}))
        (run / "round_002.json").unlink()
        (run / "round_002.json").symlink_to(outside)
    elif how == "not an object":
        (run / "meta.json").write_text("[1, 2]")
    elif how == "path escape":
        meta = json.loads((run / "meta.json").read_text())
        meta["rounds"][1]["checkpoint"] = "../../good/run_001/round_001.json"
        (run / "meta.json").write_text(json.dumps(meta))
    return run


@pytest.mark.parametrize(
    "how, reason",
    [
        ("invalid json", "invalid JSON at line 1"),
        ("wrong type", "documents[0].docid: expected a string, got int"),
        ("missing field", "question: missing"),
        ("non utf8", "not valid UTF-8"),
        ("missing round file", "file is missing"),
        ("symlink outside", "points outside the traces folder"),
        ("not an object", "expected a JSON object"),
        ("path escape", "must be a plain file name"),
    ],
)
def test_malformed_files_are_reported_and_skipped(tmp_path, how, reason):
    root = tmp_path / "ckpts"
    root.mkdir()
    _break(root, how)
    loaded = load_states(root)
    assert any(reason in str(i) for i in loaded.issues.issues), loaded.issues.issues
    assert "good" in {s.question_id for s in loaded.states}
    # The damaged run's usable rounds survive: only what depends on the bad file is dropped.
    with pytest.raises(DataError, match=re.escape(reason)):
        load_states(root, strict=True)


def test_huge_file_is_refused(tmp_path, monkeypatch):
    import searchgrpo.data.traces as ac

    run = write_run(tmp_path, "q1", ["SEARCH"])
    monkeypatch.setattr(ac, "MAX_FILE_BYTES", 10)
    loaded = load_states(tmp_path)
    assert not loaded.states
    assert "above the" in str(loaded.issues.issues[0]) and str(run / "meta.json") in str(loaded.issues.issues[0])


def test_missing_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="traces folder not found"):
        load_states(tmp_path / "nope")


def test_split_is_by_question_and_stable(tmp_path):
    for i in range(10):
        write_run(tmp_path, f"q{i}", ["SEARCH", "SEARCH"])
    states = load_states(tmp_path).states
    train, evals = split_by_question(states, 0.3, seed=1)
    assert {s.question_id for s in train}.isdisjoint({s.question_id for s in evals})
    assert len({s.question_id for s in evals}) == 3
    assert split_by_question(states, 0.3, seed=1) == (train, evals)
    assert split_by_question(states, 0.3, seed=2) != (train, evals)
    # Tiny sets still hold out one question; a fraction of 0 holds out none.
    two = [s for s in states if s.question_id in ("q0", "q1")]
    assert len({s.question_id for s in split_by_question(two, 0.01)[1]}) == 1
    assert split_by_question(states, 0.0)[1] == []
