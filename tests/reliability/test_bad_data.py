"""Bad data, systematically: every kind of damage to a checkpoint folder, a corpus and a question
set gives one line naming the file and the reason; by default it is skipped and counted, under
`--strict` the run stops with exit 2. Never a crash, never a traceback.

Each fault damages a private copy of the tiny demo world (one question folder per fault). The
strict matrix runs the real entry point in-process (it stops before the model loads); one
subprocess run takes all faults at once and trains a step past them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from searchgrpo.config import load_config
from searchgrpo.world import load_dataset
from tests.helpers.faults import assert_one_error_line, main_in_process, run_cli, tiny_world
from tests.helpers.tiny import SETS, TINY_OVERRIDES

# --------------------------------------------------------------------------- checkpoint folders


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _meta(run: Path, edit: Callable[[dict], None]) -> Path:
    meta = _json(run / "meta.json")
    edit(meta)
    (run / "meta.json").write_text(json.dumps(meta))
    return run / "meta.json"


def _round(run: Path, n: int) -> Path:
    return run / f"round_{n:03d}.json"


def f_invalid_json(run, outside):
    (run / "meta.json").write_text('{"question_id": "x", "question": ')
    return run / "meta.json", "invalid JSON at line 1"


def f_invalid_json_round(run, outside):
    _round(run, 2).write_text("{not json")
    return _round(run, 2), "invalid JSON at line 1 column 2"


def f_empty_file(run, outside):
    _round(run, 1).write_bytes(b"")
    return _round(run, 1), "invalid JSON at line 1 column 1 (Expecting value)"


def f_missing_field(run, outside):
    return _meta(run, lambda m: m.pop("question")), "question: missing"


def f_wrong_type(run, outside):
    r = _json(_round(run, 2))
    r["documents"][0]["docid"] = 42
    _round(run, 2).write_text(json.dumps(r))
    return _round(run, 2), "documents[0].docid: expected a string, got int"


def f_wrong_type_list(run, outside):
    r = _json(_round(run, 1))
    r["clues"] = "one clue, not a list"
    _round(run, 1).write_text(json.dumps(r))
    return _round(run, 1), "clues: expected a list, got str"


def f_wrong_type_meta(run, outside):
    def edit(m):
        m["rounds"][0]["round"] = "one"

    return _meta(run, edit), "rounds[0].round: expected an integer, got str"


def f_not_an_object(run, outside):
    (run / "meta.json").write_text("[1, 2, 3]")
    return run / "meta.json", "expected a JSON object"


def f_non_utf8(run, outside):
    _round(run, 2).write_bytes(b'{"round": 2, "context": ["caf\xe9 \xff\xfe"]}')
    return _round(run, 2), "not valid UTF-8 (byte 29)"


def f_nested_too_deep(run, outside):
    _round(run, 2).write_text("[" * 200_000 + "]" * 200_000)
    return _round(run, 2), "JSON nested too deeply"


def f_empty_run(run, outside):
    for f in run.iterdir():
        f.unlink()
    return run / "meta.json", "file is missing"


def f_no_rounds(run, outside):
    return _meta(run, lambda m: m.update(rounds=[])), "lists no rounds (an empty run)"


def f_huge_file(run, outside):
    with _round(run, 2).open("r+b") as fh:  # sparse: refused by its size, never read
        fh.truncate(33 * 2**20)
    return _round(run, 2), "file is 33 MiB, above the 32 MiB limit"


def f_symlink_outside(run, outside):
    target = outside / "round.json"
    target.write_text(_round(run, 2).read_text())
    _round(run, 2).unlink()
    _round(run, 2).symlink_to(target)
    return _round(run, 2), "points outside the traces folder (symlink?); refused"


def f_symlinked_question_outside(run, outside):
    moved = outside / run.parent.name
    run.parent.rename(moved)
    run.parent.symlink_to(moved, target_is_directory=True)
    return run / "meta.json", "points outside the traces folder"


def f_listed_round_missing(run, outside):
    _round(run, 3).unlink()
    return _round(run, 3), "file is missing"


def f_round_is_a_folder(run, outside):
    _round(run, 2).unlink()
    _round(run, 2).mkdir()
    return _round(run, 2), "not a regular file"


def f_path_escape(run, outside):
    def edit(m):
        m["rounds"][1]["checkpoint"] = "../../" + m["rounds"][1]["checkpoint"]

    _meta(run, edit)
    return _round(run, 2).parent / "../../round_002.json", "must be a plain file name in the run folder"


def f_absolute_path(run, outside):
    def edit(m):
        m["rounds"][1]["checkpoint"] = "/etc/passwd"

    _meta(run, edit)
    return "/etc/passwd", "checkpoint name '/etc/passwd' must be a plain file name"


def f_round_not_listed(run, outside):
    def edit(m):
        m["rounds"] = [r for r in m["rounds"] if r["round"] != 2]

    return _meta(run, edit), "round 3 is SEARCH but round 2 is not listed"


CHECKPOINT_FAULTS = {
    "checkpoint_" + f.__name__[2:]: f
    for f in (
        f_invalid_json,
        f_invalid_json_round,
        f_empty_file,
        f_missing_field,
        f_wrong_type,
        f_wrong_type_list,
        f_wrong_type_meta,
        f_not_an_object,
        f_non_utf8,
        f_nested_too_deep,
        f_empty_run,
        f_no_rounds,
        f_huge_file,
        f_symlink_outside,
        f_symlinked_question_outside,
        f_listed_round_missing,
        f_round_is_a_folder,
        f_path_escape,
        f_absolute_path,
        f_round_not_listed,
    )
}

# --------------------------------------------------------------------------- corpus lines


def _first_docid(corpus: Path) -> str:
    return json.loads(corpus.open().readline())["docid"]


CORPUS_FAULTS: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "corpus_invalid_line": (lambda c: b'{"docid": "x1", "title": "T",\n', "invalid JSON"),
    "corpus_duplicate_docid": (
        lambda c: json.dumps({"docid": _first_docid(c), "title": "T", "text": "again"}).encode() + b"\n",
        "duplicate docid",
    ),
    "corpus_empty_text": (
        lambda c: b'{"docid": "x2", "title": " ", "text": ""}\n',
        "document has no title and no text",
    ),
    "corpus_non_utf8_line": (lambda c: b'{"docid": "x3", "title": "caf\xe9", "text": "t"}\n', "not valid UTF-8"),
    "corpus_missing_docid": (lambda c: b'{"title": "T", "text": "no id"}\n', "field 'docid' must be a string"),
    "corpus_empty_docid": (lambda c: b'{"docid": "  ", "title": "T", "text": "t"}\n', "field 'docid' is empty"),
    "corpus_not_an_object": (lambda c: b'["docid", "title"]\n', "expected a JSON object"),
}


def damage(tmp_path: Path, names: list[str]) -> tuple[Path, Path, list[tuple[str, str]]]:
    """A copy of the tiny world with the named faults; returns (checkpoints, corpus, [(where, reason)])."""
    ckpts, corpus = tiny_world(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    questions = sorted(p for p in ckpts.iterdir())
    expected = []
    for name, qdir in zip([n for n in names if n in CHECKPOINT_FAULTS], questions):
        where, reason = CHECKPOINT_FAULTS[name](qdir / "run_001", outside)
        expected.append((str(where), reason))
    lines = corpus.read_bytes().count(b"\n")
    with corpus.open("ab") as fh:
        for name in [n for n in names if n in CORPUS_FAULTS]:
            make, reason = CORPUS_FAULTS[name]
            fh.write(make(corpus))
            lines += 1
            expected.append((f"{corpus}:{lines}", reason))
    return ckpts, corpus, expected


def data_sets(ckpts: Path, corpus: Path, tmp_path: Path) -> list[str]:
    return [
        *SETS,
        "--set",
        f"data.traces={ckpts}",
        "--set",
        f"data.corpus={corpus}",
        "--set",
        f"train.output_dir={tmp_path / 'runs'}",
        "--set",
        "train.max_steps=1",
    ]


ALL_FAULTS = [*CHECKPOINT_FAULTS, *CORPUS_FAULTS]


@pytest.mark.parametrize("fault", ALL_FAULTS)
def test_strict_stops_at_the_bad_file_in_one_line(fault, tmp_path, capsys, monkeypatch):
    ckpts, corpus, [(where, reason)] = damage(tmp_path, [fault])
    code, out = main_in_process(
        ["train", "--headless", "--strict", *data_sets(ckpts, corpus, tmp_path)], capsys, monkeypatch
    )
    assert code == 2, out
    line = assert_one_error_line(out, reason, "--strict stops at the first malformed input")
    if fault not in ("checkpoint_path_escape", "checkpoint_absolute_path"):
        assert where in line, (where, line)


def test_default_skips_and_counts_every_bad_input(tmp_path):
    """All faults at once: the loader names each (file, reason) once; training runs past them.

    The data folder's path reads like console markup (`[/q]`, `[bold]`): it once crashed the
    headless progress display (rich took it for a closing tag) and is now printed as it is."""
    ckpts, corpus, expected = damage(tmp_path, ALL_FAULTS)
    odd = tmp_path / "data[" / "q] [bold]"
    odd.parent.mkdir()
    ckpts.rename(odd)
    expected = [(where.replace(str(ckpts), str(odd)), reason) for where, reason in expected]
    ckpts = odd
    cfg = load_config(None, [*TINY_OVERRIDES, f"data.traces={ckpts}", f"data.corpus={corpus}"])
    issues = [str(i) for i in load_dataset(cfg).issues.issues]
    assert len(issues) == len(expected) == len(ALL_FAULTS), issues
    for where, reason in expected:
        hits = [i for i in issues if reason in i and (where in i or where in ("/etc/passwd",))]
        if not hits:  # a path that escapes is named as the meta.json lists it
            hits = [i for i in issues if reason in i]
        assert len(hits) == 1, (where, reason, issues)

    # The real CLI, in a subprocess: each skipped input on one line, the total, and a trained step.
    code, out = run_cli(
        "train",
        "--headless",
        *data_sets(ckpts, corpus, tmp_path),
        "--set",
        "train.run_name=r",
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80", "PYTHONPATH": str(Path(__file__).parents[2]), "OMP_NUM_THREADS": "1"},
    )
    assert code == 0, out
    assert "Traceback" not in out and "error:" not in out
    warnings = [line for line in out.splitlines() if line.startswith("warning: skipped ")]
    assert len(warnings) == 20  # the first 20 are shown, then a count
    for line in warnings:
        assert re.match(r"warning: skipped \S.*: .+", line) and line.removeprefix("warning: skipped ") in issues
    assert f"... and {len(expected) - 20} more malformed inputs skipped" in out
    assert f"warning: {len(expected)} malformed inputs skipped in all" in out
    assert "run completed at step 1" in out


def test_a_corpus_with_no_valid_document_stops_in_one_line(tmp_path, capsys, monkeypatch):
    ckpts, corpus = tiny_world(tmp_path)
    corpus.write_bytes(b'{"docid": "", "title": "", "text": ""}\n{oops\n')
    code, out = main_in_process(["train", "--headless", *data_sets(ckpts, corpus, tmp_path)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, str(corpus), "corpus holds no valid documents")


def test_a_checkpoints_folder_with_nothing_usable_stops_in_one_line(tmp_path, capsys, monkeypatch):
    ckpts, corpus = tiny_world(tmp_path)
    for meta in ckpts.glob("*/run_001/meta.json"):
        meta.write_text("{}")
    code, out = main_in_process(["train", "--headless", *data_sets(ckpts, corpus, tmp_path)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, str(ckpts), "no usable SEARCH-round states (24 malformed files")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = main_in_process(["train", "--headless", *data_sets(empty, corpus, tmp_path)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, str(empty), "no usable SEARCH-round states (0 malformed files")
