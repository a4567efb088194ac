"""`searchgrpo eval`: the fine-tuned Executor against the baseline, on the same states.

Every policy (the baseline is the base model without adapter; a checkpoint is base + its LoRA
adapter) writes clues for the same states: greedy by default, or n samples at a temperature with
the same seed for every policy. The clues run through the training environment. The report holds
per-question and aggregate metrics (mean reward, IMPORTANT discovery rate, recall@k, nDCG@k, mean
clues and documents), each policy's bootstrap CI, and the paired difference of every checkpoint
against the baseline with its CI; plus every detail per state: clues, docids, verdicts and reward
components. The same inputs and seed give the same report (but for its `created` time).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from searchgrpo.config import Config
from searchgrpo.data.corpus import load_corpus
from searchgrpo.data.dataset import Dataset
from searchgrpo.data.labels import QuestionLabels
from searchgrpo.data.traces import SearchState, load_states
from searchgrpo.episodes.world import load_dataset, make_env
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.evaluate.stats import mean_ci, paired_ratio_ci, ratio_ci
from searchgrpo.events import EvalProgress, EvalReportWritten, EvalStarted, EventSink, LogMessage
from searchgrpo.fileio import atomic_write_json
from searchgrpo.policy.scoring import ScoredState, score_policy
from searchgrpo.train.checkpoints import STATE_FILE

REPORT_FORMAT = "searchgrpo-eval-v1"
BASELINE = "baseline"
MEAN_METRICS = ("reward_mean", "recall_at_k", "ndcg_at_k", "clues_mean", "docs_mean")
CI_METRICS = ("reward_mean", "important_discovery", "recall_at_k", "ndcg_at_k")


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate and how."""

    baseline: bool = True
    """Score the base model without adapter."""
    checkpoints: list[str] = field(default_factory=list)
    """Training checkpoints (`runs/<id>/checkpoints/step-N`) or adapter folders to score."""
    output: str | None = None
    """The JSON report's path (default: {train.output_dir}/evals/eval-<time>.json)."""
    num_samples: int = 1
    """1: greedy clues. More: that many samples per state at `temperature`."""
    temperature: float = 1.0
    seed: int = 0
    """Seeds sampling and the bootstrap."""
    questions: str | None = None
    """Evaluate on a question set (normalised JSONL) instead: states come from a baseline
    multi-agent pass over it (cached), and its pooled documents form the corpus."""
    traces: str | None = None
    """Evaluate every state of this folder of multi-agent traces (needs `corpus`)."""
    corpus: str | None = None
    limit: int | None = None
    """Score at most this many states (the first ones, in a fixed order)."""
    bootstrap: int = 2000
    """Bootstrap resamples for the confidence intervals."""


@dataclass(frozen=True)
class PolicySpec:
    name: str
    checkpoint: str | None
    adapter: Path | None


# --------------------------------------------------------------------------- inputs


