"""`collect` on slices of the real question sets: checkpoints the loader reads back, resumable,
deterministic; and the `collect` command."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

import searchgrpo.cli as cli
from searchgrpo.data.corpus import load_corpus
from searchgrpo.data.questions import load_questions, write_questions
from searchgrpo.data.states import load_states
from searchgrpo.episodes.collect import collect_to_folder
from searchgrpo.errors import UserError
from tests.helpers import ROOT
from tests.helpers.tiny import tiny_config

SHARED = ROOT.parent / "shared" / "data"
SETS = ["hotpotqa.jsonl", "2wikimultihopqa.jsonl"]


def shared_slice(name: str, tmp_path: Path, n: int = 4) -> Path:
    source = SHARED / name
    if not source.is_file():
        pytest.skip(f"{source} is not here (the shared data sets sit beside the repository)")
    out = tmp_path / f"slice-{name}"
    write_questions(out, load_questions(source)[:n])
    return out


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*.json"))}


@pytest.mark.parametrize("name", SETS)
def test_collect_a_shared_slice_then_load_it_back(name, tmp_path):
    source = shared_slice(name, tmp_path)
    records = load_questions(source)
    cfg = tiny_config(tmp_path)
    result = collect_to_folder(cfg, str(source), tmp_path / "out")
    assert result.stats.written == 4 and result.stats.states > 0

    corpus = load_corpus(result.corpus)
    assert len(corpus) == len({d.docid for r in records for d in r.docs})
    loaded = load_states(result.traces)
    assert not loaded.issues.issues
    assert sorted(loaded.question_ids) == sorted(r.id for r in records)
    for state in loaded.states:
        assert all(d.docid in corpus for d in state.before.documents)
        assert set(loaded.labels[state.question_id].important) >= {
            d for r in records if r.id == state.question_id for d in r.gold
        }

    # Deterministic: the same set collected elsewhere gives the same files.
    again = collect_to_folder(cfg, str(source), tmp_path / "again")
    assert tree(again.traces) == tree(result.traces)

    # Resumable: finished questions are skipped; an unfinished one is played again.
    meta = next(result.traces.glob("*/run_001/meta.json"))
    meta.unlink()
    resumed = collect_to_folder(cfg, str(source), tmp_path / "out")
    assert (resumed.stats.written, resumed.stats.skipped_existing) == (1, 3)
    assert tree(resumed.traces) == tree(again.traces)


def test_limit_keeps_the_whole_corpus_and_another_source_is_refused(tmp_path):
    source = shared_slice(SETS[1], tmp_path)
    cfg = tiny_config(tmp_path)
    first = collect_to_folder(cfg, str(source), tmp_path / "out", limit=1)
    assert first.stats.written == 1
    corpus_size = len(load_corpus(first.corpus))
    more = collect_to_folder(cfg, str(source), tmp_path / "out", limit=3)
    assert (more.stats.written, more.stats.skipped_existing) == (2, 1)
    assert len(load_corpus(more.corpus)) == corpus_size
    with pytest.raises(UserError, match="choose another --out"):
        collect_to_folder(cfg, "demo", tmp_path / "out")
    # A copy of the same file elsewhere is the same source (the question-set cache is keyed by content).
    copy = tmp_path / "elsewhere" / source.name
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())
    assert collect_to_folder(cfg, str(copy), tmp_path / "out", limit=3).stats.skipped_existing == 3
    other = tmp_path / "elsewhere" / "other.jsonl"
    other.write_bytes(source.read_bytes() + b"\n")  # another file, another content
    with pytest.raises(UserError, match="choose another --out"):
        collect_to_folder(cfg, str(other), tmp_path / "out")


def test_the_base_policy_is_asked_and_the_rule_steps_in_when_it_writes_no_clue(tmp_path):
    # The tiny random model's greedy completion holds no clue (only newlines), so each SEARCH
    # round falls back to the rule's clues, and says so.
    source = shared_slice(SETS[0], tmp_path, n=1)
    cfg = tiny_config(tmp_path)
    result = collect_to_folder(cfg, str(source), tmp_path / "out", executor="policy", max_rounds=2)
    rule = collect_to_folder(cfg, str(source), tmp_path / "rule", max_rounds=2)
    assert result.fallbacks == {"executor": 1}
    assert tree(result.traces) == tree(rule.traces)


def test_collect_command_then_train_on_its_output(tmp_path):
    source = shared_slice(SETS[1], tmp_path, n=6)
    out = tmp_path / "collected"
    result = CliRunner().invoke(cli.app, ["collect", "--questions", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "6 questions collected" in result.output
    assert f"data.traces={out / 'traces'}" in result.output
    from searchgrpo.train.trainer import Trainer

    cfg = tiny_config(
        tmp_path,
        f"data.corpus={out / 'corpus.jsonl'}",
        f"data.traces={out / 'traces'}",
        "train.max_steps=1",
        "data.eval_fraction=0.2",
    )
    summary = Trainer(cfg).train()
    assert summary.step == 1 and summary.reason == "completed"
