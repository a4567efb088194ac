"""The policy's LoRA adapter as a llama.cpp GGUF adapter file, for the server sampler.

llama.cpp reads a LoRA adapter from a GGUF file whose header says `general.type = adapter`,
`adapter.type = lora` and `adapter.lora.alpha`, with one pair of tensors per adapted weight,
named after the base model's tensor (`blk.3.attn_q.weight.lora_a` and `.lora_b`). It adds
scale * alpha / r * (B A) x, r being B's inner dimension. `write_gguf_lora` writes alpha = r and
folds peft's scaling (alpha / r, or alpha / sqrt(r) for rsLoRA) into B, so the file holds
exactly the update peft applies.

The GGUF converter of Llama-family models reorders the rows of the q and k projections (the two
halves of each rotary pair interleaved, head by head; transformers undoes it when it loads a
GGUF). The adapter's B rows (its output dimension) get the same reordering; A is untouched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    import torch

HF_TO_GGUF = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
PERMUTED_ARCHS = ("llama",)
"""Architectures whose GGUF q/k rows are reordered relative to Hugging Face's."""
ARCHS = ("llama", "qwen2", "qwen3")

_LAYER = re.compile(r"layers\.(\d+)\.(.+)$")


class BaseInfo:
    """What the adapter file needs from the base GGUF: architecture, head counts, tensor shapes."""

    def __init__(self, gguf_path: str | Path) -> None:
        import gguf

        reader = gguf.GGUFReader(str(gguf_path))
        self.arch = str(reader.fields["general.architecture"].contents())
        if self.arch not in ARCHS:
            raise ValueError(f"{gguf_path}: architecture {self.arch!r}; the server sampler knows {ARCHS}")
        self.heads = int(reader.fields[f"{self.arch}.attention.head_count"].contents())
        self.kv_heads = int(reader.fields[f"{self.arch}.attention.head_count_kv"].contents())
        # GGUF lists dimensions innermost first: reversed, a weight's shape is torch's [out, in].
        self.shapes = {t.name: tuple(int(d) for d in reversed(t.shape.tolist())) for t in reader.tensors}


def permute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Hugging Face's row order of a Llama q or k projection -> GGUF's (per head, rotary halves interleaved)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def lora_updates(model: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{HF module path: (A [r, in], scaling * B [out, r])} of a peft model's active LoRA adapter, float32."""
    from peft.tuners.lora import LoraLayer

    out = {}
    for name, module in model.named_modules():
        if not isinstance(module, LoraLayer):
            continue
        adapters = [a for a in module.active_adapters if a in module.lora_A]
        if len(adapters) != 1 or getattr(module, "use_dora", {}).get(adapters[0], False):
            raise ValueError(f"{name}: the server sampler takes one plain LoRA adapter per layer")
        a = adapters[0]
        # peft's factors of a linear layer are nn.Linear (ModuleDict indexing types them as Module).
        lora_a, lora_b = cast("torch.nn.Linear", module.lora_A[a]), cast("torch.nn.Linear", module.lora_B[a])
        weight_a = lora_a.weight.detach().float().cpu().numpy()
        weight_b = (lora_b.weight.detach().float() * module.scaling[a]).cpu().numpy()
        out[name] = (weight_a, weight_b)
    return out


def gguf_name(module_path: str) -> str:
    """`base_model.model.model.layers.3.self_attn.q_proj` -> `blk.3.attn_q.weight`."""
    match = _LAYER.search(module_path)
    if match is None or match.group(2) not in HF_TO_GGUF:
        raise ValueError(f"{module_path}: no GGUF tensor for this module (only the decoder layers' projections)")
    return f"blk.{match.group(1)}.{HF_TO_GGUF[match.group(2)]}.weight"


def write_gguf_lora(model: Any, base: BaseInfo, out: str | Path) -> Path:
    """Write the active LoRA adapter of peft `model` for the base GGUF described by `base`.

    Written to a temporary name, then renamed: a reader never sees half a file.
    """
    import gguf

    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), base.arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    updates = lora_updates(model)
    ranks = {a.shape[0] for a, _ in updates.values()}
    if len(ranks) != 1:
        raise ValueError(f"one LoRA rank for every layer, got {sorted(ranks)}")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(ranks.pop()))  # alpha / r = 1: scaling is in B
    for path, (a, b) in sorted(updates.items()):
        name = gguf_name(path)
        if base.shapes.get(name) != (b.shape[0], a.shape[1]):
            raise ValueError(
                f"{name}: adapter {b.shape[0]} x {a.shape[1]} does not fit the base's {base.shapes.get(name)}"
            )
        if base.arch in PERMUTED_ARCHS and ".attn_q." in name:
            b = permute_rows(b, base.heads)
        elif base.arch in PERMUTED_ARCHS and ".attn_k." in name:
            b = permute_rows(b, base.kv_heads)
        writer.add_tensor(name + ".lora_a", np.ascontiguousarray(a, dtype=np.float32))
        writer.add_tensor(name + ".lora_b", np.ascontiguousarray(b, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out
