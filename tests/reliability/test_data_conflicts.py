"""Data that collides is never silently mixed: one id naming two things is detected, reported as a
conflict (renamed apart with a warning, or skipped), refused under `--strict`, and `searchgrpo
check` fails on it.

- docids numbered per question (`d0`, `d1` in every question) are renamed `<question id>:d0` when
  the set is pooled into one corpus (they used to keep the first question's text for all);
- two question folders carrying the same question id (same state ids: the prompt cache served one
  question's prompt for the other's states);
- a round listed twice in meta.json, a round file whose own number disagrees, a round below 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searchgrpo.config import load_config
from searchgrpo.data.corpus import load_corpus, write_corpus
from searchgrpo.data.questions import load_questions, pooled_corpus
from searchgrpo.world import load_dataset
from tests.helpers.faults import assert_one_error_line, main_in_process, tiny_world
from tests.helpers.tiny import SETS, TINY_OVERRIDES


def per_question_docids(qid: str, n: int) -> dict:
    """A question whose documents are numbered d0, d1 within it, as many exports do."""
    return {
        "id": qid,
        "question": f"Who founded firm {n}?",
        "answers": [f"Founder {n}"],
        "docs": [
            {"docid": "d0", "title": f"Firm {n}", "text": f"Firm {n} was founded by Founder {n}.", "gold": True},
            {"docid": "d1", "title": f"Founder {n}", "text": f"Founder {n} was born in town {n}."},
        ],
    }


def data_sets(traces: Path, corpus: Path) -> list[str]:
    return [
        "--set",
        f"data.traces={traces}",
        "--set",
        f"data.corpus={corpus}",
        "--set",
        "data.eval_fraction=0",
        "--set",
        "train.states_per_step=1",
    ]


def check(traces: Path, corpus: Path, capsys, monkeypatch) -> tuple[int, str]:
    monkeypatch.setenv("COLUMNS", "400")  # one line per row of check's table
    code, text = main_in_process(["check", "--no-model", *SETS, *data_sets(traces, corpus)], capsys, monkeypatch)
    return code, " ".join(text.replace("│", " ").split())


# --------------------------------------------------------------------------- docids per question


def test_docids_numbered_per_question_are_renamed_apart(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "q.jsonl"
    source.write_text("".join(json.dumps(per_question_docids(f"q{n}", n)) + "\n" for n in (1, 2, 3)))
    out = tmp_path / "out"
    code, text = main_in_process(["collect", "--questions", str(source), "--out", str(out), *SETS], capsys, monkeypatch)
    assert code == 0, text
    assert f"warning: {source}: docid 'd0' names different documents in 3 questions ('q1', 'q2', 'q3')" in text
    assert "renamed '<question id>:d0'" in text
    corpus = {d.docid: d for d in load_corpus(out / "corpus.jsonl")}
    assert set(corpus) == {f"q{n}:d{i}" for n in (1, 2, 3) for i in (0, 1)}
    for n in (1, 2, 3):  # each question's gold is its own document, with its own text
        meta = json.loads(next((out / "traces").glob(f"q{n}/run_001/meta.json")).read_text())
        assert meta["gold_docids"] == [f"q{n}:d0"]
        assert corpus[f"q{n}:d0"].text == f"Firm {n} was founded by Founder {n}."
    code, flat = check(out / "traces", out / "corpus.jsonl", capsys, monkeypatch)
    assert code == 0, flat  # renamed apart: nothing left in conflict


def test_a_corpus_pooled_from_clashing_docids_fails_check(tmp_path, capsys, monkeypatch):
    """A folder collected before the renaming: its corpus kept the first question's d0 for all."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "q.jsonl"
    source.write_text("".join(json.dumps(per_question_docids(f"q{n}", n)) + "\n" for n in (1, 2)))
    out = tmp_path / "out"
    assert (
        main_in_process(["collect", "--questions", str(source), "--out", str(out), *SETS], capsys, monkeypatch)[0] == 0
    )
    write_corpus(out / "corpus.jsonl", pooled_corpus(load_questions(source)))  # what the old collect wrote
    code, flat = check(out / "traces", out / "corpus.jsonl", capsys, monkeypatch)
    assert code == 1, flat
    assert "conflicts" in flat and "FAIL" in flat
    assert "docid 'd0' names different documents in 2 questions" in flat


