"""The merge's parity check: does the merged model behave as the unmerged adapter model does, in the
same dtype?

A merged 16-bit model is served in place of base + adapter, so what matters is whether it predicts
what base + adapter predicts when both run in that dtype: the base's weights in the output dtype
with the adapter applied at run time (PEFT's own forward), against the merged weights
`round(W + scale * B @ A)` reloaded from the written folder. Comparing either with a float32
reference measures the 16-bit rounding of every weight, not the merge: rounding W + BA to bfloat16
moved SmolLM2-135M's log-probs by up to 0.57 after 15 demo steps, a healthy merge that an absolute
float32 tolerance refused.

Both models score the same tokens: the reference's greedy continuation of each probe prompt,
teacher-forced. Per token: the log-prob each model gives it, each model's top-1 token and the
reference's top-two margin. The figures (`parity_figures`): max and mean |delta log-prob|, the
share of positions whose top-1 token agrees, and the disagreements that are not near ties (the
reference's margin above `Tolerance.tie`). Tolerances per dtype (`TOLERANCES`) come from measured
rounding (docs/evaluation.md, "Merge parity": `benchmarks/merge_parity.py`), with headroom. A
damaged adapter gives non-finite log-probs and fails at once, naming the model that produced them;
a dropped or mis-scaled adapter fails in float16 and float32 and on an adapter that moved the
model (the tiny model's), but not in bfloat16 while the adapter's effect is still below bfloat16's
own rounding (SmolLM2 after 15 demo steps): then the served model would not differ either.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgrpo.errors import JobCancelled, UserError

PROBE_STATES = 4
"""Probe prompts: real Executor prompts from the data."""
PROBE_NEW_TOKENS = 32
"""Greedy tokens scored per probe prompt."""


@dataclass(frozen=True)
class Tolerance:
    """What a healthy merge in one dtype stays within (see the module docstring)."""

    max_delta: float
    """Largest |delta log-prob| of any probe token."""
    mean_delta: float
    """Mean |delta log-prob| over the probe tokens."""
    tie: float
    """A top-1 disagreement where the reference's top-two margin (in log-prob) is at most this is a
    near tie that rounding may flip: reported, not failed."""
    flips: float
    """Share of probe positions allowed to disagree on the top-1 token outside near ties."""


TOLERANCES = {
    "float32": Tolerance(max_delta=1e-3, mean_delta=1e-4, tie=1e-3, flips=0.0),
    "float16": Tolerance(max_delta=0.2, mean_delta=0.01, tie=0.05, flips=0.01),
    "bfloat16": Tolerance(max_delta=1.0, mean_delta=0.05, tie=0.5, flips=0.02),
}
"""Per output dtype, about 3-5x the worst healthy figure measured (docs/evaluation.md, "Merge
parity"): SmolLM2-135M after 9, 12 and 15 demo steps, max |delta| 0.25 and mean 0.017 in
bfloat16, 0.020 and 0.0021 in float16; the tiny model, 0.004 and 0.0013 in bfloat16."""


class ParityError(UserError):
    """The merged model does not reproduce the unmerged adapter model in its dtype."""


class MergeCancelled(JobCancelled):
    """A merge was asked to stop (the console's `q`, or Ctrl-C)."""


@dataclass(frozen=True)
class TokenScores:
    """One probe's teacher-forced scores of the reference continuation under one model."""

    logp: list[float]
    """Log-prob of each continuation token."""
    top: list[int]
    """The model's own top-1 token at each position."""
    margin: list[float]
    """Top-1 minus top-2 log-prob at each position."""


def check_stop(stop: threading.Event | None, what: str) -> None:
    """Raise MergeCancelled when `stop` is set (checked between stages and between tokens)."""
    if stop is not None and stop.is_set():
        raise MergeCancelled(f"merge cancelled during {what}; its folder was not written")


def greedy_continuations(
    model: Any, probe: Sequence[Sequence[int]], stops: set[int], stop: threading.Event | None = None
) -> list[list[int]]:
    """The greedy continuation of each probe prompt (at most PROBE_NEW_TOKENS, ending at a stop token)."""
    import torch

    from searchgrpo.policy.decoders import cache_argument

    cache_arg = cache_argument(model)
    out: list[list[int]] = []
    with torch.no_grad():
        for prompt in probe:
            tokens: list[int] = []
            step = model(input_ids=torch.tensor([list(prompt)]), use_cache=True)
            for _ in range(PROBE_NEW_TOKENS):
                check_stop(stop, "the parity probe")
                token = int(step.logits[0, -1].float().argmax())
                tokens.append(token)
                if token in stops:
                    break
                cache = getattr(step, "cache", None) or step.past_key_values
                step = model(input_ids=torch.tensor([[token]]), use_cache=True, **{cache_arg: cache})
            out.append(tokens)
    return out


def teacher_forced(
    model: Any,
    probe: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    stop: threading.Event | None = None,
) -> list[TokenScores]:
    """Each continuation scored under `model` after its prompt (one forward pass per probe)."""
    import torch

    scores = []
    with torch.no_grad():
        for prompt, tokens in zip(probe, continuations):
            check_stop(stop, "the parity check")
            ids = torch.tensor([[*prompt, *tokens]])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : len(prompt) - 1 + len(tokens)]
            logp = logits.float().log_softmax(-1)
            top2 = logp.topk(2, dim=-1)
            chosen = logp.gather(1, torch.tensor(tokens).unsqueeze(1)).squeeze(1)
            scores.append(
                TokenScores(
                    chosen.tolist(),
                    top2.indices[:, 0].tolist(),
                    (top2.values[:, 0] - top2.values[:, 1]).tolist(),
                )
            )
    return scores


def parity_figures(ref: Sequence[TokenScores], got: Sequence[TokenScores], dtype: str) -> dict[str, Any]:
    """Compare the merged model's scores (`got`) with the unmerged adapter model's (`ref`), both in
    `dtype`: the figures, `passed`, and a `reason` when not (pure: tested on hand-made scores)."""
    tol = TOLERANCES[dtype]
    deltas: list[float] = []
    margins: list[float] = []
    positions = agree = near_ties = 0
    nonfinite = ""
    for r, g in zip(ref, got):
        for lr, lg, tr, tg, margin in zip(r.logp, g.logp, r.top, g.top, r.margin):
            positions += 1
            if not math.isfinite(lr):
                nonfinite = nonfinite or "adapter"
            elif not math.isfinite(lg):
                nonfinite = nonfinite or "merged"
            else:
                deltas.append(abs(lr - lg))
            if tr == tg:
                agree += 1
                continue
            margins.append(margin)
            if math.isfinite(margin) and margin <= tol.tie:
                near_ties += 1
    flips = positions - agree - near_ties
    max_delta = max(deltas, default=0.0)
    mean_delta = sum(deltas) / len(deltas) if deltas else 0.0
    figures: dict[str, Any] = {
        "dtype": dtype,
        "compared_with": f"base + adapter in {dtype}",
        "probes": len(ref),
        "tokens": positions,
        "max_abs_logprob_delta": max_delta,
        "mean_abs_logprob_delta": mean_delta,
        "top1_agreement": agree / positions if positions else 1.0,
        "near_ties": near_ties,
        "flips": flips,
        "disagreement_margins": sorted(margins)[:10],
        "tolerance": {
            "max_delta": tol.max_delta,
            "mean_delta": tol.mean_delta,
            "tie": tol.tie,
            "flips": tol.flips,
        },
    }
    figures["reason"] = _reason(figures, tol, nonfinite, positions)
    figures["passed"] = not figures["reason"]
    return figures


def _reason(figures: dict[str, Any], tol: Tolerance, nonfinite: str, positions: int) -> str:
    if nonfinite == "adapter":
        return "the unmerged adapter model gives non-finite log-probs: the adapter's weights are damaged"
    if nonfinite == "merged":
        return f"the merged model gives non-finite log-probs in {figures['dtype']} (its weights overflow it)"
    if not positions:
        return "the probe scored no tokens"
    parts = []
    if figures["max_abs_logprob_delta"] > tol.max_delta:
        parts.append(f"max |delta log-prob| {figures['max_abs_logprob_delta']:.4g} > {tol.max_delta:g}")
    if figures["mean_abs_logprob_delta"] > tol.mean_delta:
        parts.append(f"mean |delta log-prob| {figures['mean_abs_logprob_delta']:.4g} > {tol.mean_delta:g}")
    if figures["flips"] > tol.flips * positions:
        parts.append(
            f"top-1 token differs at {figures['flips']} of {positions} positions outside near ties "
            f"(allowed {math.floor(tol.flips * positions)})"
        )
    return "; ".join(parts)


def remedy(figures: dict[str, Any]) -> str:
    """What to do about a failed parity check, in words."""
    reason = figures.get("reason", "")
    if "adapter's weights are damaged" in reason:
        return (
            "the checkpoint's adapter_model.safetensors was changed after training wrote it (the trainer never "
            "writes non-finite weights): merge an earlier checkpoint, or resume training from one"
        )
    if "overflow" in reason:
        return "merge with --dtype float32 (or bfloat16, whose range is float32's)"
    if figures.get("dtype") != "float32":
        return (
            "check that model.base is the model the run trained on; if it is, merge with --dtype float32 and "
            "report the figures (searchgrpo_merge.json records them)"
        )
    return "check that model.base is the model the run trained on, and that the checkpoint is complete"
