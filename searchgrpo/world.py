"""A run's world from the config: its data (corpus, states, labels, split), checker, search and env.

The run's wiring: it joins the stages below it (data, retrieval, agents, env, episodes) into what
training, evaluation, merge's parity check and `check` work on, so it sits above them all in the
import-linter layers, just below `train`.

The `llm` checker is opened through `searchgrpo.agents.endpoint`: the embedded llama.cpp server is
started (or an external server's health is checked) and the verdict cache opened; `close()` on the
checker releases both. The `base` checker (`policy/judge.py`) judges with a loaded policy's base
weights when given one (the trainer's), else loads the base model once, adapter-free.

With `data.traces` and `data.corpus` null, the embedded demo world is used: the first call
generates it (corpus, questions, and traces from a baseline multi-agent pass) into the cache
root, atomically, keyed by its size and seed; later calls reuse it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.agents.checker import DocumentChecker, GoldChecker
from searchgrpo.agents.endpoint import open_llm_checker
from searchgrpo.agents.rules import RULES_VERSION
from searchgrpo.config import Config, DemoConfig, cache_root
from searchgrpo.data.corpus import Corpus, write_corpus
from searchgrpo.data.dataset import Dataset, read_dataset
from searchgrpo.data.demo_world import GENERATOR_VERSION, generate_world
from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.questions import write_questions
from searchgrpo.env.reward import RewardCalculator
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.errors import UserError
from searchgrpo.fileio import OutputKind, atomic_dir, writing_cache
from searchgrpo.policy.model import Policy
from searchgrpo.retrieval.backends import open_retriever
from searchgrpo.retrieval.search import Retriever, SparseBM25Search

DEMO_WORLD = OutputKind("demo world", "--out", folder=True)
"""`demo-world --out`: a new or empty folder (nothing already there is ever written over)."""


@dataclass(frozen=True)
class DemoPaths:
    root: Path
    corpus: Path
    questions: Path
    traces: Path


def demo_dir(cfg: Config) -> Path:
    """The demo world's cache folder, named by everything that shapes it: the generator and the
    rules' versions, the world's size and seed, and `env.top_k`, with which its traces are collected."""
    d = cfg.data.demo
    name = f"v{GENERATOR_VERSION}.{RULES_VERSION}t-q{d.questions}-d{d.distractors}-s{d.seed}-k{cfg.env.top_k}"
    return cache_root(cfg) / "demo" / name


def build_demo(
    target: Path, demo: DemoConfig, *, top_k: int = 5, progress: Callable[[int, int], None] | None = None
) -> DemoPaths:
    """Generate the demo world into `target` (atomically) unless it is already there."""
    paths = DemoPaths(target, target / "corpus.jsonl", target / "questions.jsonl", target / "traces")
    if paths.traces.is_dir() and paths.corpus.is_file():
        return paths
    from searchgrpo.episodes.collect import collect

    with writing_cache(target, "demo world"), atomic_dir(target, first_wins=True) as tmp:
        world = generate_world(demo.questions, demo.distractors, demo.seed)
        write_corpus(tmp / "corpus.jsonl", world.documents)
        write_questions(tmp / "questions.jsonl", world.questions)
        corpus = Corpus(world.documents, source=str(tmp / "corpus.jsonl"))
        labels = {q.id: QuestionLabels(q.question, dict.fromkeys(q.gold, Label.IMPORTANT)) for q in world.questions}
        collect(
            world.questions,
            SparseBM25Search(corpus),
            GoldChecker(corpus, labels),
            tmp / "traces",
            top_k=top_k,
            seed=demo.seed,
            progress=progress,
        )
    return paths


def resolve_data_paths(cfg: Config, progress: Callable[[int, int], None] | None = None) -> tuple[Path, Path, bool]:
    """(traces folder, corpus file, whether it is the demo world)."""
    ckpts, corpus = cfg.data.traces, cfg.data.corpus
    if ckpts is None and corpus is None:
        demo = build_demo(demo_dir(cfg), cfg.data.demo, top_k=cfg.env.top_k, progress=progress)
        return demo.traces, demo.corpus, True
    if ckpts is None or corpus is None:
        missing = "data.corpus" if corpus is None else "data.traces"
        raise UserError(f"{missing} is null: set both data.traces and data.corpus, or neither for the demo world")
    return Path(ckpts).expanduser(), Path(corpus).expanduser(), False


def load_dataset(
    cfg: Config, *, strict: bool | None = None, progress: Callable[[int, int], None] | None = None
) -> Dataset:
    """The run's corpus and states (the demo world when data.traces and data.corpus are null),
    split by question into train and eval."""
    traces_dir, corpus_path, is_demo = resolve_data_paths(cfg, progress)
    return read_dataset(cfg.data, traces_dir, corpus_path, strict=strict, is_demo=is_demo)


def make_checker(
    cfg: Config,
    dataset: Dataset,
    notice: Callable[[str], None] | None = None,
    policy: Policy | None = None,
) -> DocumentChecker:
    """The configured checker; an `llm` one owns its server and cache until `close()` (`notice`
    hears of a server still loading its model). A `base` one judges with `policy`'s base weights
    (adapter skipped), or with the base model loaded for it."""
    if cfg.checker.backend == "base":
        from searchgrpo.policy.judge import open_base_judge

        return open_base_judge(cfg, policy)
    if cfg.checker.backend == "gold":
        return GoldChecker(dataset.corpus, dataset.labels)
    if cfg.checker.backend == "simulated":
        from searchgrpo.agents.simulated_checker import SimulatedChecker

        c = cfg.checker
        gold = GoldChecker(dataset.corpus, dataset.labels)
        return SimulatedChecker(
            gold, noise=c.judge_noise, bias=c.judge_bias, bias_rate=c.judge_bias_rate, seed=c.judge_seed
        )
    return open_llm_checker(cfg.checker, cache_root(cfg), notice=notice)


def make_retriever(cfg: Config, dataset: Dataset) -> Retriever:
    """The configured retriever over the run's corpus (`retrieval.backend`)."""
    return open_retriever(cfg, dataset.corpus)


def make_env(
    cfg: Config,
    dataset: Dataset,
    checker: DocumentChecker | None = None,
    notice: Callable[[str], None] | None = None,
    policy: Policy | None = None,
) -> SearchRoundEnv:
    """The search-round environment; its checker `checker`, else the configured one (a `base` one
    on `policy`'s weights when given)."""
    return SearchRoundEnv(
        make_retriever(cfg, dataset),
        checker or make_checker(cfg, dataset, notice, policy),
        RewardCalculator(cfg.reward),
        top_k=cfg.env.top_k,
        min_clues=cfg.env.min_clues,
        max_clues=cfg.env.max_clues,
        max_clue_words=cfg.env.max_clue_words,
        clue_format=cfg.prompt.clue_format,
    )
