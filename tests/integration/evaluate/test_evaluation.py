"""`eval`: the statistics on known cases and the report on the tiny model."""

import json

import numpy as np
import pytest

from searchgrpo.env.metrics import ndcg
from searchgrpo.errors import UserError
from searchgrpo.evaluate import run_eval
from searchgrpo.evaluate.inputs import EvalRequest
from searchgrpo.evaluate.stats import mean_ci, median_diff_ci, paired_ratio_diff_ci, ratio_ci
from searchgrpo.events import EvalProgress, EvalReportWritten, EvalStarted
from searchgrpo.retrieval.clues import fused_ranking
from searchgrpo.train.trainer import Trainer
from tests.helpers.tiny import tiny_config


def test_fused_ranking_is_round_robin_over_clues():
    docs = [("a", 0, 0), ("b", 0, 1), ("c", 1, 0), ("d", 1, 1), ("e", 2, 0)]
    assert fused_ranking(docs) == ["a", "c", "e", "b", "d"]


def test_ndcg_by_hand():
    assert ndcg(["x", "g1", "g2"], {"g1", "g2"}) == pytest.approx(
        (1 / np.log2(3) + 1 / np.log2(4)) / (1 + 1 / np.log2(3))
    )
    assert ndcg(["g1", "g2"], {"g1", "g2"}) == pytest.approx(1.0)
    assert ndcg(["x"], set()) == 0.0


def test_bootstrap_known_cases():
    # Constant per-question values: a degenerate interval.
    assert mean_ci([0.3] * 20) == pytest.approx((0.3, 0.3))
    # Half zeros, half ones over 100 questions: mean 0.5, standard error 0.05, so the 95% percentile
    # interval is close to 0.5 +- 1.96 * 0.05.
    lo, hi = mean_ci([0.0] * 50 + [1.0] * 50, resamples=20000, seed=1)
    assert lo == pytest.approx(0.5 - 1.96 * 0.05, abs=0.012) and hi == pytest.approx(0.5 + 1.96 * 0.05, abs=0.012)
    assert mean_ci([0.0] * 50 + [1.0] * 50, seed=1) == mean_ci([0.0] * 50 + [1.0] * 50, seed=1)
    # A pooled ratio resamples questions, not documents.
    assert ratio_ci([1, 1, 1], [2, 2, 2]) == pytest.approx((0.5, 0.5))
    assert paired_ratio_diff_ci([0, 0], [1, 1], [1, 1], [1, 1]) == pytest.approx((1.0, 1.0))
    # Each ratio has its own denominator: 4 docs / 2 found -> 3 docs / 3 found is -1.0 docs per find.
    assert paired_ratio_diff_ci([2, 2], [1, 1], [1, 2], [1, 2]) == pytest.approx((-1.0, -1.0))
    assert median_diff_ci([1, 3, 5], [1, 3, 5]) == pytest.approx((0.0, 0.0))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    cfg = tiny_config(tmp, "train.max_steps=2", "train.save_every=1", "train.run_name=r")
    summary = Trainer(cfg).train()
    return cfg, summary.run_dir


