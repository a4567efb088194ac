"""The replayed decode steps: a preallocated cache at fixed addresses (searchgrpo/policy/decoders.py
has the dynamic one and picks among them).

- `StaticDecoder`: a preallocated `StaticCache` read through the model's own modules with a
  grouped-query decode attention and `DecodeShortcuts` (lean LoRA and RMSNorm forwards).
- `FusedDecoder`: the same function computed by `FusedStep` (searchgrpo/policy/fused_decode.py) in
  fewer kernels, on a cache of its own where the samples of a prompt share the prompt's keys and
  values (attended to once per group).

Both keep every input at a fixed address, so on CUDA the first step runs eagerly and is captured
as a CUDA graph that later steps replay (`ReplayedDecoder`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from types import MethodType
from typing import Any

import torch

from searchgrpo.policy.decoders import (
    GROUPED_DECODE,
    attention_implementation,
    cache_argument,
)
from searchgrpo.policy.fused_decode import FusedStep
from searchgrpo.policy.fused_layout import Unsupported, fused_layout, is_rms_norm, lora_factors
from searchgrpo.policy.fused_norms import fused_rms_norm_forward
from searchgrpo.policy.split_attention import chunk_mask, split_mask_


class DecodeShortcuts:
    """Leaner forwards for decode steps: the same functions in fewer GPU kernels.

    A decode step is a few thousand small kernels, so on a GPU their count, not the bytes they
    move, sets much of its time. While `applied`:

    - a LoRA layer with one plain adapter computes base(x) + (x A^T)(scaling B)^T in the compute
      dtype: a matmul and a fused multiply-add, where peft casts to the adapter's float32, runs two
      matmuls, scales, adds and casts back;
    - a Llama-style RMSNorm runs as torch's `rms_norm` (one kernel on CUDA) instead of eight.

    The results differ from the full forward by rounding only (the adapter's weights rounded to
    the compute dtype; the norm's weight applied before the one rounding instead of after).
    """

    def __init__(self, model: Any, dtype: torch.dtype) -> None:
        from peft.tuners.lora import LoraLayer

        self.forwards: dict[Any, Any] = {}
        for module in model.modules():
            forward = None
            if isinstance(module, LoraLayer):
                forward = _lean_lora(module, dtype)
            elif is_rms_norm(module):
                forward = MethodType(fused_rms_norm_forward, module)
            if forward is not None:
                self.forwards[module] = forward

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        # A module's own forward may itself be an instance attribute (`lora.compute: base`): restored after.
        before = {module: vars(module).get("forward") for module in self.forwards}
        for module, forward in self.forwards.items():
            module.forward = forward
        try:
            yield
        finally:
            for module, forward in before.items():
                if forward is None:
                    del module.forward
                else:
                    module.forward = forward


def _lean_lora(module: Any, dtype: torch.dtype) -> Any:
    try:
        factors = lora_factors(module, dtype)
    except Unsupported:
        return None
    if factors is None:
        return None
    a, b = factors
    base = module.base_layer

    def forward(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = base(x, *args, **kwargs)
        low = x.reshape(-1, x.shape[-1]).to(dtype) @ a
        out.view(-1, out.shape[-1]).addmm_(low, b)  # in place: no copy of the base output
        return out

    return forward


@functools.cache
def warmup_stream(device: torch.device) -> torch.cuda.Stream:
    """One side stream per device for the eager step before a capture, created once.

    PyTorch keeps a cuBLAS workspace (32 MiB on Hopper) for every stream that has run a matrix
    product, for the life of the process: a fresh stream per sampling call held 32 MiB more GPU
    memory after every training step.
    """
    return torch.cuda.Stream(device)


class ReplayedDecoder:
    """Decode steps whose every input sits at a fixed address with a fixed shape.

    Subclasses hold a preallocated cache of `width + max_new_tokens` slots per row and implement
    `_forward` (logits for `self.token` at `self.position`) and `_reveal` (let attention see one
    more cache slot). Because nothing changes shape, with `graph` the first step runs eagerly and
    is then captured as a CUDA graph, which every later step replays: one launch instead of a few
    thousand small kernels launched from Python.
    """

    def __init__(self, prompt_mask: torch.Tensor, k: int, graph: bool) -> None:
        rows = prompt_mask.shape[0] * k
        self.column = prompt_mask.shape[1]
        self.token = torch.zeros(rows, 1, dtype=torch.long, device=prompt_mask.device)
        self.position = prompt_mask.sum(dim=1).repeat_interleave(k).unsqueeze(1).clone()
        self.use_graph = graph
        self.graph: Any = None
        self.logits: torch.Tensor | None = None

    def _forward(self) -> torch.Tensor:
        raise NotImplementedError

    def _reveal(self, column: int) -> None:
        raise NotImplementedError

    def _run_and_capture(self) -> torch.Tensor:
        """Run this step eagerly on a side stream (the warm-up a capture needs), then capture it."""
        stream = warmup_stream(self.token.device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            logits = self._forward()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # records the step without running it
            self.logits = self._forward()
        return logits

    def __call__(self, token: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] for the position after `token` [B]."""
        self.token.copy_(token.unsqueeze(1))
        self._reveal(self.column)
        if self.graph is not None:
            self.graph.replay()
            logits = self.logits
        elif self.use_graph:
            logits = self._run_and_capture()
        else:
            logits = self._forward()
        self.column += 1
        self.position += 1
        assert logits is not None
        return logits


class StaticDecoder(ReplayedDecoder):
    """Decode steps through the model's own modules on transformers' `StaticCache`.

    The prompts' cache is copied into a `StaticCache` of P + max_new_tokens slots per row; each
    step writes the new token's keys and values into the next slot and attends through a boolean
    [B, 1, 1, L] mask of the filled slots (`grouped_decode_attention`), with `DecodeShortcuts`
    applied.
    """

    def __init__(
        self,
        model: Any,
        prefix_cache: Any,
        prompt_mask: torch.Tensor,
        k: int,
        max_new_tokens: int,
        *,
        graph: bool,
        shortcuts: bool = True,
    ) -> None:
        from transformers import StaticCache
        from transformers.cache_utils import LinearAttentionCacheLayerMixin

        super().__init__(prompt_mask, k, graph)
        width = prompt_mask.shape[1]
        self.model = model
        self.cache = StaticCache(config=model.config, max_cache_len=width + max_new_tokens)
        for layer, prefix in zip(self.cache.layers, prefix_cache.layers):
            # resolve_decoder sends models with other layer kinds than full attention to "dynamic".
            assert not isinstance(layer, LinearAttentionCacheLayerMixin)
            layer.update(prefix.keys.repeat_interleave(k, dim=0), prefix.values.repeat_interleave(k, dim=0))
        self.visible = torch.zeros(
            len(self.token), 1, 1, width + max_new_tokens, dtype=torch.bool, device=prompt_mask.device
        )
        self.visible[:, 0, 0, :width] = prompt_mask.repeat_interleave(k, dim=0).bool()
        self.cache_arg = cache_argument(model)
        self.shortcuts = DecodeShortcuts(model, model.get_input_embeddings().weight.dtype) if shortcuts else None

    def _reveal(self, column: int) -> None:
        self.visible[:, :, :, column] = True

    def _forward(self) -> torch.Tensor:
        lean = self.shortcuts.applied() if self.shortcuts is not None else contextlib.nullcontext()
        with attention_implementation(self.model, GROUPED_DECODE), lean:
            out = self.model(
                input_ids=self.token,
                attention_mask=self.visible,
                position_ids=self.position,
                use_cache=True,
                **{self.cache_arg: self.cache},
            )
        return out.logits[:, -1, :]


class FusedDecoder(ReplayedDecoder):
    """Decode steps through `FusedStep` (the same function in fewer kernels) on a cache of its own.

    With `share_prefix` (the default), the k samples of a prompt share one cache row per layer:
    [groups, kv_heads, L, head_dim], the prompt's P columns, then one segment of max_new_tokens
    slots per sample (L = P + k * max_new_tokens, rounded up to a multiple of 16, the alignment
    the fused attention kernels want for a mask). Attention sees the slots where an additive mask
    [groups, 1, k * heads/kv_heads, L] is zero: the prompt's real tokens for every sample, and
    each sample's own segment up to its current token. Without, each sample has a row of its
    own holding a copy of its prompt (k = 1 per row). `compile` (default: on CUDA) runs the
    element-wise work compiled (`FusedStep`). `chunk` (default: 256 slots on CUDA with a shared
    prefix, else 0: none) splits attention into chunks of the cache row (`split_attention`); L
    is then a multiple of `chunk`.
    """

    def __init__(
        self,
        model: Any,
        prefix_cache: Any,
        prompt_mask: torch.Tensor,
        k: int,
        max_new_tokens: int,
        *,
        graph: bool,
        share_prefix: bool = True,
        compile: bool | None = None,
        chunk: int | None = None,
    ) -> None:
        super().__init__(prompt_mask, k, graph)
        layout = fused_layout(model)
        if layout is None:
            raise ValueError(f"{type(model).__name__}: not a model that FusedStep reproduces")
        device = prompt_mask.device
        if compile is None:
            compile = device.type == "cuda"
        self.step = FusedStep(layout, compile=compile)
        prefixes = [(p.keys, p.values) for p in prefix_cache.layers]
        if not share_prefix:  # one row per sample, each with a copy of its prompt
            prefixes = [(key.repeat_interleave(k, dim=0), value.repeat_interleave(k, dim=0)) for key, value in prefixes]
            prompt_mask, k = prompt_mask.repeat_interleave(k, dim=0), 1
        if chunk is None:
            chunk = 256 if device.type == "cuda" and share_prefix else 0
        if chunk % 16:
            raise ValueError(f"chunk must be a multiple of 16, got {chunk}")
        groups, width = prompt_mask.shape
        align = chunk or 16
        length = -(-(width + k * max_new_tokens) // align) * align
        shape = self.step.cache_shape(groups, length)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        for prefix in prefixes:
            for cache, source in zip((self.keys, self.values), prefix):
                # Zeros, not garbage: masked slots still meet V with a weight of exactly 0.
                tensor = torch.zeros(shape, dtype=source.dtype, device=device)
                tensor[:, :, :width] = source
                cache.append(tensor)
        per_kv = layout.heads // layout.kv_heads
        self.mask = torch.full((groups, 1, k * per_kv, length), float("-inf"), dtype=layout.dtype, device=device)
        self.mask[:, 0, :, :width].masked_fill_(prompt_mask.bool().unsqueeze(1), 0.0)
        self.first = width + torch.arange(k, device=device) * max_new_tokens  # each sample's first slot
        self.slot = self.first.clone()
        self.width, self.k, self.per_kv = width, k, per_kv
        self.chunks = chunk_mask(self.mask, layout.kv_heads, chunk) if chunk else None

    def _reveal(self, column: int) -> None:
        torch.add(self.first, column - self.width, out=self.slot)
        rows = self.mask.view(self.mask.shape[0], self.k, self.per_kv, -1)
        rows.scatter_(3, self.slot.view(1, -1, 1, 1).expand(rows.shape[0], -1, self.per_kv, 1), 0.0)
        if self.chunks is not None:
            split_mask_(self.chunks, self.mask)

    def _forward(self) -> torch.Tensor:
        mask = self.chunks if self.chunks is not None else self.mask
        return self.step(self.token, self.position, self.keys, self.values, mask, self.slot)
