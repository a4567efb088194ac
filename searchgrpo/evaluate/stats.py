"""Retrieval metrics of one scored clue set, and bootstrap confidence intervals (pure functions).

Definitions used by `eval` (documented in the README):

- `found` / `wanted`: the question's IMPORTANT documents the state had not discovered yet
  (`wanted`), and how many of them the clue set retrieved (`found`).
- IMPORTANT discovery rate (the seed's metric): sum(found) / sum(wanted) over all states.
- recall@k: found / wanted for one state, where a clue set retrieves the union of each clue's
  top-k (k = env.top_k); averaged over states with wanted > 0.
- nDCG@k: the clues' top-k lists fused round-robin (every clue's first hit, then every clue's
  second, ...; repeats dropped) and scored with gain 1 for a wanted document, against the ideal
  list that puts all wanted documents first.
- Confidence intervals: percentile bootstrap over questions (states of one question are not
  independent), with a fixed seed.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


def bootstrap_ci(
    values: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of `statistic` over the rows of `values` (one row per question).

    `statistic` maps an array of shape [B, Q, ...] (B resamples of Q rows) to [B] values.
    """
    n = len(values)
    if n == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    stats = statistic(values[idx])
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return (math.nan, math.nan)
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def mean_ci(values: Sequence[float], **kw) -> tuple[float, float]:
    """CI of the mean of per-question values."""
    return bootstrap_ci(np.asarray(values, dtype=np.float64), lambda s: s.mean(axis=1), **kw)


def ratio_ci(found: Sequence[float], wanted: Sequence[float], **kw) -> tuple[float, float]:
    """CI of a pooled ratio sum(found) / sum(wanted), resampling questions."""
    pairs = np.stack([np.asarray(found, np.float64), np.asarray(wanted, np.float64)], axis=1)

    def stat(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return s[..., 0].sum(axis=1) / s[..., 1].sum(axis=1)

    return bootstrap_ci(pairs, stat, **kw)


def paired_ratio_ci(
    found_a: Sequence[float], found_b: Sequence[float], wanted: Sequence[float], **kw
) -> tuple[float, float]:
    """CI of the difference of two pooled ratios over the same questions: (b - a)."""
    cols = np.stack([np.asarray(found_a, np.float64), np.asarray(found_b, np.float64),
                     np.asarray(wanted, np.float64)], axis=1)

    def stat(s: np.ndarray) -> np.ndarray:
        w = s[..., 2].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (s[..., 1].sum(axis=1) - s[..., 0].sum(axis=1)) / w

    return bootstrap_ci(cols, stat, **kw)
