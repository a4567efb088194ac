"""Seeds derived from names: the same parts give the same seed in every process and Python version."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, stable across processes and Python versions."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big") >> 1