def test_clashing_docids_are_refused_under_strict(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "q.jsonl"
    source.write_text("".join(json.dumps(per_question_docids(f"q{n}", n)) + "\n" for n in (1, 2)))
    code, text = main_in_process(
        ["collect", "--questions", str(source), "--out", "out", "--strict", *SETS], capsys, monkeypatch
    )
    assert code == 2
    assert_one_error_line(text, "docid 'd0' names different documents in 2 questions")
    assert not (tmp_path / "out" / "traces").exists()


# --------------------------------------------------------------------------- traces


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    return tiny_world(tmp_path)


def first_run(traces: Path) -> Path:
    return sorted(traces.glob("*/run_001"))[0]


def load(traces: Path, corpus: Path, *extra: str):
    cfg = load_config(None, [*TINY_OVERRIDES, f"data.traces={traces}", f"data.corpus={corpus}", *extra])
    return load_dataset(cfg)


def test_two_question_folders_with_one_question_id(world, capsys, monkeypatch):
    traces, corpus = world
    run = first_run(traces)
    qid = json.loads((run / "meta.json").read_text())["question_id"]
    copy = traces / "zz-copy"
    shutil.copytree(run.parent, copy)
    ds = load(traces, corpus)
    conflicts = [str(i) for i in ds.issues.conflicts]
    assert conflicts == [
        f"{copy / 'run_001' / 'meta.json'}: question id {qid!r} is already the id of {run.parent}: two question "
        "folders would give their states the same ids; this folder is skipped (give each question its own id)"
    ]
    ids = [s.state_id for s in [*ds.train, *ds.eval]]
    assert len(ids) == len(set(ids))  # no two states share an id (and so a cached prompt)
    assert not any(s.source.startswith(str(copy)) for s in [*ds.train, *ds.eval])
    code, flat = check(traces, corpus, capsys, monkeypatch)
    assert code == 1 and "conflicts FAIL 1 conflicting inputs" in flat, flat


def edit_meta(run: Path, edit) -> None:
    meta = json.loads((run / "meta.json").read_text())
    edit(meta)
    (run / "meta.json").write_text(json.dumps(meta))


def listed_twice(meta: dict) -> None:
    meta["rounds"].append(dict(meta["rounds"][0], checkpoint=meta["rounds"][-1]["checkpoint"]))


def negative(meta: dict) -> None:
    meta["rounds"][0]["round"] = -1


def file_twice(meta: dict) -> None:
    meta["rounds"][1]["checkpoint"] = meta["rounds"][0]["checkpoint"]


@pytest.mark.parametrize(
    "edit, words",
    [
        (listed_twice, "lists round 1 twice; the run is skipped"),
        (
            negative,
            "lists round -1: rounds are numbered from 1 (round_000.json is the state before round 1); "
            "the run is skipped",
        ),
        (file_twice, "lists 'round_001.json' for two rounds; the run is skipped"),
    ],
)
def test_a_round_list_that_reads_two_ways_is_a_conflict(edit, words, world, capsys, monkeypatch):
    traces, corpus = world
    run = first_run(traces)
    edit_meta(run, edit)
    ds = load(traces, corpus)
    assert [str(i) for i in ds.issues.conflicts] == [f"{run / 'meta.json'}: {words}"]
    code, flat = check(traces, corpus, capsys, monkeypatch)
    assert code == 1 and "conflicts FAIL" in flat, flat
    code, text = main_in_process(
        ["train", "--headless", "--strict", *SETS, *data_sets(traces, corpus)], capsys, monkeypatch
    )
    assert code == 2
    assert_one_error_line(text, words)


def test_a_round_file_whose_own_number_disagrees_with_meta_json(world, capsys, monkeypatch):
    traces, corpus = world
    run = first_run(traces)
    second = run / "round_002.json"
    data = json.loads(second.read_text())
    data["round"] = 5
    second.write_text(json.dumps(data))
    ds = load(traces, corpus)
    assert [str(i) for i in ds.issues.conflicts] == [f"{second}: says it is round 5, but meta.json lists it as round 2"]
    assert not any(s.source == str(second) for s in [*ds.train, *ds.eval])
    code, flat = check(traces, corpus, capsys, monkeypatch)
    assert code == 1 and "conflicts FAIL" in flat, flat
