"""What the checker audit labels: (state, document) pairs with gold labels, sampled by stratum.

The data is a question set with gold evidence (collected into traces once, with the rule agents
and the gold checker, as `eval --questions` does), a traces folder whose runs' `meta.json` list
`gold_docids`, or else the run's own data (the demo world by default). A *context* is what the
checker sees of a state besides the document: the question and the Planner's sub-goals; states
of one question with the same sub-goals are one context.

Gold labels: IMPORTANT for the question's gold documents (the question set's `"gold": true`, or
`gold_docids`), and for every other document the `gold` checker's rule applied with only those
gold documents known: RELEVANT if it mentions a gold document's title or its own title is in the
question, else IRRELEVANT (`agents/checker.py`). Verdicts recorded in the traces are not used as
gold: they are an earlier checker's.

Strata, for each context:
- `gold`: the question's gold documents;
- `distractor`: the question's other candidate documents (the question set's documents without
  `"gold": true`; for traces without a question set, the documents its rounds recorded);
- `bm25`: documents BM25 retrieves (top `NEIGHBOURS`) for the question or one of its sub-goals
  that are in neither of the above.

`sample_pairs` draws `n` pairs: an equal share per stratum (a stratum with too few pairs gives its
share to the others), each drawn without replacement uniformly over its (context, document)
pairs with a seeded generator, then ordered by context (a backend that reuses a context's prompt
prefix sees its documents together).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from searchgrpo.agents.checker import CheckRequest, GoldChecker
from searchgrpo.agents.doc_features import doc_length, question_overlap
from searchgrpo.config import Config
from searchgrpo.data.dataset import Dataset, read_dataset
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.questions import QuestionRecord, load_questions
from searchgrpo.data.states import find_runs
from searchgrpo.data.traces import SchemaError, parse_meta, read_trace_file
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.retrieval.search import Retriever
from searchgrpo.world import load_dataset, resolve_data_paths

STRATA = ("gold", "distractor", "bm25")
NEIGHBOURS = 10
"""BM25 hits taken per query (the question, each sub-goal) for the `bm25` stratum."""


@dataclass(frozen=True)
class AuditData:
    """States, corpus and gold of the data audited."""

    dataset: Dataset
    gold: dict[str, frozenset[str]]
    """Each question's gold docids."""
    candidates: dict[str, tuple[str, ...]]
    """Each question's other candidate documents (the `distractor` stratum)."""
    source: str
    """Where the data came from, in words."""


@dataclass(frozen=True)
class AuditPair:
    """One (context, document) pair to label, with its gold label and features."""

    stratum: str
    request: CheckRequest
    gold: Label
    length: int
    overlap: float


def gold_only_checker(data: AuditData) -> GoldChecker:
    """The gold checker knowing only the gold documents (see the module docstring)."""
    questions = {s.question_id: s.question for s in data.dataset.eval + data.dataset.train}
    labels = {
        qid: QuestionLabels(questions.get(qid, ""), dict.fromkeys(docids, Label.IMPORTANT))
        for qid, docids in data.gold.items()
    }
    return GoldChecker(data.dataset.corpus, labels)


# --------------------------------------------------------------------------- loading


def trace_gold(traces_dir: Path) -> dict[str, frozenset[str]]:
    """The `gold_docids` every run's meta.json lists, by question (malformed runs are skipped:
    reading the states reports them)."""
    gold: dict[str, set[str]] = {}
    root = traces_dir.resolve()
    for run_dir in find_runs(traces_dir):
        try:
            meta = parse_meta(read_trace_file(run_dir / "meta.json", root))
        except SchemaError:
            continue
        if meta.gold_docids:
            gold.setdefault(meta.question_id, set()).update(meta.gold_docids)
    return {q: frozenset(d) for q, d in gold.items()}


def read_question_set(path: Path) -> list[QuestionRecord]:
    """The question set, or one line saying that it has no gold to audit against."""
    issues = IssueLog()
    try:
        return load_questions(path, issues)
    except UserError:
        if issues.issues and all("no gold" in i.reason for i in issues.issues):
            raise UserError(
                f'{path}: no question marks a gold document ("gold": true), so there is nothing to audit the '
                'checker against; mark each question\'s evidence documents with "gold": true (docs/checker.md)'
            ) from None
        raise


def _recorded_docs(dataset: Dataset) -> dict[str, tuple[str, ...]]:
    seen: dict[str, dict[str, None]] = {}
    for state in dataset.train + dataset.eval:
        docs = seen.setdefault(state.question_id, {})
        for doc in state.before.documents:
            docs.setdefault(doc.docid, None)
    return {q: tuple(d) for q, d in seen.items()}


