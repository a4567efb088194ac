"""How well a checker agrees with gold labels (pure functions): confusion matrices, accuracy, Cohen's
kappa, per-label precision and recall, calibration, and rates per bin of a feature.

Conventions: a confusion matrix `cm[..., g, p]` counts pairs with gold label g and predicted label
p (rows gold, columns predicted), in `Label` order; every function accepts leading batch
dimensions (bootstrap resamples) and returns NaN where a quantity is undefined (no pairs, a
label never predicted). Confidence intervals come from `stats.bootstrap_ci` over questions: the
rows of `per_question` arrays are questions, since pairs of one question are not independent.

- accuracy: trace(cm) / sum(cm).
- Cohen's kappa: (p_o - p_e) / (1 - p_e), with p_o the accuracy and p_e = sum_k r_k c_k / n^2 the
  agreement expected by chance from the row (gold) and column (predicted) totals; NaN when p_e = 1
  (both raters always give the one same label).
- precision of label k: cm[k, k] / column k's total; recall: cm[k, k] / row k's total.
- reliability table: pairs binned by a predicted probability (equal-width bins over [0, 1]; a
  probability of exactly 1 falls in the last bin), each bin's mean probability beside the observed
  frequency of the event; expected calibration error (ECE) = sum_b (n_b / n) |observed_b - mean_b|.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

# The feature bins live with the features (shared with the hack radar); re-exported here.
from searchgrpo.agents.doc_features import bin_of as bin_of
from searchgrpo.agents.doc_features import quantile_edges as quantile_edges
from searchgrpo.evaluate.stats import bootstrap_ci


def confusion_matrix(gold: Sequence[int], predicted: Sequence[int], n: int) -> np.ndarray:
    """cm[g, p]: pairs with gold label index g and predicted label index p."""
    cm = np.zeros((n, n), dtype=np.float64)
    np.add.at(cm, (np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1.0)
    return cm


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def accuracy(cm: np.ndarray) -> np.ndarray:
    """Share of pairs on the diagonal."""
    return _div(np.trace(cm, axis1=-2, axis2=-1), cm.sum(axis=(-2, -1)))


def cohen_kappa(cm: np.ndarray) -> np.ndarray:
    """Cohen's kappa of the two raters (gold, checker) behind the matrix."""
    n = cm.sum(axis=(-2, -1))
    p_o = accuracy(cm)
    p_e = _div((cm.sum(axis=-1) * cm.sum(axis=-2)).sum(axis=-1), n * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isclose(p_e, 1.0) | np.isnan(p_e), np.nan, (p_o - p_e) / (1.0 - p_e))


def precision(cm: np.ndarray) -> np.ndarray:
    """Per predicted label: the share of its predictions that gold agrees with, shape [..., n]."""
    return _div(np.diagonal(cm, axis1=-2, axis2=-1), cm.sum(axis=-2))


def recall(cm: np.ndarray) -> np.ndarray:
    """Per gold label: the share of its pairs the checker labelled so, shape [..., n]."""
    return _div(np.diagonal(cm, axis1=-2, axis2=-1), cm.sum(axis=-1))


def one_vs_rest(cm: np.ndarray, positive: int) -> np.ndarray:
    """The 2x2 matrix of label `positive` against all others (index 0: positive, 1: the rest)."""
    total = cm.sum(axis=(-2, -1))
    tp = cm[..., positive, positive]
    fn = cm[..., positive, :].sum(axis=-1) - tp
    fp = cm[..., :, positive].sum(axis=-1) - tp
    tn = total - tp - fn - fp
    return np.stack([np.stack([tp, fn], axis=-1), np.stack([fp, tn], axis=-1)], axis=-2)


def matrix_ci(
    per_question: np.ndarray, metric: Callable[[np.ndarray], np.ndarray], *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap CI of `metric(sum of the resampled questions' matrices)`; `per_question` is [Q, n, n]."""
    return bootstrap_ci(per_question, lambda s: metric(s.sum(axis=1)), resamples=resamples, seed=seed)


# --------------------------------------------------------------------------- calibration


def reliability_table(probability: Sequence[float], outcome: Sequence[bool], bins: int = 10) -> list[dict[str, float]]:
    """Per equal-width probability bin: its bounds, pairs, mean probability and observed frequency.

    Bins without pairs are listed with count 0 and NaN means (so every table has `bins` rows).
    """
    p = np.asarray(probability, dtype=np.float64)
    y = np.asarray(outcome, dtype=np.float64)
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    rows = []
    for b in range(bins):
        inside = index == b
        count = int(inside.sum())
        rows.append(
            {
                "low": b / bins,
                "high": (b + 1) / bins,
                "count": count,
                "mean_probability": float(p[inside].mean()) if count else math.nan,
                "observed": float(y[inside].mean()) if count else math.nan,
            }
        )
    return rows


def expected_calibration_error(table: Sequence[dict[str, float]]) -> float:
    """ECE of a reliability table: the count-weighted mean |observed - mean probability|."""
    total = sum(r["count"] for r in table)
    if not total:
        return math.nan
    return sum(r["count"] * abs(r["observed"] - r["mean_probability"]) for r in table if r["count"]) / total


# --------------------------------------------------------------------------- rates per bin


def per_question_counts(
    question_index: ArrayLike, bins: ArrayLike, events: Sequence[ArrayLike], n_questions: int, n_bins: int
) -> np.ndarray:
    """counts[q, b, 0]: pairs of question q in bin b; counts[q, b, 1 + j]: those where event j happened."""
    q = np.asarray(question_index, dtype=np.int64)
    b = np.asarray(bins, dtype=np.int64)
    out = np.zeros((n_questions, n_bins, 1 + len(events)), dtype=np.float64)
    np.add.at(out[:, :, 0], (q, b), 1.0)  # views: the counts land in `out`
    for j, event in enumerate(events):
        hit = np.asarray(event, dtype=bool)
        np.add.at(out[:, :, 1 + j], (q[hit], b[hit]), 1.0)
    return out
