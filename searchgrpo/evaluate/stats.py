"""Bootstrap confidence intervals over questions, and the paired comparison of policies (pure
functions).

Definitions used by `eval` (documented in docs/evaluation.md):

- `found` / `wanted`: the question's IMPORTANT documents the state had not discovered yet
  (`wanted`), and how many of them the clue set retrieved (`found`).
- IMPORTANT discovery rate (the seed's metric): sum(found) / sum(wanted) over all states.
- recall@k: found / wanted for one state, where a clue set retrieves the union of each clue's
  top-k (k = env.top_k); averaged over states with wanted > 0. It grows with the number of clues.
- recall@B (fixed budget): the same over the first B documents of the round-robin fused list
  (every clue's first hit, then every clue's second, ...; repeats dropped).
- nDCG@k: the fused list scored with gain 1 for a wanted document, against the ideal list that
  puts all wanted documents first.
- Confidence intervals: percentile bootstrap over questions (states of one question are not
  independent), with a fixed seed. Differences are paired: the same questions resampled for both
  policies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike


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


def ratio_ci(found: ArrayLike, wanted: ArrayLike, **kw) -> tuple[float, float]:
    """CI of a pooled ratio sum(found) / sum(wanted), resampling questions."""
    pairs = np.stack([np.asarray(found, np.float64), np.asarray(wanted, np.float64)], axis=1)

    def stat(s: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return s[..., 0].sum(axis=1) / s[..., 1].sum(axis=1)

    return bootstrap_ci(pairs, stat, **kw)


def paired_ratio_diff_ci(
    num_a: ArrayLike, den_a: ArrayLike, num_b: ArrayLike, den_b: ArrayLike, **kw
) -> tuple[float, float]:
    """CI of sum(num_b)/sum(den_b) - sum(num_a)/sum(den_a) over the same questions (each pooled
    ratio with its own denominator, e.g. documents checked per IMPORTANT document found)."""
    cols = np.stack([np.asarray(x, np.float64) for x in (num_a, den_a, num_b, den_b)], axis=1)

    def stat(s: np.ndarray) -> np.ndarray:
        sums = s.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums[..., 2] / sums[..., 3] - sums[..., 0] / sums[..., 1]

    return bootstrap_ci(cols, stat, **kw)


def median_diff_ci(a: ArrayLike, b: ArrayLike, **kw) -> tuple[float, float]:
    """CI of median(b) - median(a) over the same questions."""
    cols = np.stack([np.asarray(a, np.float64), np.asarray(b, np.float64)], axis=1)
    return bootstrap_ci(cols, lambda s: np.median(s[..., 1], axis=1) - np.median(s[..., 0], axis=1), **kw)


def compare_policies(
    values: dict[str, dict[str, np.ndarray]],
    *,
    means: Sequence[str],
    ratios: dict[str, tuple[str, str]],
    baseline: str | None,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[dict[str, dict[str, object]], dict[str, dict[str, object]]]:
    """Aggregate metrics with CIs per policy, and each policy's paired difference to `baseline`.

    `values[policy][key]` holds one number per question (NaN where a question has none; the same
    question order for every policy). `means` are averaged over questions; `ratios` map a metric to
    the (numerator, denominator) keys of a pooled ratio. Returns (aggregate, paired), both keyed by
    policy then metric: aggregate entries are values with `ci[metric]`; paired entries are
    {"diff", "ci"}.
    """
    boot = {"resamples": resamples, "seed": seed}
    aggregate: dict[str, dict[str, object]] = {}
    pooled: dict[str, dict[str, float]] = {}  # the ratios of `aggregate`, as floats
    for name, v in values.items():
        agg: dict[str, object] = {}
        ci: dict[str, list[float]] = {}
        for m in means:
            finite = v[m][np.isfinite(v[m])]
            agg[m] = float(finite.mean()) if finite.size else math.nan
            ci[m] = list(mean_ci(finite, **boot))
        for m, (num, den) in ratios.items():
            total = float(v[den].sum())
            agg[m] = pooled.setdefault(name, {})[m] = float(v[num].sum()) / total if total else math.nan
            ci[m] = list(ratio_ci(v[num], v[den], **boot))
        agg["ci"] = ci
        aggregate[name] = agg
    paired: dict[str, dict[str, object]] = {}
    if baseline is not None and baseline in values:
        base = values[baseline]
        for name, cur in values.items():
            if name == baseline:
                continue
            entry: dict[str, object] = {}
            for m in means:
                diff = cur[m] - base[m]
                diff = diff[np.isfinite(diff)]
                entry[m] = {"diff": float(diff.mean()) if diff.size else math.nan, "ci": list(mean_ci(diff, **boot))}
            for m, (num, den) in ratios.items():
                entry[m] = {
                    "diff": pooled[name][m] - pooled[baseline][m],
                    "ci": list(paired_ratio_diff_ci(base[num], base[den], cur[num], cur[den], **boot)),
                }
            paired[name] = entry
    return aggregate, paired
