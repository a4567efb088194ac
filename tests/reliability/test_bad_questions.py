"""Bad question sets: every kind of damage to a question file gives one line naming the file, the line and
the reason; `collect` skips and counts them, `--strict` stops with exit 2, and `eval` reports them.
Never a crash, never a traceback (the checkpoint and corpus faults: `test_bad_data.py`)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS

# --------------------------------------------------------------------------- question sets


def _question(qid: str, gold: object = True, **extra) -> dict:
    return {
        "id": qid,
        "question": f"Who founded {qid}?",
        "answers": ["x"],
        "docs": [
            {"docid": f"{qid}-d1", "title": f"{qid} Corp", "text": f"{qid} was founded by Ada.", "gold": gold},
            {"docid": f"{qid}-d2", "title": "Ada", "text": "Ada was born in Paris."},
        ],
        **extra,
    }


QUESTION_FAULTS: dict[str, tuple[bytes, str]] = {
    "missing_gold": (json.dumps(_question("q-nogold", gold=False)).encode(), "no gold (evidence) document"),
    "gold_not_bool": (json.dumps(_question("q-goldstr", gold="yes")).encode(), "docs[0].gold must be true or false"),
    "missing_id": (
        json.dumps({k: v for k, v in _question("q-noid").items() if k != "id"}).encode(),
        "field 'id' must be a non-empty string",
    ),
    "docs_not_a_list": (json.dumps({**_question("q-docs"), "docs": "none"}).encode(), "field 'docs' must be a list"),
    "bad_doc": (
        json.dumps({**_question("q-baddoc"), "docs": [{"docid": 3, "title": "t", "text": "t"}]}).encode(),
        "docs[0]: field 'docid' must be a string",
    ),
    "duplicate_id": (json.dumps(_question("q1")).encode(), "duplicate question id 'q1'"),
    "invalid_json": (b'{"id": "q-x", "question": ', "invalid JSON"),
    "non_utf8": (b'{"id": "q-\xff", "question": "?"}', "not valid UTF-8"),
}


def question_set(tmp_path: Path, faults: list[str]) -> tuple[Path, list[tuple[str, str]]]:
    path = tmp_path / "questions.jsonl"
    lines = [json.dumps(_question(f"q{i}")).encode() for i in range(1, 4)]
    expected = []
    for name in faults:
        line, reason = QUESTION_FAULTS[name]
        lines.append(line)
        expected.append((f"{path}:{len(lines)}", reason))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, expected


def test_question_set_faults_are_reported_by_collect_and_strict_stops(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, expected = question_set(tmp_path, list(QUESTION_FAULTS))
    code, out = main_in_process(
        ["collect", "--questions", str(path), "--out", str(tmp_path / "out"), "--set", "model.base=tiny"],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    assert "Traceback" not in out
    for where, reason in expected:
        assert (
            sum(1 for line in out.splitlines() if line.startswith(f"warning: skipped {where}: ") and reason in line)
            == 1
        ), (where, out)
    assert f"warning: {len(expected)} malformed lines skipped" in out
    assert "3 questions collected" in out

    for name in QUESTION_FAULTS:
        one, [(where, reason)] = question_set(tmp_path, [name])
        code, out = main_in_process(
            ["collect", "--strict", "--questions", str(one), "--out", str(tmp_path / f"strict-{name}")],
            capsys,
            monkeypatch,
        )
        assert code == 2, out
        assert_one_error_line(out, where, reason)
        assert not (tmp_path / f"strict-{name}").exists()  # nothing written before the data was read


def test_eval_on_a_question_set_reports_its_bad_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, expected = question_set(tmp_path, ["missing_gold", "invalid_json"])
    code, out = main_in_process(
        [
            "eval",
            "--baseline",
            "--questions",
            str(path),
            "--limit",
            "1",
            *SETS,
            "--output",
            str(tmp_path / "report.json"),
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    for where, reason in expected:
        assert any(line.startswith(f"warning: skipped {where}: {reason}") for line in out.splitlines()), out
    assert "warning: 2 malformed inputs skipped in all" in out
    assert (tmp_path / "report.json").is_file()
