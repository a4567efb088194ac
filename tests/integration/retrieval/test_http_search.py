"""The http search tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/retrieval/test_http_search.py`."""

from __future__ import annotations

import json

from searchgrpo.data.corpus import Corpus, load_corpus
from searchgrpo.retrieval.search_server import serve_corpus
from tests.helpers.tiny import tiny_config
from tests.unit.retrieval.test_http_search import world  # noqa: F401  (helpers and fixtures of the quick tier)


def test_a_training_step_through_the_search_api_equals_one_through_bm25(tmp_path, world):  # noqa: F811  (the fixture imported above)
    from searchgrpo.events import StepFinished
    from searchgrpo.train.trainer import Trainer

    _, ds = world

    def one_step(*extra):
        events = []
        Trainer(tiny_config(tmp_path, "train.max_steps=1", *extra), sink=events.append).train()
        (step,) = [e for e in events if isinstance(e, StepFinished)]
        return {k: v for k, v in step.metrics.items() if not k.startswith(("time/", "perf/", "checker/time", "mem"))}

    bm25 = one_step("train.run_name=bm25")
    with serve_corpus(ds.corpus) as server:
        http = one_step("train.run_name=http", "retrieval.backend=http", f"retrieval.url={server.url}")
    assert http == bm25


def test_collect_plays_episodes_through_the_search_api_and_keeps_its_documents(tmp_path, world):  # noqa: F811  (the fixture imported above)
    """The multi-agent loop searches through the interface; documents only the API knows are
    added to the collected corpus, so the traces and the corpus belong together."""
    from searchgrpo.data.demo_world import generate_world
    from searchgrpo.data.questions import write_questions
    from searchgrpo.episodes.collect import collect_to_folder

    cfg, _ = world
    wide = generate_world(6, 30, seed=3)
    questions = tmp_path / "questions.jsonl"
    write_questions(questions, wide.questions)
    extra = generate_world(6, 30, seed=4).documents  # more documents, in the search index only
    with serve_corpus(Corpus([*wide.documents, *extra], source="index")) as server:
        http_cfg = cfg.replace(**{"retrieval.backend": "http", "retrieval.url": server.url})
        result = collect_to_folder(http_cfg, str(questions), tmp_path / "out")
    corpus = load_corpus(result.corpus)
    assert result.stats and len(corpus) > len({d.docid for d in wide.documents})
    traced = {
        d
        for meta in (tmp_path / "out" / "traces").rglob("round_*.json")
        for d in json.loads(meta.read_text())["discovered_docids"]
    }
    assert traced and traced <= {d.docid for d in corpus}  # every document the traces found is in the corpus
