"""`searchgrpo eval --episodes`: the Executor judged where it is used, inside whole episodes.

For each held-out question, the whole multi-agent loop is played (`searchgrpo.episodes.play`:
the rule Planner and EntityManager, BM25, the configured DocumentChecker) once with each policy
as the Executor, greedily, for at most `eval.episode_rounds` rounds. Per question and policy:

- evidence recall after each round r: the share of the question's gold documents (not known at
  the start) that the episode has retrieved by the end of round r (flat after the ANSWER round);
- rounds to full evidence: the first round at which every gold document is retrieved, censored at
  rounds + 1 when it never is; its median over questions (and the share fully covered);
- checker documents per IMPORTANT document: documents sent to the checker over IMPORTANT
  verdicts, pooled over questions: what each useful document costs in checker calls.

Each is compared with the baseline over the same questions, with bootstrap CIs (`stats.py`). The
JSON report keeps every episode's rounds, clues, documents and verdicts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from searchgrpo.agents.rules import RuleEntityManager, RulePlanner
from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.clue_checks import invented_numbers, numbers_in, state_text
from searchgrpo.episodes.play import Episode, play, question_starts
from searchgrpo.errors import JobCancelled, UserError, check_cancel
from searchgrpo.evaluate.clue_stats import clue_stats
from searchgrpo.evaluate.held_out import held_out_overlap
from searchgrpo.evaluate.inputs import (
    BASELINE,
    EvalRequest,
    cancelled_note,
    eval_dataset,
    policy_specs,
    report_path,
    warn_skipped_inputs,
)
from searchgrpo.evaluate.stats import compare_policies, median_diff_ci
from searchgrpo.events import EvalProgress, EvalReportWritten, EvalStarted, EventSink, LogMessage
from searchgrpo.fileio import atomic_write_json, json_safe
from searchgrpo.world import make_checker, make_retriever

REPORT_FORMAT = "searchgrpo-episodes-v1"


def round_key(r: int) -> str:
    return f"recall_round_{r}"


def run_episode_eval(
    cfg: Config, request: EvalRequest, sink: EventSink | None = None, stop: threading.Event | None = None
) -> Path:
    """Play every held-out question with each policy and write the JSON report; returns its path."""
    from searchgrpo.policy.executor import PolicyExecutor
    from searchgrpo.policy.model import load_frozen_base, policy_on

    sink = sink or (lambda e: None)
    rounds = request.max_rounds or cfg.eval.episode_rounds
    if rounds < 1:
        raise UserError(f"--max-rounds {rounds}: expected at least 1")
    budget = request.doc_budget if request.doc_budget is not None else cfg.eval.episode_doc_budget
    output = report_path(cfg, request, "episodes")
    specs = policy_specs(request, cfg)
    dataset = eval_dataset(cfg, request)
    warn_skipped_inputs(dataset.issues, sink)
    qids = sorted({s.question_id for s in dataset.eval})
    qids = qids[: request.limit] if request.limit else qids
    held_out, notes = held_out_overlap(specs, dataset, qids, allow_overlap=request.allow_overlap)
    for note in notes:
        sink(LogMessage("warning", note))
    starts = question_starts(dataset, qids, dataset.eval)
    retriever = make_retriever(cfg, dataset)
    # An in-process judge and the policies share one base model: each adapter is attached to it in turn.
    shared = load_frozen_base(cfg) if cfg.checker.backend == "base" else None
    checker = make_checker(cfg, dataset, policy=shared)
    sink(EvalStarted([s.name for s in specs], len(starts) * rounds, str(output)))
    played: dict[str, list[Episode]] = {}
    fallbacks: dict[str, dict[str, int]] = {}
    episodes_done = 0
    try:
        for spec in specs:
            check_cancel(stop, "")

            def ended(_: Episode) -> None:
                nonlocal episodes_done
                episodes_done += 1

            def progress(episodes: Sequence[Episode], name: str = spec.name) -> None:
                sink(EvalProgress(name, rounds_played(episodes, rounds), len(starts) * rounds))

            with policy_on(cfg, spec.adapter, shared) as policy:
                executor = PolicyExecutor(
                    cfg, policy, use_adapter=spec.adapter is not None, seed=request.seed, stop=stop
                )
                played[spec.name] = play(
                    starts,
                    planner=RulePlanner(rounds),
                    executor=executor,
                    entity_manager=RuleEntityManager(),
                    retriever=retriever,
                    checker=checker,
                    top_k=cfg.env.top_k,
                    doc_budget=budget,
                    on_done=ended,
                    on_turn=progress,
                )
                fallbacks[spec.name] = {"clue_sets": executor.calls, "rule_fallbacks": executor.fallbacks}
                del executor
    except JobCancelled:
        raise JobCancelled(cancelled_note(episodes_done, len(specs) * len(starts), "episodes")) from None
    finally:
        checker.close()
    report = build_episode_report(
        cfg, request, [s.name for s in specs], [s.checkpoint for s in specs], played, rounds, budget, retriever.corpus
    )
    # How often a policy wrote nothing readable and the rule Executor's clues stood in for it.
    report["executor"] = fallbacks
    report["held_out"] = held_out
    atomic_write_json(output, json_safe(report))
    sink(
        EvalReportWritten(
            str(output),
            {n: {k: v for k, v in agg.items() if isinstance(v, float)} for n, agg in report["aggregate"].items()},
        )
    )
    return output


# --------------------------------------------------------------------------- measuring episodes


def rounds_played(episodes: Sequence[Episode], rounds: int) -> int:
    """Progress of a lockstep episode eval in question-rounds, out of len(episodes) x `rounds`: an
    episode's rounds played so far, all `rounds` once it has ended (its Planner answered). Every
    turn of the loop adds one per live episode, so the pace is steady where ended episodes come
    in bursts; the time left it gives tends high (an episode that answers sooner skips rounds)."""
    return sum(rounds if e.done else min(e.next_round - 1, rounds) for e in episodes)


def episode_values(e: Episode, rounds: int) -> dict[str, float]:
    """One episode's numbers (recall keys are NaN when the question has no gold left to find)."""
    wanted = e.start.gold - set(e.start.initial.discovered_docids)
    out: dict[str, float] = {}
    full = float(rounds + 1)
    for r in range(1, rounds + 1):
        recall = len(e.discovered_after(r) & wanted) / len(wanted) if wanted else float("nan")
        out[round_key(r)] = recall
        if wanted and recall >= 1.0 and full > rounds:
            full = float(r)
    out["rounds_to_full"] = full if wanted else float("nan")
    out["full_coverage"] = float(full <= rounds) if wanted else float("nan")
    out["docs_checked"] = float(sum(len(r.checked) for r in e.rounds))
    out["important_found"] = float(sum(r.new_important for r in e.rounds))
    out["search_rounds"] = float(sum(1 for r in e.rounds if r.strategy == "SEARCH"))
    out["clues_per_search"] = (
        sum(len(r.clues) for r in e.rounds if r.strategy == "SEARCH") / out["search_rounds"]
        if out["search_rounds"]
        else float("nan")
    )
    return out


