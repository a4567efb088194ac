"""The baseline multi-agent pass that turns a question set into traces (the training data).

For each question it plays up to `max_rounds` rounds of the multi-agent loop (`play.py`) with
frozen agents (a Planner, an Executor and an EntityManager: rule-based from
`searchgrpo.agents.rules` by default, or the LLM ones of `searchgrpo.agents.llm_agents` / the base
policy of `searchgrpo.policy.executor`; BM25 search; a DocumentChecker) and writes the states in
the contract's format (`searchgrpo.data.traces`, docs/traces.md), round 0 included. Runs that
already have a `meta.json` are skipped, so an interrupted collect resumes where it stopped; the
same inputs and seed always give the same traces (the LLM agents answer greedily).

`collect_to_folder` does it for a whole question set: it writes the pooled corpus
(`corpus.jsonl`), then `traces/`, ready for `data.corpus` and `data.traces`. Search goes through
the configured retriever (`retrieval.backend`); documents your search API returned from outside
the set are added to `corpus.jsonl` with the text the API gave. Collecting again into
the same folder after the question set grew (or a document changed) rewrites the corpus, so that
every document of the set, gold ones first of all, is in it; documents only older traces use are
kept, so those still resolve. `searchgrpo check` verifies that every gold document is there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgrpo.agents.checker import DocumentChecker
from searchgrpo.agents.rules import RULES_VERSION, RuleEntityManager, RuleExecutor, RulePlanner
from searchgrpo.config import Config, cache_root
from searchgrpo.data.questions import QuestionRecord
from searchgrpo.data.traces import RunWriter
from searchgrpo.episodes.play import EntityManager, Episode, EpisodeStart, Executor, Planner, initial_state, play
from searchgrpo.errors import DataIssue
from searchgrpo.fileio import (
    CACHE_ROOT_FIX,
    OutputKind,
    claim_output,
    remove_stale_temporaries,
    writable_folder,
    writing_cache,
)
from searchgrpo.retrieval.search import Retriever


@dataclass(frozen=True)
class CollectStats:
    questions: int
    written: int
    skipped_existing: int
    states: int
    """SEARCH rounds written."""


MAX_NAME_BYTES = 120
"""Longest folder name made from a question id (file systems allow 255 bytes; digests get added)."""


def question_dir_name(question_id: str) -> str:
    """A file-system-safe folder name for a question id (never a path: no separator, no `..`); an id
    too long for a file name is cut and given a digest of the whole id, so that it stays unique."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in question_id).strip(".") or "question"
    if len(safe.encode("utf-8")) > MAX_NAME_BYTES:
        digest = hashlib.sha1(question_id.encode("utf-8")).hexdigest()[:10]
        safe = safe.encode("utf-8")[: MAX_NAME_BYTES - 11].decode("utf-8", "ignore") + "-" + digest
    return safe


def _collected_id(meta: Path) -> str | None:
    """The question id in an existing meta.json (None if absent or unreadable)."""
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    qid = data.get("question_id") if isinstance(data, dict) else None
    return str(qid) if qid is not None else None


def question_run_dir(out_dir: Path, question_id: str, claimed: dict[Path, str] | None = None) -> tuple[Path, bool]:
    """(`out_dir/<name>/run_001`, whether that question is already collected there).

    Ids that differ may share a safe name (`a/b`, `a_b`): a folder that already holds another
    question's run, or is `claimed` by another question of this collect, is left alone and this
    question gets `<name>-<digest of its id>` instead, so no question is taken for collected when
    it is not, and no two questions write one folder.
    """
    name = question_dir_name(question_id)
    run_dir = out_dir / name / "run_001"
    owner = _collected_id(run_dir / "meta.json")
    if owner is None and claimed:
        owner = claimed.get(run_dir)
    if owner is not None and owner != question_id:
        digest = hashlib.sha1(question_id.encode("utf-8")).hexdigest()[:10]
        run_dir = out_dir / f"{name}-{digest}" / "run_001"
        owner = _collected_id(run_dir / "meta.json")
    return run_dir, owner == question_id


