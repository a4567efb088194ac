"""BM25 search: agreement with rank-bm25, determinism, and the corpus loader."""

import json

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from searchgrpo.data.corpus import Corpus, Document, load_corpus, write_corpus
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.retrieval.search import BM25Search, search_for_corpus, tokenize, top_k_hits

DOCS = [
    Document("d0", "Krallo Systems", "Krallo Systems is a software company founded by Maren Dolvik."),
    Document("d1", "Maren Dolvik", "Maren Dolvik was born in Orvane and studied law."),
    Document("d2", "Orvane", "Orvane is a river city."),
    Document("d3", "Orvane Jazz Festival", "The festival is held in Orvane."),
    Document("d4", "Other", "Nothing related at all."),
]


def test_scores_are_rank_bm25s():
    corpus = Corpus(DOCS)
    ours = BM25Search(corpus)
    ref = BM25Okapi([tokenize(f"{d.title}\n{d.text}") for d in DOCS])
    for q in ["Maren Dolvik born", "Orvane", "software company"]:
        assert np.allclose(ours.scores(q), ref.get_scores(tokenize(q)))


def test_top_k_order_ties_and_no_zero_scores():
    corpus = Corpus(DOCS)
    hits = top_k_hits(corpus, np.array([1.0, 3.0, 3.0, 0.0, 2.0]), 10)
    assert [h.docid for h in hits] == ["d1", "d2", "d4", "d0"]  # ties by corpus order, 0 dropped
    assert [h.rank for h in hits] == [0, 1, 2, 3]
    assert BM25Search(corpus).search("zzz unknown words", 3) == []
    assert BM25Search(corpus).search("", 3) == []


def test_search_is_deterministic_and_cached():
    s = BM25Search(Corpus(DOCS))
    a = s.search("Orvane city", 2)
    assert a == s.search("Orvane city", 2) == BM25Search(Corpus(DOCS)).search("Orvane city", 2)
    assert len(a) == 2 and a[0].docid == "d2"


def test_index_is_shared_per_corpus_file(tmp_path):
    path = tmp_path / "c.jsonl"
    write_corpus(path, DOCS)
    a = search_for_corpus(load_corpus(path))
    assert search_for_corpus(load_corpus(path)) is a


def test_corpus_loader_skips_bad_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    lines = [
        json.dumps({"docid": "a", "title": "A", "text": "alpha"}),
        "{broken",
        json.dumps({"docid": "b", "title": "B"}),
        json.dumps({"docid": "a", "title": "A again", "text": "dup"}),
        json.dumps({"docid": "c", "title": "", "text": ""}),
        "",
        json.dumps(["not", "an", "object"]),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    issues = IssueLog()
    corpus = load_corpus(path, issues)
    assert [d.docid for d in corpus] == ["a"]
    reasons = [str(i) for i in issues.issues]
    assert any(":2: invalid JSON" in r for r in reasons)
    assert any(":3: field 'text' must be a string" in r for r in reasons)
    assert any(":4: duplicate docid 'a'" in r for r in reasons)
    assert any(":5: document has no title and no text" in r for r in reasons)
    assert any(":7: expected a JSON object" in r for r in reasons)
    assert any(":8: not valid UTF-8" in r for r in reasons)
    with pytest.raises(UserError):
        load_corpus(tmp_path / "missing.jsonl")
