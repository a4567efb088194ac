"""The merge's parity figures (`export/parity.py`) on hand-made scores: tolerances, near ties,
flips, non-finite log-probs and the remedy each failure names."""

import math

import pytest

from searchgrpo.export.parity import TOLERANCES, TokenScores, parity_figures, remedy


def scores(logp, top, margin=None):
    return TokenScores(list(logp), list(top), list(margin or [5.0] * len(logp)))


def test_identical_scores_pass_with_zero_deltas():
    ref = [scores([-0.1, -2.0], [7, 9]), scores([-0.5], [3])]
    f = parity_figures(ref, ref, "bfloat16")
    assert f["passed"] and f["reason"] == ""
    assert (f["tokens"], f["probes"], f["max_abs_logprob_delta"], f["mean_abs_logprob_delta"]) == (3, 2, 0.0, 0.0)
    assert (f["top1_agreement"], f["near_ties"], f["flips"]) == (1.0, 0, 0)
    assert f["compared_with"] == "base + adapter in bfloat16"


def test_deltas_are_max_and_mean_of_absolute_differences():
    ref = [scores([-1.0, -2.0, -3.0, -4.0], [1, 2, 3, 4])]
    got = [scores([-1.12, -2.0, -2.96, -4.0], [1, 2, 3, 4])]
    f = parity_figures(ref, got, "bfloat16")
    assert f["max_abs_logprob_delta"] == pytest.approx(0.12)
    assert f["mean_abs_logprob_delta"] == pytest.approx(0.04)  # (0.12 + 0 + 0.04 + 0) / 4
    assert f["passed"]  # within bfloat16's tolerance
    f32 = parity_figures(ref, got, "float32")
    assert not f32["passed"] and "max |delta log-prob| 0.12 > 0.001" in f32["reason"]
    assert "mean |delta log-prob| 0.04 > 0.0001" in f32["reason"]


def test_a_top1_flip_at_a_near_tie_is_reported_not_failed():
    tie = TOLERANCES["bfloat16"].tie
    ref = [scores([-0.7] * 20, [1] * 20, [tie / 2] + [5.0] * 19)]
    got = [scores([-0.7] * 20, [2] + [1] * 19)]
    f = parity_figures(ref, got, "bfloat16")
    assert (f["near_ties"], f["flips"], f["passed"]) == (1, 0, True)
    assert f["disagreement_margins"] == [pytest.approx(tie / 2)]
    assert f["top1_agreement"] == pytest.approx(19 / 20)


def test_flips_outside_near_ties_fail_beyond_the_allowed_share():
    n = 40
    allowed = math.floor(TOLERANCES["bfloat16"].flips * n)  # 2 of 40
    ref = [scores([-0.1] * n, [1] * n)]
    within = [scores([-0.1] * n, [2] * allowed + [1] * (n - allowed))]
    beyond = [scores([-0.1] * n, [2] * (allowed + 1) + [1] * (n - allowed - 1))]
    assert parity_figures(ref, within, "bfloat16")["passed"]
    f = parity_figures(ref, beyond, "bfloat16")
    assert not f["passed"] and f"top-1 token differs at {allowed + 1} of {n} positions" in f["reason"]
    assert f"(allowed {allowed})" in f["reason"]


def test_non_finite_log_probs_fail_and_name_the_model_and_the_remedy():
    good = [scores([-0.1, -0.2], [1, 2])]
    damaged = parity_figures([scores([math.nan, -0.2], [1, 2])], good, "bfloat16")
    assert not damaged["passed"] and "unmerged adapter model gives non-finite" in damaged["reason"]
    assert "merge an earlier checkpoint" in remedy(damaged)
    overflow = parity_figures(good, [scores([-0.1, -math.inf], [1, 2])], "float16")
    assert not overflow["passed"] and "merged model gives non-finite log-probs in float16" in overflow["reason"]
    assert "--dtype float32" in remedy(overflow)


def test_a_parity_failure_in_16_bits_names_the_base_and_float32():
    f = parity_figures([scores([-0.1], [1])], [scores([-3.0], [1])], "bfloat16")
    assert not f["passed"]
    words = remedy(f)
    assert "model.base is the model the run trained on" in words and "--dtype float32" in words


def test_tolerances_tighten_with_precision():
    order = [TOLERANCES[d] for d in ("float32", "float16", "bfloat16")]
    for field in ("max_delta", "mean_delta", "tie", "flips"):
        values = [getattr(t, field) for t in order]
        assert values == sorted(values), field
