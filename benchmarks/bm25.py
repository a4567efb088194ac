"""Benchmark: the sparse BM25 backend against rank-bm25, the reference (issue #7, part 2).

    python benchmarks/bm25.py            # shared data sets, demo-world corpora of 100k and 1M docs
    python benchmarks/bm25.py --quick    # fewer queries, and no 1M corpus

For each corpus it measures both backends' index build time and memory, the sparse index's disk
cache (file size, save and load time), queries per second one query at a time (each query once,
so the result cache never answers), and top-10 agreement: the fraction of queries whose top-10
hit lists (docids in order, and scores) are exactly equal. rank-bm25 is slow on large corpora, so
it runs only the first queries there; the speed-up is the ratio of the two backends' total time
on the queries both ran.
Results are printed as a table and written to benchmarks/results/bm25.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from searchgrpo.data.corpus import Corpus, Document  # noqa: E402
from searchgrpo.data.demo_world import generate_corpus  # noqa: E402
from searchgrpo.data.questions import load_questions, pooled_corpus  # noqa: E402
from searchgrpo.fileio import atomic_write_with  # noqa: E402
from searchgrpo.retrieval.bm25_index import load_index, save_index  # noqa: E402
from searchgrpo.retrieval.search import BM25Search, SparseBM25Search, tokenize  # noqa: E402

K = 10


@dataclass
class Result:
    corpus: str
    docs: int
    queries_sparse: int
    queries_reference: int
    build_s_sparse: float
    build_s_reference: float
    index_mb_sparse: float | None
    index_mb_reference: float | None
    cache_file_mb: float
    cache_save_s: float
    cache_load_s: float
    qps_sparse: float
    qps_reference: float
    speedup: float
    top10_docids_agree: float
    top10_hits_agree: float
    note: str


def rss_mb() -> float | None:
    """Resident memory of this process (Linux), after a collection."""
    gc.collect()
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return None


def growth(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 1)


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def demo_queries(docs: list[Document], n: int, seed: int) -> list[str]:
    """Alternating clue-like queries (a title and two words of its text) and demo-world questions.

    The questions use the demo world's multi-hop templates about the corpus's companies and films.
    """
    rng = random.Random(seed)
    anchors = [
        (d.title, "founder" if "company headquartered" in d.text else "director")
        for d in docs
        if "company headquartered" in d.text or " film directed by " in d.text
    ]
    templates = [
        "In which city was the {role} of {anchor} born?",
        "Which university did the {role} of {anchor} attend?",
        "In which region is the birthplace of the {role} of {anchor}?",
        "In which city is the university attended by the {role} of {anchor}?",
        "Were the {role} of {anchor} and the founder of {other} born in the same city?",
    ]
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        if len(out) % 2 == 0:
            doc = rng.choice(docs)
            words = tokenize(doc.text)
            query = f"{doc.title} {' '.join(rng.sample(words, min(2, len(words))))}"
        else:
            (anchor, role), (other, _) = rng.choice(anchors), rng.choice(anchors)
            query = rng.choice(templates).format(role=role, anchor=anchor, other=other)
        if query not in seen:  # each query once: the result cache must never answer
            seen.add(query)
            out.append(query)
    return out


def run_corpus(name: str, docs: list[Document], queries: list[str], n_reference: int, note: str) -> Result:
    corpus = Corpus(docs)
    print(
        f"\n{name}: {len(docs):,} documents, {len(queries):,} queries "
        f"({min(n_reference, len(queries)):,} for rank-bm25)",
        flush=True,
    )

    before = rss_mb()
    sparse, build_sparse = timed(SparseBM25Search, corpus)
    mem_sparse = growth(before, rss_mb())
    print(f"  sparse index built in {build_sparse:.2f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.npz"
        meta = {"benchmark": name}
        _, save_s = timed(atomic_write_with, path, lambda fh: save_index(fh, sparse.index, meta))
        file_mb = path.stat().st_size / 2**20
        _, load_s = timed(load_index, path, meta)

    before = rss_mb()
    reference, build_reference = timed(BM25Search, corpus)
    mem_reference = growth(before, rss_mb())
    print(f"  rank-bm25 index built in {build_reference:.2f} s", flush=True)

    # Each backend runs alone (so neither evicts the other's index from the CPU caches), after
    # a warm-up query that is not measured; each query's time is kept, so the speed-up compares
    # the two on exactly the same queries.
    sparse.search("warm up query", K)
    sparse_hits, sparse_times = [], []
    for q in queries:
        hits, t = timed(sparse.search, q, K)
        sparse_hits.append(hits)
        sparse_times.append(t)
    subsample = queries[:n_reference]
    reference.search("warm up query", K)
    t_reference = 0.0
    docids_agree = hits_agree = 0
    progress = time.perf_counter()
    for i, (q, ours) in enumerate(zip(subsample, sparse_hits), 1):
        ref, t = timed(reference.search, q, K)
        t_reference += t
        docids_agree += [h.docid for h in ours] == [h.docid for h in ref]
        hits_agree += ours == ref
        if time.perf_counter() - progress > 30:
            progress = time.perf_counter()
            print(f"  rank-bm25: {i}/{len(subsample)} queries", flush=True)

    del reference
    gc.collect()
    n_sub = len(subsample)
    return Result(
        corpus=name,
        docs=len(docs),
        queries_sparse=len(queries),
        queries_reference=n_sub,
        build_s_sparse=round(build_sparse, 3),
        build_s_reference=round(build_reference, 3),
        index_mb_sparse=mem_sparse,
        index_mb_reference=mem_reference,
        cache_file_mb=round(file_mb, 1),
        cache_save_s=round(save_s, 3),
        cache_load_s=round(load_s, 3),
        qps_sparse=round(len(queries) / sum(sparse_times), 1),
        qps_reference=round(n_sub / t_reference, 2),
        speedup=round(t_reference / sum(sparse_times[:n_sub]), 1),
        top10_docids_agree=docids_agree / n_sub,
        top10_hits_agree=hits_agree / n_sub,
        note=note,
    )


def print_table(results: list[Result]) -> None:
    header = [
        "corpus",
        "docs",
        "build s sparse / ref",
        "cache load s",
        "index MB sparse / ref",
        "queries sparse / ref",
        "q/s sparse",
        "q/s rank-bm25",
        "speed-up",
        "top-10 agree",
    ]
    rows = [
        [
            r.corpus,
            f"{r.docs:,}",
            f"{r.build_s_sparse:.2f} / {r.build_s_reference:.2f}",
            f"{r.cache_load_s:.2f}",
            f"{r.index_mb_sparse} / {r.index_mb_reference}",
            f"{r.queries_sparse:,} / {r.queries_reference:,}",
            f"{r.qps_sparse:,.1f}",
            f"{r.qps_reference:,.2f}",
            f"{r.speedup:,.1f}x",
            f"{r.top10_hits_agree:.3f}",
        ]
        for r in results
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    for i, row in enumerate([header, *rows]):
        print("  ".join(str(c).rjust(w) if j else str(c).ljust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(
        "\nq/s: one query at a time, each query once, each backend on its own. speed-up: rank-bm25's time / "
        "the sparse backend's time on the same queries (those rank-bm25 ran).\ntop-10 agree: fraction of "
        "those queries whose top-10 hits (docids in order, and scores) are exactly equal. index MB: growth "
        "of the process's resident memory while the index was built (rough for small corpora)."
    )
    for r in results:
        if r.top10_docids_agree != r.top10_hits_agree:
            print(
                f"{r.corpus}: docids agree on {r.top10_docids_agree:.3f}, hits with scores on {r.top10_hits_agree:.3f}"
            )
        if r.note:
            print(f"{r.corpus}: {r.note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer queries and no 1M-document corpus")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="the shared data folder")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bm25.json")
    args = parser.parse_args()
    load_at_start = os.getloadavg()

    results: list[Result] = []
    shared_questions = 100 if args.quick else 500
    for name in ("hotpotqa", "2wikimultihopqa"):
        path = args.data / f"{name}.jsonl"
        if not path.is_file():
            print(f"\n{path} not found: skipped")
            continue
        records = load_questions(path)
        queries = list(dict.fromkeys(r.question for r in records))[:shared_questions]
        results.append(
            run_corpus(
                f"{name} (pooled)",
                pooled_corpus(records),
                queries,
                len(queries),
                "queries: the data set's questions; both backends run all of them",
            )
        )

    # (documents, queries for the sparse backend, of which rank-bm25 runs the first n)
    sizes = [(100_000, 500, 20)] if args.quick else [(100_000, 2000, 100), (1_000_000, 1000, 30)]
    for n_docs, n_queries, n_reference in sizes:
        t = time.perf_counter()
        docs = list(generate_corpus(n_docs, seed=0))
        print(f"\ngenerated {n_docs:,} demo-world documents in {time.perf_counter() - t:.1f} s", flush=True)
        queries = demo_queries(docs, n_queries, seed=n_docs)
        note = (
            f"queries: half a title plus two words of its text, half demo-world questions about its companies "
            f"and films; rank-bm25 ran the first {n_reference} of {n_queries} (it is slow here)"
        )
        results.append(run_corpus(f"demo {n_docs // 1000}k", docs, queries, n_reference, note))
        del docs
        gc.collect()

    print()
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        # Other people's work shares this machine: the 1, 5 and 15-minute load averages.
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
    }
    report = {
        "benchmark": "bm25",
        "quick": args.quick,
        "k": K,
        "machine": machine,
        "results": [asdict(r) for r in results],
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