def resolve_checkpoint(path: str, cfg: Config) -> Path:
    """The adapter folder of a checkpoint path; one clear line when it is wrong."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"--checkpoint {p}: not found")
    adapter = p / "adapter" if (p / "adapter").is_dir() else p
    if not (adapter / "adapter_config.json").is_file():
        if (p / "checkpoints").is_dir():
            raise UserError(f"--checkpoint {p}: this is a run folder; give one of its checkpoints/step-* folders")
        raise UserError(f"--checkpoint {p}: not a checkpoint (no adapter/adapter_config.json)")
    if not (adapter / "adapter_model.safetensors").is_file():
        raise UserError(f"--checkpoint {p}: no adapter_model.safetensors (adapters are loaded from safetensors "
                        "only, never from pickled .bin files)")
    state_file = p / STATE_FILE
    if state_file.is_file():
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = None
        base = state.get("base_model") if isinstance(state, dict) else None
        if base is not None and base != cfg.model.base:
            raise UserError(f"--checkpoint {p}: trained on base model {base!r}, but model.base = {cfg.model.base!r}")
    return adapter


def policy_specs(request: EvalRequest, cfg: Config) -> list[PolicySpec]:
    specs = [PolicySpec(BASELINE, None, None)] if request.baseline else []
    names: set[str] = {BASELINE}
    for ckpt in request.checkpoints:
        adapter = resolve_checkpoint(ckpt, cfg)
        folder = Path(ckpt).resolve()
        name = folder.name if folder.name not in names else f"{folder.parent.parent.name}/{folder.name}"
        names.add(name)
        specs.append(PolicySpec(name, str(ckpt), adapter))
    if not specs:
        raise UserError("nothing to evaluate: give --baseline and/or --checkpoint PATH")
    return specs


def _all_states(cfg: Config, traces: str, corpus_path: str) -> Dataset:
    issues = IssueLog(cfg.data.strict)
    corpus = load_corpus(corpus_path, issues)
    loaded = load_states(traces, min_clues_per_round=cfg.data.min_clues_per_round,
                         max_samples_per_question=cfg.data.max_samples_per_question, strict=cfg.data.strict,
                         seed=cfg.data.split_seed)
    if not loaded.states:
        raise UserError(f"{traces}: no usable SEARCH-round states")
    issues.issues.extend(loaded.issues.issues)
    return Dataset(corpus, loaded.states, [], loaded.labels, issues, Path(traces), Path(corpus_path), False)


# --------------------------------------------------------------------------- running


def run_eval(cfg: Config, request: EvalRequest, sink: EventSink | None = None,
             stop: threading.Event | None = None) -> Path:
    """Score every policy on the same states and write the JSON report; returns its path."""
    import torch

    from searchgrpo.policy.model import load_policy
    from searchgrpo.policy.sampling import encode_prompt
    from searchgrpo.seeding import derive_seed

    sink = sink or (lambda e: None)
    specs = policy_specs(request, cfg)
    dataset, states = _dataset_and_states(cfg, request)
    report_issues(dataset.issues, sink)
    env = make_env(cfg, dataset)
    output = Path(request.output) if request.output else Path(cfg.train.output_dir) / "evals" / (
        time.strftime("eval-%Y%m%d-%H%M%S") + ".json")
    sink(EvalStarted([s.name for s in specs], len(states), str(output)))
    scored: dict[str, list[ScoredState]] = {}
    for spec in specs:
        if stop is not None and stop.is_set():
            raise UserError("eval stopped before it finished; no report written")
        policy = load_policy(cfg, adapter=spec.adapter)
        tok = policy.tokenizer
        prompts = [encode_prompt(tok, s, max_rows=cfg.data.max_table_rows, max_tokens=cfg.grpo.max_prompt_tokens,
                                 min_clues=cfg.env.min_clues, max_clues=cfg.env.max_clues) for s in states]
        torch.manual_seed(derive_seed(request.seed, "eval"))  # the same sampling noise for every policy
        scored[spec.name] = score_policy(
            policy.model, tok, env, states, prompts, dataset.labels, max_new_tokens=cfg.grpo.max_new_tokens,
            device=policy.device, batch_size=cfg.train.micro_batch_size, num_samples=request.num_samples,
            temperature=request.temperature,
            progress=lambda done, total, name=spec.name: sink(EvalProgress(name, done, total)),
        )
        del policy
    report = build_report(cfg, request, specs, states, scored, dataset.labels)
    atomic_write_json(output, json_safe(report))
    sink(EvalReportWritten(str(output), {name: _flat(agg) for name, agg in report["aggregate"].items()}))
    return output


def _dataset_and_states(cfg: Config, request: EvalRequest) -> tuple[Dataset, list[SearchState]]:
    if request.questions or request.traces:
        if request.questions:
            from searchgrpo.episodes.collect import collect_question_set

            paths = collect_question_set(cfg, Path(request.questions))
            ds = _all_states(cfg, str(paths.traces), str(paths.corpus))
            ds.issues.issues[:0] = paths.issues
        else:
            if not request.corpus:
                raise UserError("--traces needs --corpus (the JSONL corpus those traces searched)")
            ds = _all_states(cfg, request.traces, request.corpus)  # type: ignore[arg-type]
        states = ds.train
    else:
        ds = load_dataset(cfg)
        states = ds.eval
        if not states:
            raise UserError("the eval split is empty: raise data.eval_fraction, or give --questions")
    return ds, states[: request.limit] if request.limit else states


def report_issues(issues: IssueLog, sink: EventSink, shown: int = 20) -> None:
    """Each skipped input as a warning (the first `shown`), then how many were skipped in all."""
    for issue in issues.issues[:shown]:
        sink(LogMessage("warning", f"skipped {issue}"))
    if issues.issues:
        sink(LogMessage("warning", f"{len(issues)} malformed inputs skipped in all "
                                   "(data.strict / --strict stops at the first instead)"))


def _flat(agg: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in agg.items() if isinstance(v, float)}


# --------------------------------------------------------------------------- the report


def _sample_json(s: Any) -> dict[str, Any]:
    r = s.result
    return {
        "completion": s.completion.text,
        "clues": list(r.clues),
        "reward": r.reward.total,
        "components": r.reward.weighted,
        "counts": r.reward.counts,
        "docs": [{"docid": d.docid, "title": d.title, "label": d.label.value, "new": d.new,
                  "clue_index": d.clue_index, "rank": d.rank} for d in r.docs],
        "found": s.found,
        "wanted": s.wanted,
        "recall_at_k": s.found / s.wanted if s.wanted else None,
        "ndcg_at_k": s.ndcg if s.wanted else None,
    }


def _state_metrics(st: ScoredState) -> dict[str, float]:
    """Per-state values, each averaged over the state's samples (None-valued recall/ndcg skipped)."""
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
    return out


