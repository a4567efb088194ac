"""The demo world generator and the baseline multi-agent pass."""

import os
from pathlib import Path

import pytest

from searchgrpo import fileio
from searchgrpo.config import DemoConfig
from searchgrpo.data.demo_world import generate_corpus, generate_world
from searchgrpo.data.states import load_states
from searchgrpo.retrieval.search import tokenize
from searchgrpo.world import build_demo


def test_world_is_deterministic_and_sized():
    a = generate_world(30, 50, seed=3)
    assert a == generate_world(30, 50, seed=3)
    assert a != generate_world(30, 50, seed=4)
    assert len(a.questions) == 30
    assert len({d.docid for d in a.documents}) == len(a.documents)
    assert len(generate_world(30, 80, seed=3).documents) >= len(a.documents) + 30


def test_questions_are_multi_hop():
    world = generate_world(40, 0, seed=0)
    by_id = {d.docid: d for d in world.documents}
    for q in world.questions:
        gold = [by_id[d] for d in q.gold]
        assert 2 <= len(gold) <= 4
        assert q.sub_goals and q.answers
        # Only the first hop's page is named in the question; the bridge pages are not.
        named = [d for d in gold if d.title.lower() in q.question.lower()]
        assert named and len(named) < len(gold)


def test_scale_corpus_has_exactly_n_unique_documents():
    docs = list(generate_corpus(2500, seed=1))
    assert len(docs) == 2500 and len({d.docid for d in docs}) == 2500
    assert docs == list(generate_corpus(2500, seed=1))


def test_demo_checkpoints_load_back(tmp_path):
    paths = build_demo(tmp_path / "demo", DemoConfig(questions=12, seed=0, distractors=20))
    loaded = load_states(paths.traces)
    assert not loaded.issues.issues
    assert len({s.question_id for s in loaded.states}) == 12
    assert all(len(s.original_clues) >= 2 for s in loaded.states)
    later = [s for s in loaded.states if s.round > 1]
    assert later and all(s.before.entities for s in later)  # the EntityManager filled the table
    # Building again reuses the folder.
    assert build_demo(tmp_path / "demo", DemoConfig(questions=12, seed=0, distractors=20)) == paths
    assert all(tokenize(s.question) for s in loaded.states)


def test_demo_cache_is_keyed_by_the_top_k_its_traces_were_collected_with(tmp_path):
    """Traces collected with top_k=2 are never read by a run with top_k=5 (they were: test order
    decided what a run saw)."""
    from searchgrpo.config import load_config
    from searchgrpo.world import demo_dir

    small, default = (
        load_config(None, [f"paths.cache_root={tmp_path}", "data.demo.questions=4", f"env.top_k={k}"]) for k in (2, 5)
    )
    assert demo_dir(small) != demo_dir(default)
    for cfg in (small, default):
        build_demo(demo_dir(cfg), cfg.data.demo, top_k=cfg.env.top_k)
    found = {
        k: sum(len(s.discovered) for s in load_states(build_demo(demo_dir(c), c.data.demo).traces).states)
        for k, c in ((2, small), (5, default))
    }
    assert found[2] < found[5]


def test_two_runs_building_the_same_world_at_once_both_get_it(tmp_path):
    """Two runs started together on a new machine both build the demo world; the second to finish
    finds the first's folder in place. It used to stop with "cannot write the demo world
    (FileExistsError)" (seen with four demo runs started at once)."""
    target, demo = tmp_path / "demo", DemoConfig(questions=6, seed=0, distractors=5)
    inner = []

    def other_run_finishes_first(done: int, total: int) -> None:
        if not inner:  # while this build is half-way, another builds the same world to the end
            inner.append(build_demo(target, demo))

    paths = build_demo(target, demo, progress=other_run_finishes_first)
    assert inner == [paths]
    assert not load_states(paths.traces).issues.issues
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]  # the loser's temporary folder is gone


@pytest.mark.parametrize("first_wins", [False, True])
def test_a_folder_renamed_into_place_meanwhile_is_finished_first_not_a_failure(first_wins, tmp_path, monkeypatch):
    """Between atomic_dir's look at the target and its rename, another process may rename its own
    copy there: the kernel's ENOTEMPTY must reach the caller as FileExistsError, or, for a cache
    (`first_wins`), leave the other's folder in place with no error."""
    target, real_replace = tmp_path / "cache", os.replace

    def another_process_renames_first(src, dst):
        if Path(dst) == target and not target.exists():
            target.mkdir()
            (target / "theirs").write_text("x")
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "replace", another_process_renames_first)
    if first_wins:
        with fileio.atomic_dir(target, first_wins=True) as tmp:
            (tmp / "ours").write_text("y")
    else:
        with pytest.raises(FileExistsError), fileio.atomic_dir(target) as tmp:
            (tmp / "ours").write_text("y")
    assert [p.name for p in target.iterdir()] == ["theirs"] and [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_first_wins_keeps_a_finished_folder_but_hides_no_error_of_the_body(tmp_path):
    """A cache folder another writer finished is kept as it is; a FileExistsError raised by the
    body itself (its own bug, not a race) still reaches the caller, and nothing is left behind."""
    target = tmp_path / "cache"
    target.mkdir()
    (target / "theirs").write_text("x")
    with fileio.atomic_dir(target, first_wins=True, overwrite=True) as tmp:
        (tmp / "ours").write_text("y")
    assert [p.name for p in target.iterdir()] == ["theirs"]
    with pytest.raises(FileExistsError, match="made twice"), fileio.atomic_dir(tmp_path / "new", first_wins=True):
        raise FileExistsError("made twice")
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]