def test_report_schema_and_determinism(trained, tmp_path):
    cfg, run_dir = trained
    ckpt = str(run_dir / "checkpoints" / "step-000002")
    events = []
    request = EvalRequest(baseline=True, checkpoints=[ckpt], output=str(tmp_path / "a.json"), limit=6, bootstrap=200)
    path = run_eval(cfg, request, events.append)
    report = json.loads(path.read_text())
    assert report["format"] == "searchgrpo-eval-v2" and report["states"] == 6
    assert report["budgets"] == [5, 10] and report["headline"] == "recall_at_10"
    assert [p["name"] for p in report["policies"]] == ["baseline", "step-000002"]
    metrics = {
        "reward_mean",
        "important_discovery",
        "recall_at_5",
        "recall_at_10",
        "recall_at_k",
        "ndcg_at_k",
        "clues_mean",
        "docs_mean",
    }
    for name in ("baseline", "step-000002"):
        agg = report["aggregate"][name]
        assert metrics <= set(agg) and set(agg["ci"]) == metrics
        # A budget caps what counts: recall at 5 documents never exceeds recall at 10 or of the union.
        assert agg["recall_at_5"] <= agg["recall_at_10"] + 1e-12 <= agg["recall_at_k"] + 2e-12
        checks = report["clue_checks"][name]
        assert {"top_prefix_share", "cut_clue_share", "invented_number_share"} <= set(checks)
        # Per-clue credit: every clue of the report counted, each clue's marginal in [0, its set's finds].
        clues = sum(len(x["clue_marginals"]) for st in report["per_state"] for x in st["results"][name]["samples"])
        share = checks["zero_marginal_clue_share"]
        assert clues == checks["clues"] and (share is None if not clues else 0 <= share <= 1)
    paired = report["paired"]["step-000002"]
    assert set(paired) == metrics
    assert all(set(v) == {"diff", "ci"} for v in paired.values())
    state = report["per_state"][0]
    sample = state["results"]["baseline"]["samples"][0]
    assert {
        "completion",
        "clues",
        "reward",
        "components",
        "docs",
        "found",
        "wanted",
        "recall_at_10",
        "truncated",
        "invented",
        "clue_marginals",
        "clue_shares",
    } <= set(sample)
    assert len(sample["clue_shares"]) == len(sample["clues"])
    finds = sample["components"]["new_important"] + sample["components"]["new_relevant"]
    assert all(0 <= m <= finds + 1e-9 for m in sample["clue_marginals"])
    assert sum(q["states"] for q in report["per_question"]) == 6
    assert isinstance(events[0], EvalStarted) and isinstance(events[-1], EvalReportWritten)
    assert any(isinstance(e, EvalProgress) for e in events)
    # A second run gives the same report, to the byte, but for the time it was made.
    again = json.loads(
        run_eval(cfg, EvalRequest(**{**request.__dict__, "output": str(tmp_path / "b.json")})).read_text()
    )
    for r in (report, again):
        r.pop("created")
        r["request"].pop("output")
    assert again == report


def test_sampled_eval_is_seeded(trained, tmp_path):
    cfg, _ = trained
    req = EvalRequest(num_samples=2, temperature=1.0, seed=3, limit=3, bootstrap=50)
    a = json.loads(run_eval(cfg, EvalRequest(**{**req.__dict__, "output": str(tmp_path / "a.json")})).read_text())
    b = json.loads(run_eval(cfg, EvalRequest(**{**req.__dict__, "output": str(tmp_path / "b.json")})).read_text())
    assert a["per_state"] == b["per_state"]
    assert len(a["per_state"][0]["results"]["baseline"]["samples"]) == 2


def test_bad_checkpoints_fail_in_one_line(trained, tmp_path):
    cfg, run_dir = trained
    with pytest.raises(UserError, match="not found"):
        run_eval(cfg, EvalRequest(checkpoints=[str(tmp_path / "missing")]))
    with pytest.raises(UserError, match="this is a run folder"):
        run_eval(cfg, EvalRequest(checkpoints=[str(run_dir)]))
    other = cfg.replace(**{"model.base": str(tmp_path)})
    with pytest.raises(UserError, match="trained on base model 'tiny'"):
        run_eval(other, EvalRequest(checkpoints=[str(run_dir / "checkpoints" / "step-000001")]))
    with pytest.raises(UserError, match="nothing to evaluate"):
        run_eval(cfg, EvalRequest(baseline=False))


def test_eval_on_a_question_set(trained, tmp_path):
    from searchgrpo.data.demo_world import generate_world
    from searchgrpo.data.questions import write_questions

    cfg, _ = trained
    qs = tmp_path / "qs.jsonl"
    write_questions(qs, generate_world(5, 10, seed=9).questions)
    report = json.loads(
        run_eval(cfg, EvalRequest(questions=str(qs), output=str(tmp_path / "q.json"), bootstrap=50)).read_text()
    )
    assert report["questions"] == 5
