"""Caches and collected folders stay true, and hostile text stays text.

The verdict cache answers only for the document as it is now (and the prompt as it is worded);
`collect` into a folder whose question set grew rewrites its corpus and `check` verifies every gold
document is in it; an over-long question id, or a JSONL line over the cap, costs that question or
line alone; text from data (questions, titles, paths) is printed as text, never as markup or
terminal escapes.
"""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path

import searchgrpo.agents.llm_checker as llm_checker
import searchgrpo.jsonl as jsonl
from searchgrpo.agents.chat_client import ChatClient
from searchgrpo.agents.checker import CheckRequest
from searchgrpo.agents.llm_checker import LLMChecker
from searchgrpo.agents.verdict_cache import VerdictCache
from searchgrpo.data.corpus import load_corpus
from searchgrpo.errors import IssueLog
from tests.helpers.faults import FaultServer, assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS

HOSTILE = "Who founded [bold red]Acme[/] \x1b[31mCorp\x1b[0m\r?"


def question(qid: str, n: int, text: str | None = None) -> dict:
    return {
        "id": qid,
        "question": text or f"Who founded firm {n}?",
        "answers": ["Ada"],
        "docs": [
            {"docid": f"gold{n}", "title": f"Firm {n}", "text": f"Firm {n} was founded by Ada Lovelace.", "gold": True},
            {"docid": f"other{n}", "title": "Ada Lovelace", "text": "Ada Lovelace was born in London."},
        ],
    }


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_an_edited_document_is_labelled_again(tmp_path):
    request = CheckRequest("q1", "Who founded X?", ("find the founder",), "d1", "X Corp", "X was founded by Ada.")
    edited = CheckRequest("q1", "Who founded X?", ("find the founder",), "d1", "X Corp", "X was founded by Bob.")
    with FaultServer() as server:

        def checker() -> LLMChecker:
            return LLMChecker(
                ChatClient(server.url),
                server.model,
                structured_output="none",
                cache=VerdictCache(tmp_path / "v.sqlite"),
            )

        for req in (request, request, edited, edited):
            c = checker()
            c.check([req])
            c.close()
        assert len(server.chat_requests()) == 2  # the original once, the edited text once more
        c = checker()
        c.check([dataclasses.replace(request, text=" X was  founded by Ada. ")])  # the same text as shown: a hit
        c.close()
        assert len(server.chat_requests()) == 2


def test_a_reworded_prompt_never_reads_old_verdicts(monkeypatch):
    before = llm_checker._prompt_id()
    monkeypatch.setattr(llm_checker, "SYSTEM_PROMPT", llm_checker.SYSTEM_PROMPT + " Be strict.")
    after = llm_checker._prompt_id()
    assert before != after and before.split(":")[0] == after.split(":")[0] == llm_checker.PROMPT_VERSION


def test_collect_after_the_question_set_grew_rewrites_the_corpus_and_check_verifies_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")  # check's table on one line per row
    source = write(tmp_path / "q.jsonl", [question("q1", 1), question("q2", 2)])
    out = tmp_path / "out"
    assert (
        main_in_process(["collect", "--questions", str(source), "--out", str(out), *SETS], capsys, monkeypatch)[0] == 0
    )
    write(source, [question("q1", 1), question("q2", 2), question("q3", 3)])  # the set grew
    code, text = main_in_process(["collect", "--questions", str(source), "--out", str(out), *SETS], capsys, monkeypatch)
    assert code == 0, text
    assert f"{out / 'corpus.jsonl'}: rewritten for the question set as it is now (2 documents added" in text
    assert {"gold1", "gold2", "gold3"} <= {d.docid for d in load_corpus(out / "corpus.jsonl")}
    data = [
        "--set",
        f"data.traces={out / 'traces'}",
        "--set",
        f"data.corpus={out / 'corpus.jsonl'}",
        "--set",
        "data.eval_fraction=0",
        "--set",
        "train.states_per_step=1",
    ]
    code, text = main_in_process(["check", "--no-model", *SETS, *data], capsys, monkeypatch)
    assert code == 0, text
    assert "all 3 IMPORTANT documents the traces name are in the corpus" in " ".join(text.split())
    corpus = out / "corpus.jsonl"  # a corpus that lost a gold document: check names it
    corpus.write_text("".join(line + "\n" for line in corpus.read_text().splitlines() if '"gold3"' not in line))
    code, text = main_in_process(["check", "--no-model", *SETS, *data], capsys, monkeypatch)
    flat = " ".join(text.split())
    assert code == 1 and "gold in corpus" in flat and "1 of 3 IMPORTANT documents" in flat and "'gold3'" in flat


