"""The checker audit's statistics against hand-computed values (searchgrpo/evaluate/agreement.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from searchgrpo.evaluate import agreement as ag
from searchgrpo.evaluate.audit_pairs import allocate

TWO = np.array([[20.0, 5.0], [10.0, 15.0]])
# n = 50; p_o = 35/50 = 0.7; rows 25, 25; columns 30, 20; p_e = (25*30 + 25*20)/50^2 = 0.5;
# kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
THREE = np.array([[10.0, 2.0, 0.0], [1.0, 5.0, 2.0], [0.0, 1.0, 9.0]])
# n = 30; p_o = 24/30 = 0.8; rows 12, 8, 10; columns 11, 8, 11;
# p_e = (12*11 + 8*8 + 10*11)/900 = 306/900 = 0.34; kappa = 0.46 / 0.66.


def test_confusion_matrix_counts_rows_gold_columns_predicted():
    cm = ag.confusion_matrix([0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 0, 2], 3)
    assert cm.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]


def test_accuracy_and_kappa_by_hand():
    assert ag.accuracy(TWO) == pytest.approx(0.7)
    assert ag.cohen_kappa(TWO) == pytest.approx(0.4)
    assert ag.accuracy(THREE) == pytest.approx(0.8)
    assert ag.cohen_kappa(THREE) == pytest.approx(0.46 / 0.66)


def test_kappa_edges():
    assert ag.cohen_kappa(np.eye(3) * 4) == pytest.approx(1.0)  # perfect agreement
    # Chance agreement exactly: the checker's labels independent of gold's (rows proportional).
    assert ag.cohen_kappa(np.array([[2.0, 2.0], [3.0, 3.0]])) == pytest.approx(0.0)
    # Both raters always say the one same label: p_e = 1, kappa undefined.
    assert math.isnan(float(ag.cohen_kappa(np.array([[5.0, 0.0], [0.0, 0.0]]))))
    assert math.isnan(float(ag.accuracy(np.zeros((3, 3)))))


def test_precision_recall_by_hand_and_batched():
    assert ag.precision(THREE).tolist() == pytest.approx([10 / 11, 5 / 8, 9 / 11])
    assert ag.recall(THREE).tolist() == pytest.approx([10 / 12, 5 / 8, 9 / 10])
    never_predicted = np.array([[3.0, 0.0], [1.0, 0.0]])
    assert math.isnan(float(ag.precision(never_predicted)[1]))
    batch = np.stack([TWO, THREE[:2, :2]])  # leading (bootstrap) dimensions are kept
    assert ag.accuracy(batch).tolist() == pytest.approx([0.7, 15 / 18])
    assert ag.cohen_kappa(batch).shape == (2,)


def test_one_vs_rest():
    binary = ag.one_vs_rest(THREE, 0)  # IMPORTANT (index 0) against the other two
    assert binary.tolist() == [[10, 2], [1, 17]]
    assert ag.accuracy(binary) == pytest.approx(27 / 30)


def test_matrix_ci_brackets_the_pooled_value():
    per_question = np.stack([THREE / 3] * 6)
    lo, hi = ag.matrix_ci(per_question, ag.accuracy, resamples=200, seed=0)
    assert lo == pytest.approx(0.8) and hi == pytest.approx(0.8)  # identical questions: no spread
    mixed = np.stack([np.eye(2) * 5, np.array([[0.0, 5.0], [5.0, 0.0]])] * 5)
    lo, hi = ag.matrix_ci(mixed, ag.accuracy, resamples=500, seed=0)
    assert lo < 0.5 < hi


def test_reliability_table_and_ece_by_hand():
    # bin 0: p 0.05, observed 0 -> |0 - 0.05| x 1; bin 1: p 0.15, 0.15, observed 0.5 -> 0.35 x 2;
    # bin 9: p 0.95 and 1.0 (the last bin holds 1.0), observed 1 -> 0.025 x 2. ECE = 0.8 / 5 = 0.16.
    table = ag.reliability_table([0.05, 0.15, 0.15, 0.95, 1.0], [False, False, True, True, True], bins=10)
    assert len(table) == 10
    assert [r["count"] for r in table] == [1, 2, 0, 0, 0, 0, 0, 0, 0, 2]
    assert table[1]["observed"] == pytest.approx(0.5)
    assert table[9]["mean_probability"] == pytest.approx(0.975)
    assert math.isnan(table[4]["observed"])
    assert ag.expected_calibration_error(table) == pytest.approx(0.16)
    assert math.isnan(ag.expected_calibration_error(ag.reliability_table([], [], 4)))


def test_quantile_edges_bins_and_counts():
    edges = ag.quantile_edges([1, 2, 3, 4, 5, 6, 7, 8], 4)
    assert edges == pytest.approx([2.75, 4.5, 6.25])
    assert ag.bin_of([1, 2.75, 3, 4.5, 5, 8], edges).tolist() == [0, 1, 1, 2, 2, 3]
    assert ag.bin_of([0.0, 0.2, 0.25, 0.5, 0.74, 0.75, 1.0], [0.25, 0.5, 0.75]).tolist() == [0, 0, 1, 2, 2, 3, 3]
    counts = ag.per_question_counts([0, 0, 1, 1], [0, 1, 1, 1], [[True, False, True, True]], 2, 2)
    assert counts.tolist() == [[[1, 1], [1, 0]], [[0, 0], [2, 2]]]


def test_allocate_shares():
    assert allocate(10, [2, 100, 100]) == [2, 4, 4]
    assert allocate(10, [100, 100, 100]) == [4, 3, 3]
    assert allocate(500, [3, 4, 5]) == [3, 4, 5]
    assert allocate(7, [0, 0, 9]) == [0, 0, 7]
