"""RMS norms as one fused kernel on CUDA (`model.fused_norms`).

transformers' Llama-style RMSNorm is eight element-wise kernels forward (a float32 copy, a square,
a mean, an add, a reciprocal square root, a product, a cast back, the weight's product) and more
backward. In our loss passes on an 8B model they were about a sixth of the GPU time
(docs/performance.md). `use_fused_norms` gives each such norm torch's `rms_norm`, fused on CUDA
forward and backward: the same function, rounded once (the weight applied before the one rounding
to the model's dtype) instead of twice.
"""

from __future__ import annotations

from types import MethodType
from typing import Any

import torch

from searchgrpo.policy.fused_layout import is_rms_norm


def fused_rms_norm_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """A Llama-style RMSNorm's forward as torch's `rms_norm`."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.weight, self.variance_epsilon)


def use_fused_norms(model: Any) -> int:
    """Give every Llama-style RMSNorm of `model` `fused_rms_norm_forward`; the number of norms."""
    count = 0
    for module in model.modules():
        if is_rms_norm(module):
            # An instance attribute: the class stays as it is for every other model in the process.
            module.forward = MethodType(fused_rms_norm_forward, module)
            count += 1
    return count
