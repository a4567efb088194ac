"""The trainer's side of sampling with another engine (`grpo.sampler: server`).

The server's log-probs of the sampled tokens are not the trainer's (another kernel, a quantised
base), so the samples come from a slightly different policy than the one being trained. The
step recomputes the trainer's log-probs of the samples before the update (its old log-probs, for
the PPO ratio) and weights each token's policy-gradient term by the truncated importance weight
min(pi_trainer / pi_sampler, grpo.tis_cap) (`grpo.truncated_importance_weights`); a token the
server gave no log-prob for (NaN) keeps weight 1. Logged, over the tokens that enter the loss
and have a sampler log-prob:

- `sampler/kl`: mean of log pi_sampler - log pi_trainer over the sampled tokens, an estimate of
  KL(sampler || trainer), since the tokens were drawn from the sampler;
- `sampler/abs_logp_diff`: mean |log pi_sampler - log pi_trainer|;
- `sampler/tis_clipped_frac`: the fraction of tokens whose ratio the cap cut;
- `sampler/publish_s`: seconds spent handing the new adapter to the server this step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from searchgrpo.policy.sampling import Completion
from searchgrpo.train.grpo import truncated_importance_weights


@dataclass
class SamplerCorrection:
    """Per micro-batch importance weights, and the sums behind the `sampler/*` metrics."""

    weights: list[torch.Tensor] = field(default_factory=list)
    sums: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    """tokens, sum of (sampler - trainer), sum of |sampler - trainer|, clipped tokens."""

    def metrics(self, dist: Any, publish_s: float = 0.0) -> dict[str, float]:
        tokens, diff, absolute, clipped = dist.sum(self.sums)
        tokens = max(tokens, 1.0)
        return {
            "sampler/kl": diff / tokens,
            "sampler/abs_logp_diff": absolute / tokens,
            "sampler/tis_clipped_frac": clipped / tokens,
            "sampler/publish_s": publish_s,
        }


def needs_correction(completions: Sequence[Completion]) -> bool:
    """The samples came with the sampler's own log-probs (a server sampler)."""
    return any(c.sampler_logprobs is not None for c in completions)


def sampler_correction(
    batches: Sequence[tuple[list[int], Any]],
    completions: Sequence[Completion],
    trainer_logp: Sequence[torch.Tensor],
    cap: float,
) -> SamplerCorrection:
    """Weights for each micro-batch (`batches`: (rows, batch) as the step lays them out, rows
    indexing `completions`), from the trainer's log-probs of the same tokens (`trainer_logp`)."""
    out = SamplerCorrection()
    for (rows, batch), trainer in zip(batches, trainer_logp):
        mask = batch.completion_mask.bool()
        sampler = torch.zeros(mask.shape, dtype=trainer.dtype)
        for i, r in enumerate(rows):
            lp = completions[r].sampler_logprobs
            if lp is None or len(lp) != len(completions[r].token_ids):
                raise ValueError(
                    f"completion {r}: {0 if lp is None else len(lp)} sampler log-probs for "
                    f"{len(completions[r].token_ids)} tokens"
                )
            sampler[i, : len(lp)] = torch.tensor(lp, dtype=trainer.dtype)
        sampler = sampler.to(trainer.device)
        known = mask & torch.isfinite(sampler)  # a NaN: the server gave no log-prob for that token
        weight, clipped = truncated_importance_weights(trainer, torch.where(known, sampler, trainer), cap)
        out.weights.append(weight)
        diff = (sampler - trainer)[known]
        out.sums = [
            a + b
            for a, b in zip(
                out.sums, [float(known.sum()), float(diff.sum()), float(diff.abs().sum()), float(clipped[known].sum())]
            )
        ]
    return out
