"""The demo world generator and the baseline multi-agent pass."""

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
