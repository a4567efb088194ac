"""The GPU's measured memory bandwidth, the bound a decode step is held against (grpo_vs_trl.py,
decode_profile.py)."""

from __future__ import annotations

import statistics
from typing import Any


def bandwidth() -> dict[str, float]:
    """Measured device bandwidth: a 4 GiB device-to-device copy (bytes read + written) and a read."""
    import torch

    a = torch.randn(2**31, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    size = a.numel() * a.element_size()

    def best(fn: Any) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        return statistics.median(times)

    copy = 2 * size / best(lambda: b.copy_(a))
    read = size / best(lambda: a.sum(dtype=torch.float32))
    a = b = torch.empty(0)
    torch.cuda.empty_cache()
    return {
        "copy_gb_per_s": round(copy / 1e9, 1),
        "read_gb_per_s": round(read / 1e9, 1),
        "best_bytes_per_s": max(copy, read),
    }
