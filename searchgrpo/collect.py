"""The baseline multi-agent pass that turns a question set into checkpoints.

For each question it plays up to `max_rounds` rounds of the multi-agent loop with frozen agents
(rule-based Planner, Executor and EntityManager from `agents.py`, BM25 search, and a
DocumentChecker) and writes the states in the contract's format (`checkpoints.py`). Runs that
already have a `meta.json` are skipped, so an interrupted collect resumes where it stopped; the
same inputs and seed always give the same checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from searchgrpo.agents import RuleEntityManager, RuleExecutor, RulePlanner, merge_documents, update_goals
from searchgrpo.checker import CheckRequest, DocumentChecker
from searchgrpo.agent_checkpoints import DocumentRecord, Goal, RoundState, RunWriter
from searchgrpo.fileio import remove_stale_temporaries
from searchgrpo.questions import QuestionRecord
from searchgrpo.search import Retriever

if TYPE_CHECKING:
    from searchgrpo.config import Config

GENERIC_SUB_GOALS = (
    "find the document about the entity the question names",
    "find the document about the entity that document leads to",
)


@dataclass(frozen=True)
class CollectStats:
    questions: int
    written: int
    skipped_existing: int
    states: int
    """SEARCH rounds written."""


def question_dir_name(question_id: str) -> str:
    """A file-system-safe folder name for a question id."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in question_id)
    return safe.strip(".") or "question"


def collect(
    records: Sequence[QuestionRecord],
    retriever: Retriever,
    checker: DocumentChecker,
    out_dir: Path,
    *,
    top_k: int = 5,
    max_rounds: int = 6,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> CollectStats:
    """Write `out_dir/<question>/run_001/` for every record (see the module docstring)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    planner = RulePlanner(max_rounds)
    executor = RuleExecutor(seed)
    entity_manager = RuleEntityManager()
    written = skipped = states = 0
    for n, rec in enumerate(records, 1):
        run_dir = out_dir / question_dir_name(rec.id) / "run_001"
        if (run_dir / "meta.json").is_file():
            skipped += 1
        else:
            remove_stale_temporaries(run_dir)
            states += _play(rec, retriever, checker, run_dir, planner, executor, entity_manager, top_k)
            written += 1
        if progress is not None:
            progress(n, len(records))
    return CollectStats(len(records), written, skipped, states)


def _play(
    rec: QuestionRecord,
    retriever: Retriever,
    checker: DocumentChecker,
    run_dir: Path,
    planner: RulePlanner,
    executor: RuleExecutor,
    entity_manager: RuleEntityManager,
    top_k: int,
) -> int:
    sub_goals = rec.sub_goals or GENERIC_SUB_GOALS
    state = RoundState(
        round=0,
        sub_goals=tuple(sub_goals),
        goals=tuple(Goal(f"g{i}", g) for i, g in enumerate(sub_goals, 1)),
    )
    writer = RunWriter(run_dir, rec.id, rec.question, rec.answers, tuple(sorted(rec.gold)))
    corpus = retriever.corpus
    found_important = False
    searches = 0
    for round_no in range(1, planner.max_rounds + 1):
        strategy = planner.next_strategy(state, round_no, found_important)
        found_important = False
        if strategy == "SEARCH":
            searches += 1
            clues = executor.clues(rec.id, rec.question, state, round_no)
            docids: list[str] = []
            for clue in clues:
                for hit in retriever.search(clue, top_k):
                    if hit.docid not in docids:
                        docids.append(hit.docid)
            docs = [corpus.get(d) for d in docids]
            verdicts = checker.check(
                [CheckRequest(rec.id, rec.question, state.sub_goals, d.docid, d.title, d.text) for d in docs if d]
            )
            new_records = [
                DocumentRecord(d.docid, d.title, v.label.value, v.reason, round_no)
                for d, v in zip([d for d in docs if d], verdicts)
            ]
            known = {d.docid for d in state.documents}
            n_new_important = sum(1 for r in new_records if r.verdict == "IMPORTANT" and r.docid not in known)
            found_important = n_new_important > 0
            discovered = tuple(dict.fromkeys(state.discovered_docids + tuple(docids)))
            documents = merge_documents(state.documents, new_records)
            state = replace(
                state,
                round=round_no,
                strategy="SEARCH",
                clues=tuple(clues),
                documents=documents,
                discovered_docids=discovered,
                context=state.context
                + (f"round {round_no}: searched {len(clues)} clues, {len(docids)} documents, "
                   f"{n_new_important} new IMPORTANT",),
            )
        elif strategy == "EXTRACT":
            important = [corpus.get(d.docid) for d in state.documents if d.verdict == "IMPORTANT"]
            entities = entity_manager.update(state, rec.question, [d for d in important if d])
            n_important = sum(1 for d in state.documents if d.verdict == "IMPORTANT")
            state = replace(
                state,
                round=round_no,
                strategy="EXTRACT",
                clues=(),
                entities=entities,
                goals=update_goals(state.goals, n_important),
                context=state.context + (f"round {round_no}: extracted {len(entities)} entities",),
            )
        else:
            state = replace(
                state,
                round=round_no,
                strategy="ANSWER",
                clues=(),
                context=state.context + (f"round {round_no}: answered",),
            )
        writer.add_round(state)
        if strategy == "ANSWER":
            break
    writer.finish()
    return searches



@dataclass(frozen=True)
class CollectedSet:
    """A question set turned into a corpus and multi-agent checkpoints."""

    corpus: Path
    checkpoints: Path


def collect_question_set(cfg: "Config", questions: Path, out_dir: Path | None = None,
                         progress: Callable[[int, int], None] | None = None) -> CollectedSet:
    """Corpus (the pooled documents) and checkpoints of a normalised question set, written once.

    Without `out_dir` the result is cached under the cache root, keyed by the file's content.
    """
    import hashlib

    from searchgrpo.checker import GoldChecker, Label, QuestionLabels
    from searchgrpo.config import home_dir
    from searchgrpo.corpus import Corpus, write_corpus
    from searchgrpo.errors import UserError
    from searchgrpo.questions import load_questions, pooled_corpus
    from searchgrpo.search import search_for_corpus

    if not questions.is_file():
        raise UserError(f"{questions}: question set not found")
    if out_dir is None:
        digest = hashlib.sha1(questions.read_bytes()).hexdigest()[:12]
        out_dir = home_dir(cfg) / "collected" / f"{questions.stem}-{digest}-k{cfg.env.top_k}"
    records = load_questions(questions)
    corpus_path = out_dir / "corpus.jsonl"
    if not corpus_path.is_file():
        write_corpus(corpus_path, pooled_corpus(records))
    corpus = Corpus(pooled_corpus(records), source=str(corpus_path))
    labels = {r.id: QuestionLabels(r.question, dict.fromkeys(r.gold, Label.IMPORTANT)) for r in records}
    retriever = search_for_corpus(corpus, cfg.env.search_backend, home_dir(cfg) / "indexes")
    collect(records, retriever, GoldChecker(corpus, labels), out_dir / "checkpoints",
            top_k=cfg.env.top_k, seed=cfg.train.seed, progress=progress)
    return CollectedSet(corpus_path, out_dir / "checkpoints")