CHUNK = 32
"""Questions played in lockstep at a time: a policy Executor batches their clues; an interrupted
collect loses at most one chunk."""


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
    planner: Planner | None = None,
    executor: Executor | None = None,
    entity_manager: EntityManager | None = None,
) -> CollectStats:
    """Write `out_dir/<question>/run_001/` for every record (see the module docstring).
    Agents left as None are the rule-based ones."""
    out_dir.mkdir(parents=True, exist_ok=True)
    planner = planner or RulePlanner(max_rounds)
    executor = executor or RuleExecutor(seed)
    entity_manager = entity_manager or RuleEntityManager()
    todo: list[tuple[QuestionRecord, Path]] = []
    claimed: dict[Path, str] = {}
    skipped = 0
    for rec in records:
        run_dir, collected = question_run_dir(out_dir, rec.id, claimed)
        claimed[run_dir] = rec.id
        if collected:
            skipped += 1
        else:
            todo.append((rec, run_dir))
    done = skipped
    states = 0
    if progress is not None:
        progress(done, len(records))
    for at in range(0, len(todo), CHUNK):
        chunk = todo[at : at + CHUNK]
        run_dirs = {rec.id: run_dir for rec, run_dir in chunk}
        starts = [
            EpisodeStart(rec.id, rec.question, rec.answers, rec.gold, initial_state(rec.question, rec.sub_goals))
            for rec, _ in chunk
        ]

        def write(episode: Episode, run_dirs: dict[str, Path] = run_dirs) -> None:
            nonlocal done, states
            s = episode.start
            run_dir = run_dirs[s.question_id]
            remove_stale_temporaries(run_dir)
            writer = RunWriter(run_dir, s.question_id, s.question, s.answers, tuple(sorted(s.gold)))
            writer.write_initial(s.initial)
            for r in episode.rounds:
                writer.add_round(r.after)
            writer.finish()
            states += sum(1 for r in episode.rounds if r.strategy == "SEARCH")
            done += 1
            if progress is not None:
                progress(done, len(records))

        play(
            starts,
            planner=planner,
            executor=executor,
            entity_manager=entity_manager,
            retriever=retriever,
            checker=checker,
            top_k=top_k,
            on_done=write,
        )
    return CollectStats(len(records), len(todo), skipped, states)


# --------------------------------------------------------------------------- a whole question set

AGENT_CHOICES = {"planner": ("rule", "llm"), "executor": ("rule", "policy"), "entity_manager": ("rule", "llm")}
MANIFEST = "collect.json"


def is_collect_folder(folder: Path) -> bool:
    """A folder `collect` wrote: its manifest, or (collects older than the manifest) a corpus beside
    a traces folder."""
    if (folder / MANIFEST).is_file():
        return True
    return (folder / "corpus.jsonl").is_file() and any((folder / d).is_dir() for d in ("traces", "checkpoints"))


COLLECT_FOLDER = OutputKind(
    "collect folder (corpus.jsonl, traces/)", "--out", folder=True, ours=is_collect_folder, reused=True
)
"""`collect --out`: new, empty, or a collect to resume; a folder holding anything else is refused."""


@dataclass(frozen=True)
class CollectResult:
    """Where `collect_to_folder` wrote, and what it did."""

    corpus: Path
    traces: Path
    stats: CollectStats
    fallbacks: dict[str, int]
    """Per agent, the rounds in which the rule decided because the model's reply was unusable."""
    checker: dict[str, float]
    """The checker's counters (`stats()`), empty for one that keeps none."""
    issues: list[DataIssue] = field(default_factory=list)
    """Malformed lines of the question set, skipped (under `data.strict` the first one is raised)."""
    corpus_note: str = ""
    """Why corpus.jsonl was rewritten ('' when it was new or already complete)."""

    def summary_lines(self) -> tuple[list[str], list[str]]:
        """(warnings, lines) that tell the user what was done."""
        s = self.stats
        warnings = [str(issue) if issue.conflict else f"skipped {issue}" for issue in self.issues]
        malformed = [issue for issue in self.issues if not issue.conflict]
        if malformed:
            warnings.append(f"{len(malformed)} malformed lines skipped (--strict stops at the first instead)")
        lines = [self.corpus_note] if self.corpus_note else []
        lines.append(
            f"{s.written} questions collected, {s.skipped_existing} already there, {s.states} SEARCH rounds written"
        )
        if self.checker:
            c = self.checker
            lines.append(
                f"checker: {int(c['calls'])} calls, {int(c['cache_hits'])} cache hits, "
                f"{int(c['unparsable'])} unparsable replies, {int(c['failures'])} retried attempts"
            )
        lines += [
            f"{role}: the rule decided {n} times where the model's reply was unusable"
            for role, n in self.fallbacks.items()
            if n
        ]
        lines.append(f"train on it with:  --set data.corpus={self.corpus} --set data.traces={self.traces}")
        return warnings, lines