def load_audit_data(
    cfg: Config, questions: str | None = None, traces: str | None = None, corpus: str | None = None
) -> AuditData:
    """The data to audit on (see the module docstring); one clear line when it has no gold."""
    records: list[QuestionRecord] | None = None
    if questions:
        from searchgrpo.episodes.collect import collect_question_set

        path = Path(questions)
        if not path.is_file():
            raise UserError(f"--questions {path}: question set not found")
        records = read_question_set(path)
        # The states come from the rule agents with gold labels, whatever checker is audited.
        collect_cfg = cfg.replace(
            **{"checker.backend": "gold", "checker.judge_noise": 0.0, "checker.judge_bias": "none"}
        )
        paths = collect_question_set(collect_cfg, path)
        dataset = read_dataset(cfg.data, paths.traces, paths.corpus, split=False)
        source = f"question set {path}"
    elif traces:
        if not corpus:
            raise UserError("--traces needs --corpus (the JSONL corpus those traces searched)")
        dataset = read_dataset(cfg.data, Path(traces), Path(corpus), split=False)
        source = f"traces {traces}"
    else:
        dataset = load_dataset(cfg)
        traces_dir, _, is_demo = resolve_data_paths(cfg)
        if is_demo:
            demo_questions = traces_dir.parent / "questions.jsonl"
            records = load_questions(demo_questions) if demo_questions.is_file() else None
        source = "the demo world" if is_demo else f"data.traces {traces_dir}"
    gold = trace_gold(dataset.traces_dir)
    if records is not None:
        gold = {r.id: r.gold for r in records} | gold
    gold = {q: g for q, g in gold.items() if any(d in dataset.corpus for d in g)}
    if not gold:
        where = f"--traces {traces}" if traces else f"data.traces {dataset.traces_dir}"
        raise UserError(
            f"{where}: no run's meta.json lists gold_docids found in the corpus, so there is nothing to audit the "
            "checker against; give --questions FILE (a question set whose evidence documents carry "
            '"gold": true) or add gold_docids to each run\'s meta.json (docs/traces.md)'
        )
    if records is not None:
        candidates = {r.id: tuple(d.docid for d in r.docs if d.docid not in r.gold) for r in records}
    else:
        candidates = {
            q: tuple(d for d in docs if d not in gold.get(q, ())) for q, docs in _recorded_docs(dataset).items()
        }
    return AuditData(dataset, gold, candidates, source)


# --------------------------------------------------------------------------- sampling


def contexts(dataset: Dataset, gold: dict[str, frozenset[str]]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The distinct (question id, question, sub-goals) of the states of questions with gold, in data order."""
    seen: dict[tuple[str, tuple[str, ...]], str] = {}
    for state in dataset.train + dataset.eval:
        if state.question_id in gold:
            seen.setdefault((state.question_id, tuple(state.sub_goals)), state.question)
    return [(qid, question, subs) for (qid, subs), question in seen.items()]


def allocate(n: int, available: list[int]) -> list[int]:
    """An equal share of `n` per stratum, capped at what each has; shortfalls go to the others.

    >>> allocate(10, [2, 100, 100])
    [2, 4, 4]
    >>> allocate(10, [100, 100, 100])
    [4, 3, 3]
    """
    quota = [0] * len(available)
    left = min(n, sum(available))
    while left > 0:
        open_ = [i for i, a in enumerate(available) if quota[i] < a]
        share, extra = divmod(left, len(open_))
        for j, i in enumerate(open_):
            give = min(share + (1 if j < extra else 0), available[i] - quota[i])
            quota[i] += give
            left -= give
    return quota


def candidate_pairs(
    data: AuditData, retriever: Retriever
) -> tuple[list[tuple[str, str, tuple[str, ...]]], dict[str, list[tuple[int, str]]]]:
    """The contexts, and per stratum every (context index, docid) pair (see the module docstring)."""
    corpus = data.dataset.corpus
    ctxs = contexts(data.dataset, data.gold)
    pools: dict[str, list[tuple[int, str]]] = {s: [] for s in STRATA}
    for i, (qid, question, subs) in enumerate(ctxs):
        gold = data.gold[qid]
        others = [d for d in data.candidates.get(qid, ()) if d not in gold and d in corpus]
        pools["gold"].extend((i, d) for d in sorted(gold) if d in corpus)
        pools["distractor"].extend((i, d) for d in others)
        taken = set(gold) | set(others)
        neighbours: dict[str, None] = {}
        for query in (question, *subs):
            for hit in retriever.search(query, NEIGHBOURS):
                if hit.docid not in taken:
                    neighbours.setdefault(hit.docid, None)
        pools["bm25"].extend((i, d) for d in neighbours)
    return ctxs, pools


def sample_pairs(data: AuditData, retriever: Retriever, n: int, seed: int) -> list[AuditPair]:
    """`n` pairs (fewer when the data has fewer), stratified and ordered as the module docstring says."""
    ctxs, pools = candidate_pairs(data, retriever)
    quota = allocate(n, [len(pools[s]) for s in STRATA])
    rng = np.random.default_rng(seed)
    chosen: list[tuple[int, int, str]] = []
    for s, (stratum, k) in enumerate(zip(STRATA, quota)):
        picks: Iterable[int] = rng.choice(len(pools[stratum]), size=k, replace=False) if k else []
        chosen.extend((pools[stratum][j][0], s, pools[stratum][j][1]) for j in picks)
    chosen.sort()
    reference = gold_only_checker(data)
    return [_pair(ctxs[c], STRATA[s], docid, data, reference) for c, s, docid in chosen]


def _pair(
    ctx: tuple[str, str, tuple[str, ...]], stratum: str, docid: str, data: AuditData, reference: GoldChecker
) -> AuditPair:
    qid, question, subs = ctx
    doc = data.dataset.corpus.get(docid)
    assert doc is not None  # pools hold only documents of the corpus
    request = CheckRequest(qid, question, subs, docid, doc.title, doc.text)
    return AuditPair(
        stratum,
        request,
        reference.label(request).label,
        doc_length(doc.title, doc.text),
        question_overlap(question, doc.title, doc.text),
    )


def strata_counts(pairs: Iterable[AuditPair]) -> dict[str, int]:
    counts = dict.fromkeys(STRATA, 0)
    for p in pairs:
        counts[p.stratum] += 1
    return counts
