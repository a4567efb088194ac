"""Sampling clue sets from the policy.

- `encode_prompt` renders a state with the prompt template (`prompt.template`) and the chat
  template, shrinking the tables until the prompt fits `grpo.max_prompt_tokens`.
- `generate` samples K completions per prompt in one batched decoding loop (prompts left-padded
  and encoded once each, their KV cache copied to the K rows), and trims each completion after its
  first end-of-sequence token (which it keeps, so the policy learns to stop). On CUDA the decode
  steps run on a static cache, each replayed as one CUDA graph, computed from the weights in few
  kernels (`FusedDecoder`) or through the model's modules (`StaticDecoder`):
  searchgrpo/policy/replayed_decoders.py.

Log-probabilities of the sampled completions (for the loss) are in `searchgrpo.policy.logprobs`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.prompt_template import PromptTemplate, load_template
from searchgrpo.env.prompts import build_messages
from searchgrpo.errors import check_cancel
from searchgrpo.policy.decoders import DynamicDecoder, resolve_decoder
from searchgrpo.policy.replayed_decoders import FusedDecoder, StaticDecoder


def encode_prompt(
    tokenizer: Any,
    state: SearchState,
    *,
    max_rows: int,
    max_tokens: int,
    min_clues: int,
    max_clues: int,
    template: PromptTemplate | None = None,
) -> list[int]:
    """Token ids of the state's prompt (rendered with `template`, None: the built-in one); tables
    shrink (most recent rows kept) until it fits."""
    rows = max_rows
    while True:
        messages = build_messages(state, rows, min_clues, max_clues, template)
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = list(ids)
        if len(ids) <= max_tokens:
            return ids
        if rows == 1:
            # Still too long (a huge question or table row): keep the start and the instruction.
            head = max_tokens // 2
            return ids[:head] + ids[len(ids) - (max_tokens - head) :]
        rows = max(1, rows // 2)


class Prompts:
    """The Executor's prompts as the config renders and sizes them (prompt.template,
    data.max_table_rows, grpo.max_prompt_tokens, env.min_clues / max_clues): `encode(state)`, and
    `prompts(state)` cached by the template's digest and the state id."""

    def __init__(self, tokenizer: Any, cfg: Config, template: PromptTemplate | None = None) -> None:
        self.tokenizer = tokenizer
        self.template = template or load_template(cfg.prompt.template, cfg.prompt.clue_format)
        self.sizes = dict(
            max_rows=cfg.data.max_table_rows,
            max_tokens=cfg.grpo.max_prompt_tokens,
            min_clues=cfg.env.min_clues,
            max_clues=cfg.env.max_clues,
        )
        self._cache: dict[tuple[str, str], list[int]] = {}

    def encode(self, state: SearchState) -> list[int]:
        return encode_prompt(self.tokenizer, state, template=self.template, **self.sizes)

    def __call__(self, state: SearchState) -> list[int]:
        key = (self.template.digest, state.state_id)
        ids = self._cache.get(key)
        if ids is None:
            ids = self._cache[key] = self.encode(state)
        return ids

    def forget(self, states: Sequence[SearchState]) -> None:
        """Drop the cached prompts of states no longer trained on."""
        for state in states:
            self._cache.pop((self.template.digest, state.state_id), None)


