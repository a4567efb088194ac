"""Data parallelism on CPU: 2 gloo processes take the same steps as 1 process, whether launched
on one machine (torchrun) or as two "machines" on 127.0.0.1 (README's multi-machine recipe), and
whether a step has a gradient or not."""

import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from searchgrpo.sinks import read_events
from searchgrpo.train.checkpoints import latest_checkpoint
from tests.helpers import ROOT
from tests.helpers.tiny import SETS, searchgrpo, tiny_config
from tests.helpers.waiting import CEILING_S

COMMON = [
    *SETS,
    "--set",
    "train.states_per_step=4",
    "--set",
    "train.max_steps=3",
    "--set",
    "grpo.beta=0.05",
    "--set",
    "train.eval_every=3",
    "--set",
    "train.eval_states=6",
]


def _metrics(run_dir):
    events = list(read_events(run_dir / "events.jsonl"))
    steps = {e.step: e.metrics for e in events if type(e).__name__ == "StepFinished"}
    groups = [(e.state_id, [s.clues for s in e.samples]) for e in events if type(e).__name__ == "GroupScored"]
    evals = [e.metrics for e in events if type(e).__name__ == "EvalFinished"]
    return steps, groups, evals


def _adapter(run_dir):
    folder = latest_checkpoint(run_dir).path
    return load_file(str(next(folder.rglob("adapter_model.safetensors"))))


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The reference: the same run in one process."""
    cwd = tmp_path_factory.mktemp("one")
    proc = searchgrpo("train", "--headless", *COMMON, "--set", "train.run_name=one", cwd=cwd)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 0, out
    return cwd / "runs" / "one"


def _assert_same_run(one, other):
    steps1, groups1, evals1 = _metrics(one)
    steps2, groups2, evals2 = _metrics(other)
    # The same states, in the same order, with the same sampled clues; dynamic sampling's
    # replacements included (each step samples at least its 4 states).
    assert groups1 == groups2
    assert len(groups1) == sum(m["dynamic/sampled_groups"] for m in steps1.values()) >= 12
    assert sorted(steps1) == sorted(steps2) == [1, 2, 3]
    for step in steps1:
        for key, value in steps1[step].items():
            if (
                key.startswith("time/")
                or key.endswith("_time_share")
                or key in ("checker/latency_ms", "checker/time_s")
            ):
                continue
            # Gradients are summed in another order across processes: equal up to float rounding.
            assert math.isclose(value, steps2[step][key], rel_tol=1e-4, abs_tol=1e-6), (step, key)
    assert evals1 == evals2
    assert latest_checkpoint(other).step == 3
    # The adapters after 3 AdamW steps at lr 1e-2: B starts at zero and moves by ~1e-2 a step;
    # AdamW's normalisation lifts the gradients' rounding differences to ~2e-5 on some weights.
    weights1, weights2 = _adapter(one), _adapter(other)
    assert sorted(weights1) == sorted(weights2)
    assert all(float(w.abs().max()) > 1e-3 for name, w in weights1.items() if "lora_B" in name)
    for name, w in weights1.items():
        assert float((w - weights2[name]).abs().max()) <= 1e-4, name


def test_two_processes_match_one(one_process, tmp_path):
    two = searchgrpo("train", *COMMON, "--set", "train.run_name=two", "--num-processes", "2", cwd=tmp_path)
    out, _ = two.communicate(timeout=CEILING_S)
    assert two.returncode == 0, out
    _assert_same_run(one_process, tmp_path / "runs" / "two")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_machines_match_one(one_process, tmp_path):
    """README's multi-machine command, run twice on 127.0.0.1 as machine 0 and machine 1 (one
    process each, gloo): each "machine" has its own working folder and its own cache root, so
    they share nothing but the rendezvous address, as on two hosts."""
    port = _free_port()
    machines = []
    for rank in (0, 1):
        cwd = tmp_path / f"machine{rank}"
        (cwd / "home").mkdir(parents=True)
        # Machine 0 keeps the test session's cache root (tiny model, demo world); machine 1 builds its own.
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        if rank == 1:
            env["SEARCHGRPO_HOME"] = str(cwd / "home")
        cmd = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_machines",
            "2",
            "--num_processes",
            "2",
            "--machine_rank",
            str(rank),
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            str(port),
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "-m",
            "searchgrpo",
            "train",
            "--headless",
            *COMMON,
            "--set",
            "train.run_name=two-machines",
        ]
        machines.append(
            subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    outs = []
    try:
        outs = [m.communicate(timeout=CEILING_S)[0] for m in machines]
    finally:
        for m in machines:
            if m.poll() is None:
                m.kill()
    assert [m.returncode for m in machines] == [0, 0], outs
    _assert_same_run(one_process, tmp_path / "machine0" / "runs" / "two-machines")
    assert not (tmp_path / "machine1" / "runs").exists()  # only rank 0 writes the run


def test_two_processes_match_one_with_episode_credit_and_the_informative_pool(tmp_path):
    """Episode credit (each rank plays on its own groups' branches), per-clue advantages and the
    informative pool (every rank learns the same from the gathered outcomes) keep N processes
    taking the same steps as one."""
    credit = [
        *COMMON,
        *("--set", "grpo.credit=episode", "--set", "reward.per_clue=true"),
        *("--set", "train.state_sampler=informative", "--set", "train.informative_retry=2"),
    ]
    runs = {}
    for name, extra in (("one", ["--headless"]), ("two", ["--num-processes", "2"])):
        proc = searchgrpo("train", *credit, "--set", f"train.run_name={name}", *extra, cwd=tmp_path)
        out, _ = proc.communicate(timeout=CEILING_S)
        assert proc.returncode == 0, out
        runs[name] = tmp_path / "runs" / name
    _assert_same_run(runs["one"], runs["two"])
    steps, _, _ = _metrics(runs["two"])
    assert all(m["credit/branches"] == 3 * m["dynamic/sampled_groups"] for m in steps.values())


def test_two_processes_each_judging_their_own_groups_match_one(tmp_path):
    """`checker.backend: base`: every rank's judge runs its own policy's base weights on its own
    groups, and the run is the one process's."""
    judge = ["--set", "checker.backend=base", "--set", "checker.cache=false"]
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    one = searchgrpo("train", "--headless", *COMMON, *judge, "--set", "train.run_name=one", cwd=tmp_path / "a")
    two = searchgrpo(
        "train", *COMMON, *judge, "--set", "train.run_name=two", "--num-processes", "2", cwd=tmp_path / "b"
    )
    for proc in (one, two):
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out
    _assert_same_run(tmp_path / "a" / "runs" / "one", tmp_path / "b" / "runs" / "two")


ZERO_VARIANCE_STEPS = ([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [[0.5, 0.5, 0.5], [0.25, 0.25, 0.25]])
"""The rewards of two steps' groups: one with a learning signal, then one where every group has
zero variance (at beta 0: no gradient at all)."""


def zero_variance_steps(out: Path) -> None:
    """Train ZERO_VARIANCE_STEPS at beta 0 on hand-made groups, this process's share of them (one
    process, or a rank of a torch.distributed job: WORLD_SIZE, RANK, MASTER_ADDR from the
    environment); rank 0 writes the adapter and AdamW's step count of every weight to `out`."""
    import torch
    from safetensors.torch import save_file

    from searchgrpo.policy.model import load_policy
    from searchgrpo.train.distributed import Dist
    from searchgrpo.train.rollouts import Rollouts
    from searchgrpo.train.step import update
    from tests.integration.train.test_step_update import hand_made_groups, training

    dist = Dist("cpu")
    cfg = tiny_config(out.parent, "grpo.beta=0")
    policy = load_policy(cfg)
    optimizer, scheduler = training(cfg, policy)
    for seed, rewards in enumerate(ZERO_VARIANCE_STEPS):
        mine = dist.shard(hand_made_groups(policy, rewards, seed=seed))
        update(cfg, policy, optimizer, scheduler, Rollouts(mine, mine, target=len(rewards)), dist=dist)
    if dist.is_main:
        weights = {n: p.detach().contiguous() for n, p in policy.model.named_parameters() if p.requires_grad}
        steps = [float(state.get("step", 0)) for state in optimizer.state.values()]
        save_file({**weights, "adamw_steps": torch.tensor(steps)}, str(out))
    if dist.enabled:
        import torch.distributed as td

        td.destroy_process_group()


def test_a_step_without_gradient_leaves_adamw_alone_on_every_process(tmp_path):
    """Beta 0 and every group zero-variance: no rank has a gradient. One process leaves AdamW
    alone (no moment decay, no step count); two processes must too, not take a momentum step on
    zero gradients (which moved the adapter by ~0.67 lr per weight)."""
    one = tmp_path / "one" / "out.safetensors"
    one.parent.mkdir()
    zero_variance_steps(one)
    two = tmp_path / "two" / "out.safetensors"
    two.parent.mkdir()
    port = _free_port()
    ranks = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "WORLD_SIZE": "2",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        code = (
            "import sys; from pathlib import Path; "
            "from tests.integration.train.test_distributed import zero_variance_steps; "
            "zero_variance_steps(Path(sys.argv[1]))"
        )
        ranks.append(
            subprocess.Popen(
                [sys.executable, "-c", code, str(two)],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        outs = [r.communicate(timeout=CEILING_S)[0] for r in ranks]
    finally:
        for r in ranks:
            if r.poll() is None:
                r.kill()
    assert [r.returncode for r in ranks] == [0, 0], outs
    alone, together = load_file(str(one)), load_file(str(two))
    assert alone.pop("adamw_steps").tolist() == together.pop("adamw_steps").tolist()  # 1 update each
    assert sorted(alone) == sorted(together)
    assert all(float(w.abs().max()) > 1e-3 for name, w in alone.items() if "lora_B" in name)  # the first step moved B
    for name, w in alone.items():
        assert float((w - together[name]).abs().max()) <= 1e-5, name
