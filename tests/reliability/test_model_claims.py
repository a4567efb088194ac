"""Models that are not what they claim: a model folder whose config.json and weights disagree (a
layer more in config.json, a tensor deleted: it used to load with random weights) is refused in one
line; a truncated safetensors file is one line naming the file; an adapter whose config disagrees
with its weights, or that belongs to another base, is one line in eval before any weight loads, as
in merge.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import transformers

from searchgrpo.config import load_config
from searchgrpo.policy.model import resolve_base
from searchgrpo.policy.tiny import ensure_tiny_model
from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS, TINY_OVERRIDES


@pytest.fixture
def weight_loads(monkeypatch):
    calls: list = []
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def counted(cls, *args, **kwargs):
        calls.append(args[:1])
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    return calls


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from searchgrpo.train.checkpoints import list_checkpoints
    from searchgrpo.train.trainer import Trainer
    from tests.helpers.tiny import tiny_config

    root = tmp_path_factory.mktemp("claims")
    return list_checkpoints(Trainer(tiny_config(root, "train.max_steps=1", "train.run_name=c")).train().run_dir)[0].path


@pytest.fixture(scope="module")
def merged(checkpoint, tmp_path_factory) -> Path:
    """A real merged model folder (`searchgrpo merge`)."""
    from searchgrpo.export.merge import MergeRequest, run_merge

    cfg = load_config(None, list(TINY_OVERRIDES))
    out = tmp_path_factory.mktemp("merged")
    (folder,) = run_merge(cfg, MergeRequest([str(checkpoint)], output_dir=str(out), dtype="float32"))
    return folder


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / folder.name
    shutil.copytree(folder, target)
    return target


def eval_on_base(base: Path, tmp_path: Path, capsys, monkeypatch, *extra: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    return main_in_process(
        [
            "eval",
            "--baseline",
            "--limit",
            "1",
            "--output",
            str(tmp_path / "r.json"),
            *SETS,
            "--set",
            f"model.base={base}",
            *extra,
        ],
        capsys,
        monkeypatch,
    )


def test_a_merged_model_with_a_layer_more_in_its_config_is_refused(merged, tmp_path, capsys, monkeypatch):
    folder = copy_of(merged, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    layers = config["num_hidden_layers"]
    config["num_hidden_layers"] = layers + 1
    (folder / "config.json").write_text(json.dumps(config))
    code, out = eval_on_base(folder, tmp_path, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(
        out,
        f"model.base: {folder}: its weights do not match its config.json",
        "weights missing (they would be random)",
        f"'model.layers.{layers}.",
    )
    assert not (tmp_path / "r.json").exists()


def test_a_model_folder_with_a_tensor_deleted_is_refused(tmp_path, capsys, monkeypatch):
    from safetensors.torch import load_file, save_file

    base = resolve_base(load_config(None, list(TINY_OVERRIDES))).path
    folder = copy_of(base, tmp_path)
    weights = load_file(str(folder / "model.safetensors"))
    gone = "model.layers.1.mlp.down_proj.weight"
    del weights[gone]
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    code, out = eval_on_base(folder, tmp_path, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "its weights do not match its config.json", "1 weights missing", repr(gone))


def test_a_truncated_safetensors_file_is_one_line_naming_it(tmp_path, capsys, monkeypatch, weight_loads):
    base = resolve_base(load_config(None, list(TINY_OVERRIDES))).path
    folder = copy_of(base, tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, out = eval_on_base(folder, tmp_path, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"model.base: {weights}: truncated: its tensors end at byte", "copy or write it again")
    assert weight_loads == []


def test_an_adapter_whose_config_disagrees_with_its_weights_is_one_line_in_eval(
    checkpoint, tmp_path, capsys, monkeypatch, weight_loads
):
    ckpt = copy_of(checkpoint, tmp_path)
    config_path = ckpt / "adapter" / "adapter_config.json"
    config = json.loads(config_path.read_text())
    assert config["r"] == 16
    config["r"] = 8
    config_path.write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(["eval", "--checkpoint", str(ckpt), "--limit", "1", *SETS], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"{ckpt}: adapter_config.json says r = 8, but its weights have rank 16")
    assert weight_loads == []


def test_an_adapter_of_another_base_is_one_line_in_eval_as_in_merge(
    checkpoint, tmp_path, capsys, monkeypatch, weight_loads
):
    other = ensure_tiny_model(tmp_path / "tiny-32", hidden_size=32)
    ckpt = copy_of(checkpoint, tmp_path)
    state = json.loads((ckpt / "trainer_state.json").read_text())
    del state["base_model"]  # only its shapes can tell
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    monkeypatch.chdir(tmp_path)
    lines = []
    for command in (["eval", "--checkpoint", str(ckpt), "--limit", "1"], ["merge", "--checkpoint", str(ckpt)]):
        code, out = main_in_process([*command, *SETS, "--set", f"model.base={other}"], capsys, monkeypatch)
        assert code == 2
        lines.append(
            assert_one_error_line(out, "which does not fit the base model's", "was it trained on another model?")
        )
    assert lines[0] == lines[1]  # the same check, the same words
    assert weight_loads == []
