"""The sparse BM25 backend: rank-bm25's exact scores and rankings, top-k selection, the disk cache."""

import random
import typing
import zipfile

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from searchgrpo.config import EnvConfig, cache_root
from searchgrpo.data.corpus import Corpus, Document, load_corpus, write_corpus
from searchgrpo.data.demo_world import generate_corpus, generate_world
from searchgrpo.retrieval.bm25_index import BM25Params, build_index, load_index, term_rows, top_k_indices
from searchgrpo.retrieval.search import (
    BACKENDS,
    BM25Search,
    SparseBM25Search,
    index_meta,
    index_path,
    load_or_build_index,
    search_for_corpus,
    tokenize,
)
from searchgrpo.world import load_dataset, make_retriever


def random_corpus(seed: int, n_docs: int, vocab_size: int) -> list[list[str]]:
    """Zipf-like token lists: a few words are in most documents (negative idf), many are rare."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab_size)]
    weights = [1 / (i + 1) for i in range(vocab_size)]
    return [rng.choices(words, weights, k=rng.randrange(0, 30)) for _ in range(n_docs)]


def random_queries(seed: int, docs: list[list[str]], n: int) -> list[list[str]]:
    rng = random.Random(seed)
    vocab = sorted({t for d in docs for t in d})
    queries = [[], ["unknown"], [vocab[0]], [vocab[0], vocab[0]]]  # empty, unknown, most common (repeated)
    for _ in range(n):
        q = rng.choices(vocab, k=rng.randrange(1, 8))
        q += rng.sample(q, rng.randrange(0, len(q) + 1))  # repeated query tokens count again
        rng.shuffle(q)
        queries.append(q + ["zzz-unknown"] * rng.randrange(2))
    return queries


def assert_same_scores(ours: np.ndarray, ref: np.ndarray) -> None:
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=0)
    # The design's stronger promise, which makes rankings and tie order identical: the same floats.
    assert np.array_equal(ours, ref)


@pytest.mark.parametrize(
    "seed, n_docs, vocab_size",
    [(0, 50, 20), (1, 300, 200), pytest.param(2, 1000, 3000, marks=pytest.mark.slow), (3, 7, 4)],
)
def test_scores_equal_rank_bm25_on_random_corpora(seed, n_docs, vocab_size):
    docs = random_corpus(seed, n_docs, vocab_size)
    ref = BM25Okapi(docs)
    index = build_index(docs)
    assert max(sum(t in set(d) for d in docs) for t in ref.idf) > n_docs / 2  # the epsilon floor is used
    for q in random_queries(seed, docs, 60):
        assert_same_scores(index.scores(q), ref.get_scores(q))


def test_scores_equal_rank_bm25_with_other_parameters():
    docs = random_corpus(4, 200, 100)
    ref = BM25Okapi(docs, k1=0.9, b=0.4, epsilon=0.5)
    index = build_index(docs, BM25Params(k1=0.9, b=0.4, epsilon=0.5))
    for q in random_queries(4, docs, 30):
        assert_same_scores(index.scores(q), ref.get_scores(q))


def test_terms_in_every_document_and_a_negative_average_idf():
    # Every term but "c" is in all documents: their idf and the average idf are negative, so the
    # epsilon floor is itself negative and matching documents can score below zero.
    docs = [["a", "b"], ["a", "b", "b"], ["a", "b", "c"], ["a", "b", "a"]]
    ref = BM25Okapi(docs)
    assert ref.average_idf < 0
    index = build_index(docs)
    for q in (["a"], ["b", "b"], ["c"], ["a", "c", "a"], ["c", "b"]):
        assert_same_scores(index.scores(q), ref.get_scores(q))
    corpus = Corpus([Document(f"d{i}", "", " ".join(d)) for i, d in enumerate(docs)])
    assert SparseBM25Search(corpus).search("a b", 4) == BM25Search(corpus).search("a b", 4) == []


def test_term_rows_counts_each_term_per_document_by_hand():
    # Documents [0 0 1], [], [1 2 1 1], [0]: term 0 is twice in d0 and once in d3, term 1 once in d0
    # and three times in d2, term 2 once in d2, term 3 nowhere (an empty row).
    tokens = np.array([0, 0, 1, 1, 2, 1, 1, 0], dtype=np.intc)
    indptr, docs, tf = term_rows(tokens, np.array([3, 0, 4, 1], dtype=np.int64), n_terms=4)
    assert indptr.tolist() == [0, 2, 4, 5, 5] and indptr.dtype == np.int64
    assert docs.tolist() == [0, 3, 0, 2, 2] and docs.dtype == np.int32
    assert tf.tolist() == [2.0, 1.0, 1.0, 3.0, 1.0] and tf.dtype == np.float64


def test_documents_without_tokens_and_an_empty_corpus():
    docs = [[], ["x", "y"], [], ["y"]]
    assert_same_scores(build_index(docs).scores(["y", "x"]), BM25Okapi(docs).get_scores(["y", "x"]))
    empty = build_index([])
    assert empty.n_docs == 0 and empty.scores(["x"]).shape == (0,)
    assert SparseBM25Search(Corpus([])).search("x", 3) == BM25Search(Corpus([])).search("x", 3) == []


@pytest.fixture(scope="module")
def demo_corpus() -> Corpus:
    return Corpus(generate_corpus(3000, seed=1))


def realistic_queries(corpus: Corpus, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        doc = rng.choice(corpus.documents)
        words = tokenize(doc.text)
        out.append(f"{doc.title} {' '.join(rng.sample(words, min(2, len(words))))}")
        out.append(f"In which city was the founder of {doc.title} born?")
    return [*out, "", "   ", "!!!", "unknownword", "the the the", "in is a the of"]


def test_the_demo_world_questions_retrieve_the_same_documents():
    world = generate_world(30, 60, seed=2)
    corpus = Corpus(world.documents)
    ref, fast = BM25Search(corpus), SparseBM25Search(corpus)
    for q in world.questions:
        assert fast.search(q.question, 10) == ref.search(q.question, 10)
        for goal in q.sub_goals:
            assert fast.search(goal, 5) == ref.search(goal, 5)


def test_ties_go_to_the_earlier_document():
    # Identical documents score identically; the earlier one must come first, as in the reference.
    docs = [Document(f"d{i}", "Orvane", "Orvane is a river city.") for i in range(6)]
    docs[3] = Document("d3", "Other", "Another city.")
    docs += [Document(f"x{i}", f"Unrelated {i}", "Nothing to see here.") for i in range(8)]
    corpus = Corpus(docs)
    hits = SparseBM25Search(corpus).search("orvane city", 4)
    assert [h.docid for h in hits] == ["d0", "d1", "d2", "d4"]
    assert hits == BM25Search(corpus).search("orvane city", 4)
    assert len({h.score for h in hits}) == 1


def reference_top_k(scores: np.ndarray, k: int) -> list[int]:
    positive = np.flatnonzero(scores > 0)
    return positive[np.lexsort((positive, -scores[positive]))][:k].tolist()


@pytest.mark.parametrize("n", [0, 1, 7, 1024, 5000, 70_001])
def test_top_k_selection_with_many_ties(n):
    rng = np.random.default_rng(n)
    for levels in (3, 50, 10_000):
        scores = rng.integers(-2, levels, size=n) / 7.0  # many exact ties, zeros and negatives
        for k in (0, 1, 5, 10, 200, n + 3):
            assert top_k_indices(scores, k).tolist() == reference_top_k(scores, k), (levels, k)


def test_top_k_selection_when_few_scores_are_positive():
    scores = np.zeros(50_000)
    scores[[40_000, 7, 30_123]] = [0.5, 0.5, 2.0]
    assert top_k_indices(scores, 10).tolist() == [30_123, 7, 40_000]
    assert top_k_indices(np.full(5000, 3.0), 3).tolist() == [0, 1, 2]


# --------------------------------------------------------------------------- the disk cache

DOCS = [
    Document("d0", "Krallo Systems", "Krallo Systems is a software company founded by Maren Dolvik."),
    Document("d1", "Maren Dolvik", "Maren Dolvik was born in Orvane and studied law."),
    Document("d2", "Orvane", "Orvane is a river city."),
    Document("d3", "Orvane Jazz Festival", "The festival is held in Orvane."),
]


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, DOCS)
    return path


def assert_same_index(a, b):
    assert a.vocab == b.vocab and a.n_docs == b.n_docs
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
        assert getattr(a, name).dtype == getattr(b, name).dtype


def test_index_cache_round_trip(corpus_file, tmp_path):
    corpus = load_corpus(corpus_file)
    built, how = load_or_build_index(corpus, tmp_path / "indexes")
    assert how == "built"
    loaded, how = load_or_build_index(load_corpus(corpus_file), tmp_path / "indexes")
    assert how == "loaded"
    assert_same_index(built, loaded)
    assert list((tmp_path / "indexes").iterdir()) == [index_path(tmp_path / "indexes", corpus)]
    assert SparseBM25Search(corpus, loaded).search("Orvane", 3) == BM25Search(corpus).search("Orvane", 3)


def test_a_changed_corpus_file_replaces_its_index(corpus_file, tmp_path):
    load_or_build_index(load_corpus(corpus_file), tmp_path / "indexes")
    write_corpus(corpus_file, [*DOCS, Document("d4", "Orvane", "More about Orvane.")])
    corpus = load_corpus(corpus_file)
    index, how = load_or_build_index(corpus, tmp_path / "indexes")
    assert how.startswith("rebuilt") and index.n_docs == 5
    assert len(list((tmp_path / "indexes").iterdir())) == 1


def damage_truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def damage_flip_a_weight_byte(path):
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("data.npy")
    data = bytearray(path.read_bytes())
    at = info.header_offset
    payload = (
        at + 30 + int.from_bytes(data[at + 26 : at + 28], "little") + int.from_bytes(data[at + 28 : at + 30], "little")
    )
    data[payload + info.compress_size - 1] ^= 0x01  # one weight changes a little: only the zip's CRC can tell
    path.write_bytes(bytes(data))


def damage_inconsistent_arrays(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = dict(npz)
    arrays["indptr"] = arrays["indptr"][::-1].copy()
    np.savez(path, **arrays)


def damage_pickled_object(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = dict(npz)
    arrays["data"] = np.array([object()] * arrays["data"].size, dtype=object)
    with path.open("wb") as fh:
        np.savez(fh, **arrays)


def damage_missing_array(path):
    with zipfile.ZipFile(path) as z:
        kept = {name: z.read(name) for name in z.namelist() if name != "vocab.npy"}
    with zipfile.ZipFile(path, "w") as z:
        for name, data in kept.items():
            z.writestr(name, data)


def damage_other_parameters(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = dict(npz)
    arrays["meta"] = np.frombuffer(arrays["meta"].tobytes().replace(b'"k1": 1.5', b'"k1": 1.2'), dtype=np.uint8)
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    "damage",
    [
        damage_truncate,
        damage_flip_a_weight_byte,
        damage_inconsistent_arrays,
        damage_pickled_object,
        damage_missing_array,
        damage_other_parameters,
    ],
)
def test_a_damaged_index_file_is_rebuilt_not_trusted(corpus_file, tmp_path, damage):
    corpus = load_corpus(corpus_file)
    good, _ = load_or_build_index(corpus, tmp_path / "indexes")
    path = index_path(tmp_path / "indexes", corpus)
    damage(path)
    index, how = load_or_build_index(corpus, tmp_path / "indexes")
    assert how.startswith("rebuilt ("), how
    assert_same_index(index, good)
    assert_same_index(load_index(path, index_meta(corpus)), good)  # the file was written anew


def test_backend_is_chosen_by_the_config(tiny_cfg):
    assert typing.get_args(typing.get_type_hints(EnvConfig)["search_backend"]) == BACKENDS
    ds = load_dataset(tiny_cfg)
    fast = make_retriever(tiny_cfg, ds)
    assert isinstance(fast, SparseBM25Search)
    assert index_path(cache_root(tiny_cfg) / "indexes", ds.corpus).is_file()
    ref = make_retriever(tiny_cfg.replace(**{"env.search_backend": "rank_bm25"}), ds)
    assert isinstance(ref, BM25Search)
    assert search_for_corpus(ds.corpus, "sparse") is fast
    question = ds.train[0].question
    assert fast.search(question, 5) == ref.search(question, 5) != []