def collect_to_folder(
    cfg: Config,
    source: str,
    out_dir: Path,
    *,
    limit: int | None = None,
    max_rounds: int = 6,
    seed: int = 0,
    planner: str = "rule",
    executor: str = "rule",
    entity_manager: str = "rule",
    progress: Callable[[int, int], None] | None = None,
) -> CollectResult:
    """Collect traces for the question set `source` (a JSONL path, or `demo`) into `out_dir`.

    The corpus is the pooled documents of the whole set (the demo world: its own corpus), so it
    does not change when `limit` does; only the first `limit` questions are played. The checker
    is `cfg.checker` (`gold`: IMPORTANT = the set's gold documents). A folder collected from
    another source is refused, so that its traces and corpus always belong together.
    """
    from searchgrpo.agents.checker import GoldChecker
    from searchgrpo.data.corpus import Corpus, complete_corpus
    from searchgrpo.data.labels import Label, QuestionLabels
    from searchgrpo.data.questions import load_questions, pooled_corpus, unique_docids
    from searchgrpo.errors import IssueLog, UserError
    from searchgrpo.fileio import atomic_write_json
    from searchgrpo.retrieval.backends import open_retriever

    for role, choice in (("planner", planner), ("executor", executor), ("entity_manager", entity_manager)):
        if choice not in AGENT_CHOICES[role]:
            raise UserError(f"--{role.replace('_', '-')} {choice!r}: expected one of {', '.join(AGENT_CHOICES[role])}")
    claim_output(out_dir, COLLECT_FOLDER)
    issues = IssueLog(cfg.data.strict)
    if source == "demo":
        from searchgrpo.data.demo_world import generate_world

        d = cfg.data.demo
        world = generate_world(d.questions, d.distractors, d.seed)
        records, documents = world.questions, world.documents
        origin = f"demo:q{d.questions}-d{d.distractors}-s{d.seed}"
        content = origin
    else:
        records = unique_docids(load_questions(source, issues), issues, source)
        documents = pooled_corpus(records)
        origin = str(Path(source).expanduser().resolve())
        content = hashlib.sha1(Path(origin).read_bytes()).hexdigest()
    manifest_path = out_dir / MANIFEST
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            previous, previous_content = manifest.get("source"), manifest.get("sha1")
        except (ValueError, AttributeError):
            raise UserError(
                f"{manifest_path}: not a collect manifest (invalid JSON); choose another --out or delete the file"
            ) from None
        if previous != origin and previous_content != content:  # a copy of the same file is the same source
            raise UserError(f"{out_dir} holds a collect of {previous}; choose another --out for {origin}")
    out_dir.mkdir(parents=True, exist_ok=True)
    traces_dir = out_dir / "traces"
    legacy = out_dir / "checkpoints"  # the folder's name before traces/ (same contents)
    if legacy.is_dir() and not traces_dir.exists():
        legacy.rename(traces_dir)
    corpus_path = out_dir / "corpus.jsonl"
    documents, corpus_note = complete_corpus(corpus_path, documents)
    atomic_write_json(
        manifest_path, {"source": origin, "sha1": content, "questions": len(records), "documents": len(documents)}
    )
    selected = records[:limit] if limit else records
    corpus = Corpus(documents, source=str(corpus_path))

    closers: list[Callable[[], None]] = []
    try:
        endpoint = None
        if cfg.checker.backend == "llm" or "llm" in (planner, entity_manager):
            from searchgrpo.agents.endpoint import open_endpoint

            endpoint = open_endpoint(cfg.checker)
            closers.append(endpoint.close)
        agents: dict[str, Any] = {}
        if executor == "policy":
            from searchgrpo.policy.executor import PolicyExecutor

            agents["executor"] = PolicyExecutor.base_model(cfg, seed=seed)
        if cfg.checker.backend == "llm":
            from searchgrpo.agents.endpoint import open_llm_checker

            checker: DocumentChecker = open_llm_checker(cfg.checker, cache_root(cfg), endpoint)
            closers.insert(0, checker.close)
        elif cfg.checker.backend == "base":
            from searchgrpo.policy.judge import open_base_judge

            # The Executor's base model when it is the policy: one copy of the weights.
            shared = agents["executor"].policy if "executor" in agents else None
            checker = open_base_judge(cfg, shared)
            closers.insert(0, checker.close)
        else:
            labels = {r.id: QuestionLabels(r.question, dict.fromkeys(r.gold, Label.IMPORTANT)) for r in selected}
            checker = GoldChecker(corpus, labels)
        if planner == "llm":
            from searchgrpo.agents.llm_agents import LLMPlanner

            assert endpoint is not None  # opened above whenever an agent is `llm`
            agents["planner"] = LLMPlanner(endpoint.client, endpoint.model, endpoint.structured_output, max_rounds)
        if entity_manager == "llm":
            from searchgrpo.agents.llm_agents import LLMEntityManager

            assert endpoint is not None  # opened above whenever an agent is `llm`
            agents["entity_manager"] = LLMEntityManager(
                endpoint.client, endpoint.model, endpoint.structured_output, cfg.checker.max_doc_chars
            )
        if executor == "policy":
            from searchgrpo.policy.executor import PolicyExecutor

            agents["executor"] = PolicyExecutor.base_model(cfg, seed=seed)
        retriever = open_retriever(cfg, corpus)  # retrieval.backend: BM25, or your search API
        stats = collect(
            selected,
            retriever,
            checker,
            traces_dir,
            top_k=cfg.env.top_k,
            max_rounds=max_rounds,
            seed=seed,
            progress=progress,
            **agents,
        )
        checker_counters = checker.stats() or {}
        external = getattr(retriever.corpus, "external", None)
        if external:  # documents only the search API knew: kept, so the traces and corpus belong together
            _, corpus_note = complete_corpus(corpus_path, [*documents, *external.values()])
    finally:
        for close in closers:
            close()
    fallbacks = {role: agent.fallbacks for role, agent in agents.items()}
    return CollectResult(corpus_path, traces_dir, stats, fallbacks, checker_counters, issues.issues, corpus_note)


def collect_question_set(cfg: Config, questions: Path) -> CollectResult:
    """`collect_to_folder` with the rule agents into the cache root, keyed by the file's content
    (used by `eval --questions`: the same file is collected once)."""
    from searchgrpo.errors import UserError

    if not questions.is_file():
        raise UserError(f"{questions}: question set not found")
    digest = hashlib.sha1(questions.read_bytes()).hexdigest()[:12]
    # Collected through a search API, the traces are that API's: another folder than BM25's.
    searched = (
        f"-http{hashlib.sha1(str(cfg.retrieval.url).encode()).hexdigest()[:8]}"
        if cfg.retrieval.backend == "http"
        else ""
    )
    folder = (
        cache_root(cfg)
        / "collected"
        / (f"{questions.stem}-{digest}-k{cfg.env.top_k}-{cfg.checker.backend}{searched}-rules{RULES_VERSION}")
    )
    writable_folder(folder.parent, CACHE_ROOT_FIX)
    with writing_cache(folder, "collected question set"):
        return collect_to_folder(cfg, str(questions), folder, seed=cfg.train.seed)
