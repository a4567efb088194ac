"""`searchgrpo eval`: the fine-tuned Executor against the baseline, one SEARCH round at a time.

Every policy (the baseline is the base model without adapter; a checkpoint is base + its LoRA
adapter) writes clues for the same states: greedy by default, or n samples at a temperature with
the same seed for every policy. The clues run through the training environment. The report holds
per-question and aggregate metrics (the headline recall at a fixed document budget, recall of the
whole union, IMPORTANT discovery rate, nDCG, mean reward, clues and documents per state), each
policy's bootstrap CI, the paired difference of every checkpoint against the baseline with its
CI, clue-text checks (`clue_stats.py`, with the share of clues that add nothing to their set's
finds), and every detail per state: clues with each one's leave-one-out credit, docids, verdicts
and reward components. The same inputs and seed give the same report (but for its `created` time).

`--episodes` plays whole questions instead (`episode_eval.py`); `searchgrpo.evaluate.run_eval` runs either.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.errors import JobCancelled, check_cancel
from searchgrpo.evaluate.clue_stats import clue_stats
from searchgrpo.evaluate.held_out import held_out_overlap
from searchgrpo.evaluate.inputs import (
    BASELINE,
    EvalRequest,
    PolicySpec,
    cancelled_note,
    eval_dataset,
    eval_states,
    policy_specs,
    report_path,
    warn_skipped_inputs,
)
from searchgrpo.evaluate.stats import compare_policies
from searchgrpo.events import EvalProgress, EvalReportWritten, EvalStarted, EventSink, LogMessage
from searchgrpo.fileio import atomic_write_json, json_safe
from searchgrpo.policy.scoring import ScoredState, score_policy
from searchgrpo.world import make_env

REPORT_FORMAT = "searchgrpo-eval-v2"


def budget_key(budget: int) -> str:
    return f"recall_at_{budget}"


def run_round_eval(
    cfg: Config, request: EvalRequest, sink: EventSink | None = None, stop: threading.Event | None = None
) -> Path:
    """Score every policy on the same states and write the JSON report; returns its path."""
    import torch

    from searchgrpo.policy.model import load_frozen_base, policy_on
    from searchgrpo.policy.sampling import Prompts
    from searchgrpo.seeding import derive_seed

    sink = sink or (lambda e: None)
    output = report_path(cfg, request)
    specs = policy_specs(request, cfg)
    dataset = eval_dataset(cfg, request)
    states = eval_states(dataset, request)
    warn_skipped_inputs(dataset.issues, sink)
    held_out, notes = held_out_overlap(
        specs, dataset, [s.question_id for s in states], allow_overlap=request.allow_overlap
    )
    for note in notes:
        sink(LogMessage("warning", note))
    # An in-process judge and the policies share one base model: each adapter is attached to it in turn.
    shared = load_frozen_base(cfg) if cfg.checker.backend == "base" else None
    env = make_env(cfg, dataset, policy=shared)
    sink(EvalStarted([s.name for s in specs], len(states), str(output)))
    scored: dict[str, list[ScoredState]] = {}
    done = {s.name: 0 for s in specs}

    def progress(name: str, finished: int, total: int) -> None:
        done[name] = finished
        sink(EvalProgress(name, finished, total))

    try:
        for spec in specs:
            check_cancel(stop, "")
            with policy_on(cfg, spec.adapter, shared) as policy:
                tok = policy.tokenizer
                prompts = [Prompts(tok, cfg).encode(s) for s in states]
                torch.manual_seed(derive_seed(request.seed, "eval"))  # the same sampling noise for every policy
                scored[spec.name] = score_policy(
                    policy.model,
                    tok,
                    env,
                    states,
                    prompts,
                    dataset.labels,
                    max_new_tokens=cfg.grpo.max_new_tokens,
                    device=policy.device,
                    batch_size=cfg.train.micro_batch_size,
                    num_samples=request.num_samples,
                    temperature=request.temperature,
                    budgets=cfg.eval.budgets,
                    progress=functools.partial(progress, spec.name),
                    stop=stop,
                )
    except JobCancelled:
        raise JobCancelled(cancelled_note(sum(done.values()), len(specs) * len(states), "states")) from None
    finally:
        env.checker.close()
    report = build_report(cfg, request, specs, states, scored)
    report["held_out"] = held_out
    atomic_write_json(output, json_safe(report))
    sink(EvalReportWritten(str(output), {name: _flat(agg) for name, agg in report["aggregate"].items()}))
    return output


def _flat(agg: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in agg.items() if isinstance(v, float)}


# --------------------------------------------------------------------------- the report


def _sample_json(s: Any, budgets: Sequence[int]) -> dict[str, Any]:
    r = s.result
    return {
        "completion": s.completion.text,
        "clues": list(r.clues),
        "reward": r.reward.total,
        "components": r.reward.weighted,
        "counts": r.reward.counts,
        "truncated": r.truncated,
        "invented": list(r.invented),
        "clue_marginals": list(r.clue_credit.marginals),
        "clue_shares": list(r.clue_credit.shares),
        "docs": [
            {
                "docid": d.docid,
                "title": d.title,
                "label": d.label.value,
                "new": d.new,
                "clue_index": d.clue_index,
                "rank": d.rank,
            }
            for d in r.docs
        ],
        "found": s.found,
        "wanted": s.wanted,
        "recall_at_k": s.found / s.wanted if s.wanted else None,
        **{budget_key(b): s.recall_at[b] if s.wanted else None for b in budgets},
        "ndcg_at_k": s.ndcg if s.wanted else None,
    }


def _state_metrics(st: ScoredState, budgets: Sequence[int]) -> dict[str, float]:
    """Per-state values, each averaged over the state's samples (recall and nDCG only where
    something was wanted)."""
    n = len(st.samples)
    out = {
        "reward_mean": sum(s.result.reward.total for s in st.samples) / n,
        "clues_mean": sum(len(s.result.clues) for s in st.samples) / n,
        "docs_mean": sum(len(s.result.docs) for s in st.samples) / n,
        "found": sum(s.found for s in st.samples) / n,
        "wanted": sum(s.wanted for s in st.samples) / n,
    }
    if st.samples[0].wanted:
        out["recall_at_k"] = sum(s.found / s.wanted for s in st.samples) / n
        out["ndcg_at_k"] = sum(s.ndcg for s in st.samples) / n
        for b in budgets:
            out[budget_key(b)] = sum(s.recall_at[b] for s in st.samples) / n
    return out


def build_report(
    cfg: Config,
    request: EvalRequest,
    specs: Sequence[PolicySpec],
    states: Sequence[SearchState],
    scored: dict[str, list[ScoredState]],
) -> dict[str, Any]:
    names = [s.name for s in specs]
    budgets = list(cfg.eval.budgets)
    means = ["reward_mean", *(budget_key(b) for b in budgets), "recall_at_k", "ndcg_at_k", "clues_mean", "docs_mean"]
    per_state = {name: [_state_metrics(st, budgets) for st in scored[name]] for name in names}
    qids = sorted({s.question_id for s in states})
    q_index = {q: i for i, q in enumerate(qids)}

    def per_question(name: str, metric: str) -> np.ndarray:
        """Each question's mean of `metric` over its states that have it (NaN if none)."""
        sums, counts = np.zeros(len(qids)), np.zeros(len(qids))
        for st, m in zip(states, per_state[name]):
            if metric in m:
                sums[q_index[st.question_id]] += m[metric]
                counts[q_index[st.question_id]] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums / counts

    def per_question_sum(name: str, metric: str) -> np.ndarray:
        sums = np.zeros(len(qids))
        for st, m in zip(states, per_state[name]):
            sums[q_index[st.question_id]] += m[metric]
        return sums

    values = {
        name: {
            **{m: per_question(name, m) for m in means},
            "found": per_question_sum(name, "found"),
            "wanted": per_question_sum(name, "wanted"),
        }
        for name in names
    }
    aggregate, paired = compare_policies(
        values,
        means=means,
        ratios={"important_discovery": ("found", "wanted")},
        baseline=BASELINE if BASELINE in names else None,
        resamples=request.bootstrap,
        seed=request.seed,
    )
    samples_json = {
        n: [[_sample_json(s, budgets) for s in scored[n][i].samples] for i in range(len(states))] for n in names
    }
    clue_checks = {n: clue_stats([s for per in samples_json[n] for s in per]) for n in names}
    questions_text = {s.question_id: s.question for s in states}
    state_counts = {q: 0 for q in qids}
    for s in states:
        state_counts[s.question_id] += 1
    headline = budget_key(budgets[-1])
    return {
        "format": REPORT_FORMAT,
        "mode": "rounds",
        "created": time.time(),
        "seed": request.seed,
        "top_k": cfg.env.top_k,
        "budgets": budgets,
        "headline": headline,
        "states": len(states),
        "questions": len(qids),
        "checker": cfg.checker.backend,
        "decoding": {
            "greedy": request.num_samples == 1,
            "num_samples": request.num_samples,
            "temperature": request.temperature,
        },
        "config": cfg.to_dict(),
        "request": asdict(request),
        "policies": [{"name": s.name, "checkpoint": s.checkpoint} for s in specs],
        "aggregate": aggregate,
        "paired": paired,
        "clue_checks": clue_checks,
        "per_question": [
            {
                "question_id": q,
                "question": questions_text[q],
                "states": state_counts[q],
                "reward": {n: _finite(values[n]["reward_mean"][i]) for n in names},
                headline: {n: _finite(values[n][headline][i]) for n in names},
                "recall_at_k": {n: _finite(values[n]["recall_at_k"][i]) for n in names},
            }
            for i, q in enumerate(qids)
        ],
        "per_state": [
            {
                "state_id": st.state_id,
                "question_id": st.question_id,
                "question": st.question,
                "round": st.round,
                "results": {n: {"samples": samples_json[n][i]} for n in names},
            }
            for i, st in enumerate(states)
        ],
    }


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None