def build_report(
    cfg: Config,
    request: EvalRequest,
    specs: Sequence[PolicySpec],
    states: Sequence[SearchState],
    scored: dict[str, list[ScoredState]],
    labels: dict[str, QuestionLabels],
) -> dict[str, Any]:
    names = [s.name for s in specs]
    per_state = {name: [_state_metrics(st) for st in scored[name]] for name in names}
    qids = sorted({s.question_id for s in states})
    q_index = {q: i for i, q in enumerate(qids)}

    def per_question(name: str, metric: str) -> list[float]:
        """Each question's mean of `metric` over its states that have it (NaN if none)."""
        sums, counts = np.zeros(len(qids)), np.zeros(len(qids))
        for st, m in zip(states, per_state[name]):
            if metric in m:
                sums[q_index[st.question_id]] += m[metric]
                counts[q_index[st.question_id]] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return list(sums / counts)

    boot = {"resamples": request.bootstrap, "seed": request.seed}
    aggregate: dict[str, dict[str, Any]] = {}
    q_values: dict[str, dict[str, np.ndarray]] = {}
    for name in names:
        q_values[name] = {m: np.asarray(per_question(name, m)) for m in (*MEAN_METRICS, "found", "wanted")}
        agg: dict[str, Any] = {}
        for m in MEAN_METRICS:
            vals = q_values[name][m][np.isfinite(q_values[name][m])]
            agg[m] = float(vals.mean()) if vals.size else float("nan")
        found, wanted = q_values[name]["found"], q_values[name]["wanted"]
        agg["important_discovery"] = float(found.sum() / wanted.sum()) if wanted.sum() else 0.0
        ci = {m: list(mean_ci(q_values[name][m][np.isfinite(q_values[name][m])], **boot))
              for m in ("reward_mean", "recall_at_k", "ndcg_at_k")}
        ci["important_discovery"] = list(ratio_ci(found, wanted, **boot))
        agg["ci"] = ci
        aggregate[name] = agg

    paired: dict[str, dict[str, Any]] = {}
    if BASELINE in names:
        base = q_values[BASELINE]
        for name in names:
            if name == BASELINE:
                continue
            cur = q_values[name]
            entry: dict[str, Any] = {}
            for m in ("reward_mean", "recall_at_k", "ndcg_at_k"):
                diff = cur[m] - base[m]
                diff = diff[np.isfinite(diff)]
                entry[m] = {"diff": float(diff.mean()) if diff.size else float("nan"), "ci": list(mean_ci(diff, **boot))}
            entry["important_discovery"] = {
                "diff": aggregate[name]["important_discovery"] - aggregate[BASELINE]["important_discovery"],
                "ci": list(paired_ratio_ci(base["found"], cur["found"], base["wanted"], **boot)),
            }
            paired[name] = entry

    questions_text = {s.question_id: s.question for s in states}
    state_counts = {q: 0 for q in qids}
    for s in states:
        state_counts[s.question_id] += 1
    return {
        "format": REPORT_FORMAT,
        "created": time.time(),
        "seed": request.seed,
        "top_k": cfg.env.top_k,
        "states": len(states),
        "questions": len(qids),
        "decoding": {"greedy": request.num_samples == 1, "num_samples": request.num_samples,
                     "temperature": request.temperature},
        "config": cfg.to_dict(),
        "request": asdict(request),
        "policies": [{"name": s.name, "checkpoint": s.checkpoint} for s in specs],
        "aggregate": aggregate,
        "paired": paired,
        "per_question": [
            {
                "question_id": q,
                "question": questions_text[q],
                "states": state_counts[q],
                "reward": {n: _finite(q_values[n]["reward_mean"][i]) for n in names},
                "recall_at_k": {n: _finite(q_values[n]["recall_at_k"][i]) for n in names},
            }
            for i, q in enumerate(qids)
        ],
        "per_state": [
            {
                "state_id": st.state_id,
                "question_id": st.question_id,
                "question": st.question,
                "round": st.round,
                "results": {n: {"samples": [_sample_json(s) for s in scored[n][i].samples]} for n in names},
            }
            for i, st in enumerate(states)
        ],
    }


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def json_safe(obj: Any) -> Any:
    """NaN and infinities (no data for a metric) become null, so the report is strict JSON."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
