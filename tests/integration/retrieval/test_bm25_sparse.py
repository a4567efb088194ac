"""The bm25 sparse tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/retrieval/test_bm25_sparse.py`."""

from searchgrpo.retrieval.search import (
    BM25Search,
    SparseBM25Search,
)
from tests.unit.retrieval.test_bm25_sparse import assert_same_scores, demo_corpus, realistic_queries  # noqa: F401  (helpers and fixtures of the quick tier)


def test_search_matches_rank_bm25_on_the_demo_world(demo_corpus):  # noqa: F811  (the fixture imported above)
    ref, fast = BM25Search(demo_corpus), SparseBM25Search(demo_corpus)
    for q in realistic_queries(demo_corpus, 40):
        assert_same_scores(fast.scores(q), ref.scores(q))
        for k in (1, 5, 10):
            assert fast.search(q, k) == ref.search(q, k), (q, k)
    assert fast.search_many(["the the the", "Orvane"], 3) == ref.search_many(["the the the", "Orvane"], 3)
