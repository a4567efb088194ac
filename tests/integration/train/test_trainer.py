"""The training loop on the tiny model: learning, events, checkpoints, resume and control."""

import json
import threading

import pytest
import torch
from safetensors.torch import load_file

from searchgrpo.events import (
    CheckpointSaved,
    EvalFinished,
    GroupScored,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepFinished,
    event_from_dict,
    event_to_dict,
)
from searchgrpo.train.checkpoints import latest_checkpoint, list_checkpoints
from searchgrpo.train.trainer import Trainer, TrainerControl
from tests.helpers.tiny import tiny_config
from tests.helpers.waiting import wait_until


def run(cfg, **kw):
    events = []
    trainer = Trainer(cfg, sink=events.append, **kw)
    summary = trainer.train()
    return trainer, summary, events


def run_until(cfg, step):
    """Train `cfg`, stopping (with a checkpoint) once step `step` ends; returns (summary, events)."""
    control = TrainerControl()
    events = []

    def stop_after(event):
        events.append(event)
        if isinstance(event, StepFinished) and event.step == step:
            control.stop.set()

    return Trainer(cfg, sink=stop_after, control=control).train(), events


def test_two_steps_change_lora_but_not_the_base(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=2", "grpo.beta=0.1", "train.eval_every=2", "train.eval_states=3")
    trainer = Trainer(cfg, sink=lambda e: None)
    trainer.setup()
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    events = []
    trainer.sink = events.append
    trainer._loop()
    after = dict(trainer.policy.model.named_parameters())
    lora = [n for n in before if "lora_" in n]
    base = [n for n in before if "lora_" not in n]
    assert lora and base
    assert any(not torch.equal(before[n], after[n]) for n in lora)
    assert all(torch.equal(before[n], after[n]) for n in base)

    kinds = [type(e) for e in events]
    assert kinds[0] is RunStarted and kinds[-1] is RunFinished
    assert kinds.count(StepFinished) == 2 and kinds.count(GroupScored) == 4
    assert EvalFinished in kinds and CheckpointSaved in kinds
    group = next(e for e in events if isinstance(e, GroupScored))
    assert len(group.samples) == 3
    assert all(set(s.components) == set(s.counts) for s in group.samples)
    for e in events:  # every event survives a JSON round trip
        assert event_from_dict(json.loads(json.dumps(event_to_dict(e)))) == e
    step = next(e for e in events if isinstance(e, StepFinished)).metrics
    for key in (
        "reward/mean",
        "reward/frac_zero_std",
        "loss/kl",
        "loss/clip_frac",
        "train/lr",
        "time/step",
        "time/generate",
        "time/score",
        "time/loss",
        "tokens/completion",
        "reward/new_important",
    ):
        assert key in step
    assert step["loss/kl"] >= 0


def test_checkpoint_holds_everything_to_resume(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=2", "train.save_every=1", "train.keep_last=1")
    _, summary, events = run(cfg)
    found = list_checkpoints(summary.run_dir)
    assert [c.step for c in found] == [2]  # keep_last
    ckpt = found[0].path
    for name in (
        "adapter/adapter_model.safetensors",
        "adapter/adapter_config.json",
        "optimizer.pt",
        "scheduler.pt",
        "rng.safetensors",
        "trainer_state.json",
    ):
        assert (ckpt / name).is_file(), name
    assert "torch_cpu" in load_file(str(ckpt / "rng.safetensors"))
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["base_model"] == "tiny"
    # What each sampled state's group taught (under the default filter, `reward`: its rewards
    # differ), so that a resumed run counts dynamic/*_after_* on.
    sampled = {e.state_id: not e.zero_std for e in events if isinstance(e, GroupScored)}
    assert state["state_pool"] == {"last_taught": sampled} and len(sampled) >= 4
    assert torch.load(ckpt / "optimizer.pt", weights_only=True)["state"]
    assert (summary.run_dir / "config.yaml").is_file()


def test_resume_reproduces_an_uninterrupted_run(tmp_path):
    common = ("train.max_steps=4", "grpo.beta=0.05", "grpo.num_iterations=2")
    _, _, straight = run(tiny_config(tmp_path / "a", *common, "train.run_name=straight"))
    # The same run, stopped after step 2 (with a checkpoint), then resumed.
    cfg = tiny_config(tmp_path / "b", *common, "train.run_name=split")
    summary, first = run_until(cfg, 2)
    assert summary.reason == "stopped" and summary.step == 2
    assert latest_checkpoint(summary.run_dir).step == 2
    _, resumed_summary, second = run(cfg, resume=True, run_dir=summary.run_dir)
    assert resumed_summary.step == 4 and resumed_summary.reason == "completed"
    assert next(e for e in second if isinstance(e, RunStarted)).start_step == 2

    def metrics(events):
        return {
            e.step: {k: v for k, v in e.metrics.items() if not k.startswith("time/")}
            for e in events
            if isinstance(e, StepFinished)
        }

    assert {**metrics(first), **metrics(second)} == metrics(straight)


def test_pause_resume_and_save_now(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=3")
    control = TrainerControl()
    control.pause.set()
    events = []
    trainer = Trainer(cfg, sink=events.append, control=control)
    thread = threading.Thread(target=trainer.train)
    thread.start()
    wait_until(lambda: any(isinstance(e, RunPaused) for e in events), "the run paused")
    assert not any(isinstance(e, StepFinished) for e in events)
    control.save_now.set()
    wait_until(lambda: any(isinstance(e, CheckpointSaved) for e in events), "the checkpoint saved while paused")
    assert any(isinstance(e, CheckpointSaved) and e.step == 0 for e in events)
    control.pause.clear()
    wait_until(lambda: not thread.is_alive(), "the resumed run to end")
    assert any(isinstance(e, RunResumed) for e in events)
    assert isinstance(events[-1], RunFinished) and events[-1].step == 3


def test_resume_refuses_another_base_model(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=1", "train.run_name=r")
    _, summary, _ = run(cfg)
    state_file = latest_checkpoint(summary.run_dir).path / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["base_model"] = "some/other-model"
    state_file.write_text(json.dumps(state))
    from searchgrpo.errors import UserError

    with pytest.raises(UserError, match="trained on 'some/other-model'"):
        Trainer(cfg, resume=True, run_dir=summary.run_dir).train()


def step_groups(events, step):
    return [e for e in events if isinstance(e, GroupScored) and e.step == step]


def test_dynamic_sampling_keeps_the_batch_full_of_informative_groups(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=3", "train.states_per_step=3")
    _, _, events = run(cfg)
    for step in (1, 2, 3):
        groups = step_groups(events, step)
        m = next(e for e in events if isinstance(e, StepFinished) and e.step == step).metrics
        trained = [g for g in groups if g.in_batch]
        assert len(trained) == 3  # the batch keeps its size
        assert m["dynamic/sampled_groups"] == len(groups) and m["dynamic/rounds"] >= 1
        # Replaced groups are exactly the zero-variance ones left out, and they are only left out
        # when an informative group took their place.
        replaced = [g for g in groups if not g.in_batch]
        assert all(g.zero_std for g in replaced) and m["dynamic/replaced_groups"] == len(replaced)
        assert m["reward/frac_zero_std"] == pytest.approx(sum(g.zero_std for g in trained) / 3)
        # Informative groups fill the batch first: every one found is trained, up to the batch size.
        found = sum(not g.zero_std for g in groups)
        assert sum(not g.zero_std for g in trained) == min(3, found)
        if replaced and any(g.zero_std for g in trained):
            # A zero-variance group is trained beside a replaced one only when the step fell short
            # of informative groups after every retry (which the sampled rewards decide; see
            # test_dynamic_sampling_gives_up_after_its_retries for the rounds it then ran).
            assert found < 3 and m["dynamic/rounds"] == 1 + cfg.grpo.dynamic_max_retries
        assert len({g.state_id for g in groups}) == len(groups)  # a refill never repeats a state of the step


def test_dynamic_sampling_gives_up_after_its_retries(tmp_path):
    # With every reward weight 0 each group has equal rewards: no round can find an informative one.
    zero = [
        f"reward.{name}=0"
        for name in (
            "new_important",
            "new_relevant",
            "retrieved_doc",
            "duplicate_clue",
            "unparsable",
            "clue_count_out_of_bounds",
            "long_clue",
            "question_copy",
            "empty_clue",
            "invented_number",
            "cut_clue",
        )
    ]
    cfg = tiny_config(tmp_path, "train.max_steps=1", "grpo.dynamic_max_retries=2", *zero)
    _, _, events = run(cfg)
    m = next(e for e in events if isinstance(e, StepFinished)).metrics
    assert m["dynamic/rounds"] == 3 and m["dynamic/sampled_groups"] > 2 and m["reward/frac_zero_std"] == 1.0
    assert sum(g.in_batch for g in step_groups(events, 1)) == 2
    off = tiny_config(tmp_path / "off", "train.max_steps=1", "grpo.dynamic_sampling=false", *zero)
    m = next(e for e in run(off)[2] if isinstance(e, StepFinished)).metrics
    assert m["dynamic/rounds"] == 1 and m["dynamic/sampled_groups"] == 2


def finds(sample) -> float:
    return sample.components["new_important"] + sample.components["new_relevant"]


def test_dynamic_filter_finds_replaces_groups_that_differ_only_by_costs(tmp_path):
    cfg = tiny_config(
        tmp_path,
        "train.max_steps=3",
        "train.states_per_step=3",
        "grpo.dynamic_filter=finds",
        "grpo.dynamic_max_retries=3",
    )
    _, _, events = run(cfg)
    seen_same_finds = 0
    for step in (1, 2, 3):
        groups = step_groups(events, step)
        m = next(e for e in events if isinstance(e, StepFinished) and e.step == step).metrics
        same = [len({round(finds(s), 9) for s in g.samples}) == 1 for g in groups]
        seen_same_finds += sum(same)
        assert m["dynamic/frac_same_finds_sampled"] == pytest.approx(sum(same) / len(groups))
        trained = [g for g in groups if g.in_batch]
        replaced = [g for g, s in zip(groups, same) if s and not g.in_batch]
        assert len(trained) == 3 and m["dynamic/replaced_groups"] == len(replaced)
        # The batch takes every group with different finds, up to its size, before any other (a
        # refill may also draw more of them than the step needs).
        informative = [g for g, s in zip(groups, same) if not s and not g.zero_std]
        assert sum(g.in_batch for g in informative) == min(3, len(informative))
        assert m["dynamic/frac_uninformative_batch"] == pytest.approx(1 - min(3, len(informative)) / 3)
    assert seen_same_finds > 0  # the tiny model's groups do include some to replace


def test_usefulness_orders_fillers_by_what_they_teach():
    from searchgrpo.env.prompts import ParsedClues
    from searchgrpo.env.reward import RewardCalculator
    from searchgrpo.env.search_round import StepResult
    from searchgrpo.train.rollouts import ScoredGroup, choose_batch

    calc = RewardCalculator.from_weights({"new_important": 1.0, "retrieved_doc": -0.02})

    def group(index, *samples):
        results = [StepResult((), ParsedClues((), 0, False), (), calc.combine(c)) for c in samples]
        return ScoredGroup((0, index), None, [], [], results, zero_std=len({r.reward.total for r in results}) == 1)

    finding = group(0, {"new_important": 1, "retrieved_doc": 10}, {"new_important": 0, "retrieved_doc": 10})
    costs_only = group(1, {"new_important": 1, "retrieved_doc": 5}, {"new_important": 1, "retrieved_doc": 10})
    flat = group(2, {"new_important": 1, "retrieved_doc": 5}, {"new_important": 1, "retrieved_doc": 5})
    assert [g.usefulness("reward") for g in (finding, costs_only, flat)] == [0, 0, 2]
    assert [g.usefulness("finds") for g in (finding, costs_only, flat)] == [0, 1, 2]
    assert costs_only.same_finds and not finding.same_finds
    flags = {g.key: g.usefulness("finds") for g in (flat, costs_only, finding)}
    assert choose_batch(flags, 2) == {finding.key, costs_only.key}


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_the_schedule_warms_up_over_warmup_steps(tmp_path, schedule):
    """`train.warmup_steps` is a linear warm-up for every `lr_scheduler`, counted in steps (each of
    `grpo.num_iterations` optimiser updates); `constant` then holds the peak, `linear` decays to 0."""
    cfg = tiny_config(
        tmp_path,
        "train.max_steps=4",
        "train.warmup_steps=2",
        "grpo.num_iterations=2",
        f"train.lr_scheduler={schedule}",
    )
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        lrs = []
        for _ in range(8):  # 4 steps x 2 updates
            lrs.append(trainer.scheduler.get_last_lr()[0])
            trainer.optimizer.step()
            trainer.scheduler.step()
    finally:
        trainer.close()
    peak = cfg.train.lr
    # Warm-up over 2 steps = 4 updates: 0, 1/4, 2/4, 3/4 of the peak; then the schedule proper.
    after = [1.0] * 4 if schedule == "constant" else [1.0, 0.75, 0.5, 0.25]
    assert lrs == pytest.approx([peak * f for f in [0.0, 0.25, 0.5, 0.75, *after]])


def test_eval_at_start_gives_the_eval_curve_its_start(tmp_path):
    """`train.eval_at_start`: one evaluation before step 1 (at step 0, before any update), then the
    usual ones; without it, none at step 0."""
    on = tiny_config(
        tmp_path / "on", "train.max_steps=2", "train.eval_every=2", "train.eval_states=3", "train.eval_at_start=true"
    )
    _, summary, events = run(on)
    evals = [e.step for e in events if isinstance(e, EvalFinished)]
    assert evals == [0, 2]
    first_step = next(i for i, e in enumerate(events) if isinstance(e, StepFinished))
    assert next(i for i, e in enumerate(events) if isinstance(e, EvalFinished)) < first_step
    assert summary.last_eval
    off = tiny_config(tmp_path / "off", "train.max_steps=2", "train.eval_every=2", "train.eval_states=3")
    _, _, events = run(off)
    assert [e.step for e in events if isinstance(e, EvalFinished)] == [2]
