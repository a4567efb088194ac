"""Assembling a run's data from the config: corpus, states, labels, split, checker and env.

The `llm` checker is opened here from `checker.*`: the embedded llama.cpp server is started (or
an external server's health is checked) and the verdict cache opened; `close()` on the checker
releases both.

With `data.checkpoints` and `data.corpus` null, the embedded demo world is used: the first call
generates it (corpus, questions, and checkpoints from a baseline multi-agent pass) into the cache
root, atomically, keyed by its size and seed; later calls reuse it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from searchgrpo.agent_checkpoints import SearchState, load_states, split_by_question
from searchgrpo.agents import RULES_VERSION
from searchgrpo.chat_client import ChatClient
from searchgrpo.checker import DocumentChecker, GoldChecker, Label, QuestionLabels
from searchgrpo.config import Config, DemoConfig, home_dir
from searchgrpo.corpus import Corpus, load_corpus, write_corpus
from searchgrpo.demo_world import GENERATOR_VERSION, generate_world
from searchgrpo.env import SearchRoundEnv
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.fileio import atomic_dir
from searchgrpo.llm_checker import LLMChecker
from searchgrpo.model import embedded_gguf_path
from searchgrpo.questions import write_questions
from searchgrpo.reward import RewardCalculator
from searchgrpo.search import Retriever, SparseBM25Search, search_for_corpus
from searchgrpo.server import EmbeddedServer
from searchgrpo.verdict_cache import VerdictCache


@dataclass(frozen=True)
class DemoPaths:
    root: Path
    corpus: Path
    questions: Path
    checkpoints: Path


def demo_dir(cfg: Config) -> Path:
    d = cfg.data.demo
    return home_dir(cfg) / "demo" / f"v{GENERATOR_VERSION}.{RULES_VERSION}-q{d.questions}-d{d.distractors}-s{d.seed}"


def build_demo(target: Path, demo: DemoConfig, *, top_k: int = 5, progress: Callable[[int, int], None] | None = None) -> DemoPaths:
    """Generate the demo world into `target` (atomically) unless it is already there."""
    paths = DemoPaths(target, target / "corpus.jsonl", target / "questions.jsonl", target / "checkpoints")
    if paths.checkpoints.is_dir() and paths.corpus.is_file():
        return paths
    from searchgrpo.collect import collect

    try:
        with atomic_dir(target) as tmp:
            world = generate_world(demo.questions, demo.distractors, demo.seed)
            write_corpus(tmp / "corpus.jsonl", world.documents)
            write_questions(tmp / "questions.jsonl", world.questions)
            corpus = Corpus(world.documents, source=str(tmp / "corpus.jsonl"))
            labels = {
                q.id: QuestionLabels(q.question, dict.fromkeys(q.gold, Label.IMPORTANT)) for q in world.questions
            }
            collect(
                world.questions, SparseBM25Search(corpus), GoldChecker(corpus, labels), tmp / "checkpoints",
                top_k=top_k, seed=demo.seed, progress=progress,
            )
    except FileExistsError:
        pass  # another process finished it first
    return paths


@dataclass
class Dataset:
    """Everything a run needs from its data."""

    corpus: Corpus
    train: list[SearchState]
    eval: list[SearchState]
    labels: dict[str, QuestionLabels]
    issues: IssueLog
    checkpoints_dir: Path
    corpus_path: Path
    is_demo: bool


def resolve_data_paths(cfg: Config, progress: Callable[[int, int], None] | None = None) -> tuple[Path, Path, bool]:
    """(checkpoints folder, corpus file, whether it is the demo world)."""
    ckpts, corpus = cfg.data.checkpoints, cfg.data.corpus
    if ckpts is None and corpus is None:
        demo = build_demo(demo_dir(cfg), cfg.data.demo, top_k=cfg.env.top_k, progress=progress)
        return demo.checkpoints, demo.corpus, True
    if ckpts is None or corpus is None:
        missing = "data.corpus" if corpus is None else "data.checkpoints"
        raise UserError(f"{missing} is null: set both data.checkpoints and data.corpus, or neither for the demo world")
    return Path(ckpts).expanduser(), Path(corpus).expanduser(), False


def load_dataset(cfg: Config, *, strict: bool | None = None, progress: Callable[[int, int], None] | None = None) -> Dataset:
    """Load corpus and states, split by question, and check that states refer to the corpus."""
    strict = cfg.data.strict if strict is None else strict
    ckpt_dir, corpus_path, is_demo = resolve_data_paths(cfg, progress)
    issues = IssueLog(strict)
    corpus = load_corpus(corpus_path, issues)
    loaded = load_states(
        ckpt_dir,
        min_clues_per_round=cfg.data.min_clues_per_round,
        max_samples_per_question=cfg.data.max_samples_per_question,
        strict=strict,
        seed=cfg.data.split_seed,
    )
    issues.issues.extend(loaded.issues.issues)
    if not loaded.states:
        raise UserError(
            f"{ckpt_dir}: no usable SEARCH-round states ({len(loaded.issues)} malformed files, "
            f"{loaded.rounds_skipped_few_clues} rounds with fewer than data.min_clues_per_round clues)"
        )
    train, evals = split_by_question(loaded.states, cfg.data.eval_fraction, cfg.data.split_seed)
    if not train:
        raise UserError(f"{ckpt_dir}: every question went to eval; lower data.eval_fraction")
    return Dataset(corpus, train, evals, loaded.labels, issues, ckpt_dir, corpus_path, is_demo)


def make_checker(cfg: Config, dataset: Dataset) -> DocumentChecker:
    """The configured checker; an `llm` one owns its server and cache until `close()`."""
    if cfg.checker.backend == "gold":
        return GoldChecker(dataset.corpus, dataset.labels)
    return open_llm_checker(cfg)


@dataclass
class ChatEndpoint:
    """A chat-completions server the frozen LLM agents can use, ready and health-checked."""

    client: ChatClient
    model: str
    """The served model name sent with each request."""
    structured_output: str
    """`checker.structured_output` with `auto` resolved."""
    cache_model: str
    """How the model is named in the verdict cache."""
    server: EmbeddedServer | None = None
    """The embedded server, when this endpoint started one."""

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def open_endpoint(cfg: Config) -> ChatEndpoint:
    """Start the embedded server (`checker.server: embedded`) or check the external one. The
    server must answer a health check within seconds, else a one-line error names its URL."""
    cc = cfg.checker
    server: EmbeddedServer | None = None
    if cc.server == "embedded":
        gguf = Path(cc.gguf).expanduser() if cc.gguf else embedded_gguf_path()
        server = EmbeddedServer(gguf, parallel=cc.max_concurrency, threads=cc.server_threads).start()
        base_url = server.base_url
        # The file's name and size identify the model in the cache, whatever it is served as.
        cache_model = f"gguf:{gguf.name}:{gguf.stat().st_size}"
    else:
        base_url, cache_model = cc.server, ""
    try:
        client = ChatClient(base_url, api_key_env=cc.api_key_env, timeout_s=cc.timeout_s,
                            max_retries=cc.max_retries, retry_deadline_s=cc.retry_deadline_s)
        served = client.health(timeout_s=5.0)
        model = cc.model or (server.alias if server else (served[0] if served else None))
        if model is None:
            raise UserError(f"checker server {base_url} lists no model at /models; set checker.model")
    except BaseException:
        if server is not None:
            server.stop()
        raise
    structured = cc.structured_output
    if structured == "auto":
        structured = "grammar" if server else "json_schema"
    return ChatEndpoint(client, model, structured, cache_model or model, server)


def open_llm_checker(cfg: Config, endpoint: ChatEndpoint | None = None) -> LLMChecker:
    """The `llm` checker over `endpoint` (opened from the config, and then owned, if None)."""
    cc = cfg.checker
    owned = endpoint is None
    endpoint = endpoint or open_endpoint(cfg)
    cache_file = Path(cc.cache_path).expanduser() if cc.cache_path else home_dir(cfg) / "verdicts.sqlite"
    return LLMChecker(
        endpoint.client, endpoint.model, structured_output=endpoint.structured_output, max_tokens=cc.max_tokens,
        max_doc_chars=cc.max_doc_chars, max_concurrency=cc.max_concurrency,
        cache=VerdictCache(cache_file) if cc.cache else None, cache_model=endpoint.cache_model,
        on_close=endpoint.close if owned else None,
    )


def make_retriever(cfg: Config, dataset: Dataset) -> Retriever:
    return search_for_corpus(dataset.corpus, cfg.env.search_backend, home_dir(cfg) / "indexes")


def make_env(cfg: Config, dataset: Dataset, checker: DocumentChecker | None = None) -> SearchRoundEnv:
    return SearchRoundEnv(
        make_retriever(cfg, dataset),
        checker or make_checker(cfg, dataset),
        RewardCalculator(cfg.reward),
        top_k=cfg.env.top_k,
        min_clues=cfg.env.min_clues,
        max_clues=cfg.env.max_clues,
        max_clue_words=cfg.env.max_clue_words,
    )
