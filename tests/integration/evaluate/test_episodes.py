"""The episodes tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/evaluate/test_episodes.py`."""

import itertools
import json

from searchgrpo.evaluate import run_eval
from searchgrpo.evaluate.inputs import EvalRequest
from searchgrpo.evaluate.report import curve_rows, load_report
from searchgrpo.events import EvalProgress, EvalStarted
from tests.unit.evaluate.test_episodes import trained  # noqa: F401  (helpers and fixtures of the quick tier)


def test_episode_eval_report(trained, tmp_path):  # noqa: F811  (the fixture imported above)
    cfg, run_dir = trained
    ckpt = str(run_dir / "checkpoints" / "step-000001")
    request = EvalRequest(
        checkpoints=[ckpt], output=str(tmp_path / "e.json"), limit=3, bootstrap=100, episodes=True, max_rounds=4
    )
    events = []
    report = json.loads(run_eval(cfg, request, events.append).read_text())
    assert report["format"] == "searchgrpo-episodes-v1" and report["questions"] == 3 and report["rounds"] == 4
    # Progress in question-rounds (3 questions x 4 rounds), a step per turn of the lockstep loop.
    started = next(e for e in events if isinstance(e, EvalStarted))
    assert started.states == 12
    for name in ("baseline", "step-000001"):
        done = [e.done for e in events if isinstance(e, EvalProgress) and e.policy == name]
        assert done == sorted(done) and done[-1] == 12 and len(set(done)) >= 3
    for name in ("baseline", "step-000001"):
        agg = report["aggregate"][name]
        assert {
            "recall_round_1",
            "recall_round_4",
            "full_coverage",
            "checker_docs_per_important",
            "median_rounds_to_full",
        } <= set(agg)
        curve = report["curve"][name]
        assert len(curve) == 4 and all(a <= b + 1e-12 for a, b in itertools.pairwise(curve))  # recall never falls
    assert {"recall_round_3", "checker_docs_per_important", "median_rounds_to_full"} <= set(
        report["paired"]["step-000001"]
    )
    q = report["per_question"][0]
    rounds = q["results"]["baseline"]["rounds"]
    assert rounds[0]["strategy"] == "SEARCH" and rounds[0]["clues"]
    assert all({"docid", "label", "gold"} <= set(d) for d in rounds[0]["checked"])
    # The reader shows the curve the report holds.
    shown = load_report(tmp_path / "e.json")
    assert shown.mode == "episodes" and len(curve_rows(shown)) == 4
    # Deterministic: greedy episodes, a seeded bootstrap.
    again = json.loads(
        run_eval(cfg, EvalRequest(**{**request.__dict__, "output": str(tmp_path / "f.json")})).read_text()
    )
    for r in (report, again):
        r.pop("created")
        r["request"].pop("output")
    assert again == report
