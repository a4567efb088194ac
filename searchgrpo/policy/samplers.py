"""Where GRPO's samples come from (`grpo.sampler`).

- `local`: `generate` on the trainer's own model (searchgrpo/policy/sampling.py). The samples'
  log-probs are the trainer's, so no correction is needed.
- `server`: an inference server that serves the base model with the current LoRA adapter
  (`ServerSampler`, searchgrpo/policy/server_sampler.py: llama.cpp in this process). It is faster
  where the server's kernels are, but its numbers are not the trainer's (another kernel, a
  quantised base), so each completion carries the sampler's per-token log-probs and the loss
  corrects for the difference (truncated importance sampling, searchgrpo/train/grpo.py).

A sampler has `sample(prompts, num_samples=, max_new_tokens=, temperature=, top_p=, seeds=)`,
returning [prompt][sample] `Completion`s, and `close()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from searchgrpo.config import Config
from searchgrpo.policy.sampling import Completion, generate

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


class Sampler(Protocol):
    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        num_samples: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seeds: Sequence[int],
    ) -> list[list[Completion]]: ...

    def take_publish_s(self) -> float:
        """Seconds spent handing the policy's weights to the sampling engine since the last call
        (a step's `sampler/publish_s`); 0 for an engine that samples from the policy itself."""
        ...

    def close(self) -> None: ...


class LocalSampler:
    """`generate` on the policy's own model, with the configured decoder."""

    def __init__(self, policy: Policy, decoder: str = "auto") -> None:
        self.policy = policy
        self.decoder = decoder

    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        num_samples: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seeds: Sequence[int],
    ) -> list[list[Completion]]:
        p = self.policy
        return generate(
            p.model,
            p.tokenizer,
            prompts,
            num_samples=num_samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            device=p.device,
            seeds=seeds,
            decoder=self.decoder,
        )

    def take_publish_s(self) -> float:
        return 0.0

    def close(self) -> None:
        pass


def make_sampler(cfg: Config, policy: Policy) -> Sampler:
    """The sampler `grpo.sampler` names, for `policy`."""
    if cfg.grpo.sampler == "server":
        from searchgrpo.policy.server_sampler import ServerSampler

        return ServerSampler.for_config(cfg, policy)
    return LocalSampler(policy, cfg.grpo.decoder)