def _round_json(e: Episode, corpus: Any) -> list[dict[str, Any]]:
    out = []
    for r in e.rounds:
        item: dict[str, Any] = {"round": r.round, "strategy": r.strategy}
        if r.strategy == "SEARCH":
            item["clues"] = list(r.clues)
            item["checked"] = [
                {"docid": d, "title": getattr(corpus.get(d), "title", ""), "label": v, "gold": d in e.start.gold}
                for d, v in zip(r.checked, r.verdicts)
            ]
            item["new_important"] = r.new_important
        out.append(item)
    return out


def _clue_samples(e: Episode) -> list[dict[str, Any]]:
    """Each SEARCH round's clue set as a clue-check sample, with its invented numbers counted."""
    out, before = [], e.start.initial
    for r in e.rounds:
        if r.strategy == "SEARCH":
            known = numbers_in(
                state_text(SearchState("", e.start.question_id, e.start.question, (), r.round, before, ()))
            )
            invented = sum(1 for c in r.clues if invented_numbers(c, known))
            out.append({"clues": list(r.clues), "counts": {"invented_number": float(invented)}})
        before = r.after
    return out


def build_episode_report(
    cfg: Config,
    request: EvalRequest,
    names: Sequence[str],
    checkpoints: Sequence[str | None],
    played: dict[str, list[Episode]],
    rounds: int,
    budget: int | None,
    corpus: Any,
) -> dict[str, Any]:
    curve = [round_key(r) for r in range(1, rounds + 1)]
    means = [*curve, "full_coverage", "search_rounds", "clues_per_search", "docs_checked"]
    rows = {n: [episode_values(e, rounds) for e in played[n]] for n in names}
    values = {
        n: {
            k: np.asarray([row[k] for row in rows[n]], dtype=np.float64)
            for k in (*means, "rounds_to_full", "important_found")
        }
        for n in names
    }
    baseline = BASELINE if BASELINE in names else None
    aggregate, paired = compare_policies(
        values,
        means=means,
        ratios={"checker_docs_per_important": ("docs_checked", "important_found")},
        baseline=baseline,
        resamples=request.bootstrap,
        seed=request.seed,
    )
    boot = {"resamples": request.bootstrap, "seed": request.seed}
    for n in names:
        with_gold = values[n]["rounds_to_full"][np.isfinite(values[n]["rounds_to_full"])]
        aggregate[n]["median_rounds_to_full"] = float(np.median(with_gold)) if with_gold.size else float("nan")
        if baseline and n != baseline:
            a, b = values[baseline]["rounds_to_full"], values[n]["rounds_to_full"]
            keep = np.isfinite(a) & np.isfinite(b)
            paired[n]["median_rounds_to_full"] = {
                "diff": float(np.median(b[keep]) - np.median(a[keep])) if keep.any() else float("nan"),
                "ci": list(median_diff_ci(a[keep], b[keep], **boot)),
            }
    first = played[names[0]]
    return {
        "format": REPORT_FORMAT,
        "mode": "episodes",
        "created": time.time(),
        "seed": request.seed,
        "top_k": cfg.env.top_k,
        "rounds": rounds,
        "doc_budget": budget,
        "headline": round_key(min(3, rounds)),
        "questions": len(first),
        "checker": cfg.checker.backend,
        "config": cfg.to_dict(),
        "request": asdict(request),
        "policies": [{"name": n, "checkpoint": c} for n, c in zip(names, checkpoints)],
        "aggregate": aggregate,
        "paired": paired,
        "curve": {n: [aggregate[n][k] for k in curve] for n in names},
        "clue_checks": {n: clue_stats([s for e in played[n] for s in _clue_samples(e)]) for n in names},
        "per_question": [
            {
                "question_id": e.start.question_id,
                "question": e.start.question,
                "gold": sorted(e.start.gold),
                "results": {n: {**rows[n][i], "rounds": _round_json(played[n][i], corpus)} for n in names},
            }
            for i, e in enumerate(first)
        ],
    }