def stop_token_ids(policy_model: Any, tokenizer: Any) -> list[int]:
    ids = {tokenizer.eos_token_id}
    gen_eos = getattr(getattr(policy_model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, (list, tuple)):
        ids.update(gen_eos)
    return sorted(i for i in ids if i is not None)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
    return ids.to(device), mask.to(device)


@dataclass(frozen=True)
class Completion:
    """One sampled completion."""

    token_ids: list[int]
    """Generated ids up to and including the first stop token."""
    text: str
    """Decoded without special tokens."""
    truncated: bool
    """Hit max_new_tokens without a stop token."""
    sampler_logprobs: tuple[float, ...] | None = None
    """Each token's log-prob under the distribution it was drawn from, where the sampler is not
    the trainer's own model (`grpo.sampler: server`); None for the local sampler."""


def next_tokens(
    logits: torch.Tensor,
    *,
    temperature: float,
    top_p: float,
    greedy: bool,
    generators: Sequence[torch.Generator] | None = None,
) -> torch.Tensor:
    """Pick one token per row: argmax, or a sample at `temperature` from the top-p nucleus.

    With `generators` (one per block of rows: the samples of one prompt), each block draws from
    its own generator, so a prompt's samples do not depend on which other prompts share the batch.
    """
    if greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Drop a token once the mass before it already reaches top_p; the top token always stays.
        drop = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return draw(probs, generators)


def draw(probs: torch.Tensor, generators: Sequence[torch.Generator] | torch.Generator | None = None) -> torch.Tensor:
    """One index per row of `probs` (unnormalised, non-negative), by inverting the cumulative sum.

    One uniform draw per row, where torch.multinomial draws one random number per category: on a
    CPU that was most of a decode step's time for a vocabulary of 150k tokens. The sum runs in
    float64, so rounding cannot move probability mass between tokens by any amount that matters;
    a zero-probability token is never picked (its cumulative sum equals its predecessor's). With a
    sequence of generators, the rows split into as many equal blocks and each block's draws come
    from its own generator (one cumulative sum and one search over all rows all the same).
    """
    cdf = probs.cumsum(dim=-1, dtype=torch.float64)
    if isinstance(generators, torch.Generator) or generators is None:
        u = torch.rand(probs.shape[0], 1, dtype=torch.float64, device=probs.device, generator=generators)
    else:
        block = probs.shape[0] // len(generators)
        u = torch.cat([torch.rand(block, 1, dtype=torch.float64, device=probs.device, generator=g) for g in generators])
    picked = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
    return picked.clamp_(max=probs.shape[-1] - 1)


@torch.no_grad()
def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    *,
    num_samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    device: Any = "cpu",
    seeds: Sequence[int] | None = None,
    decoder: str = "auto",
    stop: threading.Event | None = None,
) -> list[list[Completion]]:
    """`num_samples` completions for each prompt, as [prompt][sample].

    Each prompt is encoded once and its KV cache repeated for its samples (shared prefix); then
    all rows decode together until every row has produced a stop token or `max_new_tokens`.
    With `seeds` (one per prompt) each prompt's samples come from its own seeded generator: the
    same clues whatever the batch or the process they are sampled in. Without, sampling draws
    from torch's global RNG. `decoder` picks how decode steps run (`resolve_decoder`):
    `dynamic` (transformers' growing cache), `static` (`StaticDecoder`), `graph` (`StaticDecoder`
    replaying a CUDA graph), `fused` (`FusedDecoder`, replaying a CUDA graph on CUDA), or `auto`.
    `stop` (eval and merge jobs) is checked before every decode step: JobCancelled when set.
    """
    check_cancel(stop, "cancelled while writing clues")  # before the prompts' forward pass, too
    generators = None
    if seeds is not None and not greedy:
        if len(seeds) != len(prompts):
            raise ValueError(f"expected {len(prompts)} seeds, got {len(seeds)}")
        generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
    stops = torch.tensor(stop_token_ids(model, tokenizer), device=device)
    pad = tokenizer.pad_token_id
    k = num_samples
    prompt_ids, prompt_mask = left_pad(prompts, pad, device)
    decoder = resolve_decoder(model, decoder, device)
    on_cuda = torch.device(device).type == "cuda"
    was_training = model.training
    model.eval()
    try:
        out = model(
            input_ids=prompt_ids,
            attention_mask=prompt_mask,
            position_ids=(prompt_mask.cumsum(dim=1) - 1).clamp(min=0),
            use_cache=True,
            logits_to_keep=1,
        )
        cache = getattr(out, "cache", None) or out.past_key_values
        logits = out.logits[:, -1, :].repeat_interleave(k, dim=0)
        del out
        if decoder == "dynamic":
            step: Any = DynamicDecoder(model, cache, prompt_mask, k)
        elif decoder == "fused":
            step = FusedDecoder(model, cache, prompt_mask, k, max_new_tokens, graph=on_cuda)
        else:
            step = StaticDecoder(model, cache, prompt_mask, k, max_new_tokens, graph=decoder == "graph")
        del cache
        finished = torch.zeros(len(prompts) * k, dtype=torch.bool, device=device)
        steps: list[torch.Tensor] = []
        # Asking whether every row has stopped waits for the GPU; on CUDA ask every 8 steps, so
        # that the host queues the next steps while the device runs. Extra steps only add padding.
        check_every = 8 if on_cuda else 1
        for i in range(max_new_tokens):
            check_cancel(stop, "cancelled while writing clues")
            token = next_tokens(logits, temperature=temperature, top_p=top_p, greedy=greedy, generators=generators)
            token = torch.where(finished, torch.full_like(token, pad), token)
            steps.append(token)
            finished |= torch.isin(token, stops)
            if len(steps) == max_new_tokens or ((i + 1) % check_every == 0 and bool(finished.all())):
                break
            logits = step(token)
        del step
    finally:
        model.train(was_training)
    generated = torch.stack(steps, dim=1).tolist() if steps else [[] for _ in range(len(prompts) * k)]
    stop_set = set(stops.tolist())
    completions: list[Completion] = []
    for ids in generated:
        cut = next((i for i, t in enumerate(ids) if t in stop_set), None)
        kept = ids[: cut + 1] if cut is not None else ids
        text = tokenizer.decode(kept, skip_special_tokens=True)
        completions.append(Completion(kept, text, cut is None))
    return [completions[i * k : (i + 1) * k] for i in range(len(prompts))]