def test_an_over_long_question_id_costs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    long_a, long_b = "a" * 5000, "a" * 4999 + "b"  # past any file name limit, and alike for 4,999 characters
    source = write(tmp_path / "q.jsonl", [question(long_a, 1), question(long_b, 2), question("short", 3)])
    code, text = main_in_process(["collect", "--questions", str(source), "--out", "out", *SETS], capsys, monkeypatch)
    assert code == 0, text
    assert "3 questions collected" in text
    metas = {
        json.loads(p.read_text())["question_id"]: p for p in (tmp_path / "out" / "traces").glob("*/run_001/meta.json")
    }
    assert set(metas) == {long_a, long_b, "short"}
    assert all(len(p.parent.parent.name.encode()) <= 120 for p in metas.values())


def test_an_over_long_line_is_skipped_without_being_read_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1 << 20)
    huge = json.dumps({"docid": "huge", "title": "t", "text": "x" * (8 << 20)})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"docid": "a", "title": "A", "text": "alpha"})
        + "\n"
        + huge
        + "\n"
        + json.dumps({"docid": "b", "title": "B", "text": "beta"})
        + "\n"
    )
    issues = IssueLog()
    tracemalloc.start()
    docs = load_corpus(corpus, issues)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [d.docid for d in docs] == ["a", "b"]
    assert [str(i) for i in issues.issues] == [f"{corpus}:2: line of 8.0 MiB, above the 1 MiB limit; skipped"]
    assert peak < 4 << 20, peak  # an 8 MiB line, never held whole
    source = write(tmp_path / "q.jsonl", [question("q1", 1)])
    with source.open("a") as fh:
        fh.write(json.dumps(question("q2", 2, text="y" * (2 << 20))) + "\n")
    code, text = main_in_process(["collect", "--questions", str(source), "--out", "out", *SETS], capsys, monkeypatch)
    assert code == 0 and f"warning: skipped {source}:2: line of 2.0 MiB, above the 1 MiB limit; skipped" in text
    code, text = main_in_process(
        ["collect", "--questions", str(source), "--out", "out2", "--strict", *SETS], capsys, monkeypatch
    )
    assert code == 2
    assert_one_error_line(text, f"{source}:2: line of 2.0 MiB")


def test_text_from_data_is_printed_as_text(tmp_path, capsys, monkeypatch):
    """A question and a folder name that hold rich markup, colour escapes and a carriage return:
    eval's tables, check's table and collect's warnings show them escaped, never acted on."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")
    folder = tmp_path / "data[bold]\x1b[2J"
    folder.mkdir()
    source = write(folder / "q.jsonl", [question("q1", 1, text=HOSTILE), question("q2", 2)])
    with source.open("a") as fh:
        fh.write("{not json\n")
    outputs = []
    code, text = main_in_process(
        ["collect", "--questions", str(source), "--out", str(folder / "out"), *SETS], capsys, monkeypatch
    )
    assert code == 0, text
    outputs.append(text)
    data = [
        "--set",
        f"data.traces={folder / 'out' / 'traces'}",
        "--set",
        f"data.corpus={folder / 'out' / 'corpus.jsonl'}",
        "--set",
        "data.eval_fraction=0",
        "--set",
        "train.states_per_step=1",
    ]
    code, text = main_in_process(["check", "--no-model", *SETS, *data], capsys, monkeypatch)
    outputs.append(text)
    code, text = main_in_process(
        ["eval", "--baseline", "--questions", str(source), "--limit", "2", *SETS, "--output", "report.json"],
        capsys,
        monkeypatch,
    )
    assert code == 0, text
    outputs.append(text)
    for text in outputs:
        assert "\x1b" not in text and "\r" not in text, repr(text[:300])
    assert "\\x1b[2J" in outputs[0] and "[bold]" in " ".join(outputs[1].split())
    assert "[bold red]Acme[/]" in outputs[2] and "\\x1b[31mCorp" in outputs[2]
