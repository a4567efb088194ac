"""The judge tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/policy/test_judge.py`."""

import pytest
import torch

from searchgrpo.agents.checker import CheckRequest
from searchgrpo.policy.judge import open_base_judge
from searchgrpo.policy.model import load_frozen_base, load_policy, policy_on
from searchgrpo.world import load_dataset
from tests.helpers.tiny import tiny_config


def test_a_pipelined_run_judges_exactly_as_an_unpipelined_one(tmp_path):
    """With `train.pipeline: on` the judge runs on the scoring thread while the loss trains the same
    weights: its verdicts must still be the base model's, the same as unpipelined and as a fresh
    judge's (lr 1e-2 moves the adapter far from zero after the first step)."""
    from searchgrpo.events import GroupScored
    from searchgrpo.train.trainer import Trainer

    common = ("checker.backend=base", "checker.cache=false", "train.max_steps=4", "reward.soft_labels=true")
    seen: dict[str, dict] = {}
    for pipeline in ("off", "on"):
        events = []
        Trainer(tiny_config(tmp_path / pipeline, *common, f"train.pipeline={pipeline}"), sink=events.append).train()
        groups = [e for e in events if isinstance(e, GroupScored)]
        seen[pipeline] = {(g.state_id, d.docid): (d.label, d.probs) for g in groups for s in g.samples for d in s.docs}
        for g in groups:  # soft labels: each sample is paid its new documents' expected finds
            for s in g.samples:
                expected = sum(d.probs[0] for d in s.docs if d.new and d.probs)
                assert s.counts["new_important"] == pytest.approx(expected, abs=1e-9)
    both = set(seen["on"]) & set(seen["off"])
    assert both and len(seen["on"]) > len(both)  # step 1 is shared; later steps sample other clues
    for pair in both:
        assert seen["on"][pair][0] == seen["off"][pair][0]
        assert seen["on"][pair][1] == pytest.approx(seen["off"][pair][1], abs=1e-5)
    cfg = tiny_config(tmp_path / "fresh", *common)
    dataset = load_dataset(cfg)
    states = {s.state_id: s for s in [*dataset.train, *dataset.eval]}
    judge = open_base_judge(cfg)  # its own copy of the base model, no adapter, no thread
    pairs = sorted(seen["on"])
    requests = []
    for state_id, docid in pairs:
        state, doc = states[state_id], dataset.corpus.get(docid)
        requests.append(CheckRequest(state.question_id, state.question, state.sub_goals, docid, doc.title, doc.text))
    for pair, verdict in zip(pairs, judge.check(requests)):
        assert seen["on"][pair][0] == verdict.label.value
        assert seen["on"][pair][1] == pytest.approx(verdict.probs, abs=1e-5)


def test_a_base_the_judge_cannot_load_is_one_line_with_exit_code_2(tmp_path):
    from tests.helpers.tiny import SETS, searchgrpo

    missing = tmp_path / "no-such-model"
    proc = searchgrpo(
        "audit-checker",
        *SETS,
        "--set",
        "checker.backend=base",
        "--set",
        f"model.base={missing}",
        "--no-plot",
        cwd=tmp_path,
    )
    out, _ = proc.communicate(timeout=600)
    lines = [line for line in out.splitlines() if line.strip()]
    assert proc.returncode == 2, out
    assert "Traceback" not in out and any("model.base" in line and str(missing) in line for line in lines), out


@pytest.mark.parametrize("episodes", [False, True], ids=["rounds", "episodes"])
def test_an_eval_judged_in_process_attaches_each_adapter_to_the_judges_base(tmp_path, episodes):
    """`eval` with `checker.backend: base` holds one base model: the judge's, with each adapter
    attached in turn. The policies write exactly the clues they write beside the gold checker (the
    adapter was there), and every verdict is the base judge's."""
    import json

    from searchgrpo.evaluate import run_eval
    from searchgrpo.evaluate.inputs import EvalRequest
    from searchgrpo.train.trainer import Trainer

    cfg = tiny_config(tmp_path, "train.max_steps=2", "train.save_every=2", "train.run_name=r")
    run_dir = Trainer(cfg).train().run_dir
    ckpt = str(run_dir / "checkpoints" / "step-000002")
    reports = {}
    for backend in ("gold", "base"):
        judged = cfg.replace(**{"checker.backend": backend, "checker.cache": False})
        request = EvalRequest(
            baseline=True,
            checkpoints=[ckpt],
            output=str(tmp_path / f"{backend}.json"),
            limit=3,
            bootstrap=50,
            episodes=episodes,
            max_rounds=2,
        )
        reports[backend] = json.loads(run_eval(judged, request).read_text())

    def written(report, name):  # what each policy wrote (the first round's clues of an episode)
        if episodes:
            return [r["clues"] for q in report["per_question"] for r in q["results"][name]["rounds"][:1]]
        return [s["completion"] for st in report["per_state"] for s in st["results"][name]["samples"]]

    for name in ("baseline", "step-000002"):
        assert written(reports["base"], name) == written(reports["gold"], name)
    # The adapter attached to the judge's base computes what the adapter loaded on its own does.
    adapter = run_dir / "checkpoints" / "step-000002" / "adapter"
    base = load_frozen_base(cfg)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        plain = base.model(input_ids=ids).logits
        own = load_policy(cfg, adapter=adapter).model(input_ids=ids).logits
        with policy_on(cfg, adapter, base) as borrowed:
            attached = borrowed.model(input_ids=ids).logits
        after = base.model(input_ids=ids).logits
    assert torch.allclose(attached, own, atol=1e-6) and not torch.allclose(attached, plain, atol=1e-4)
    assert torch.equal(after, plain)  # and is gone again
