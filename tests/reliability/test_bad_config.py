"""Bad config through the real entry point (`searchgrpo.cli.main`, in-process: it stops before any
heavy work): each mistake is exit 2 and one `error:` line naming the file, the key and what is
allowed; no traceback. `tests/test_config.py` covers the loader itself and `tests/test_cli.py` one
case in a subprocess; this is the matrix at the command line, including missing files.
"""

from __future__ import annotations

import pytest

from tests.reliability.helpers import SETS, assert_one_error_line, main_in_process, tiny_world

FILE_CASES = [
    ("unknown key", "grpo:\n  K: 4\n", ["unknown key 'grpo.K'", "expected one of: num_generations"]),
    ("unknown section", "trainer:\n  lr: 1.0e-5\n", ["unknown key 'trainer'", "expected one of: model, lora"]),
    ("wrong type: number", "train:\n  lr: fast\n", ["train.lr = 'fast' is not valid", "expected a number"]),
    ("wrong type: integer", "train:\n  epochs: 1.5\n", ["train.epochs = 1.5", "expected an integer"]),
    ("wrong type: bool", "model:\n  load_in_4bit: maybe\n", ["model.load_in_4bit = 'maybe'", "true or false"]),
    ("wrong type: list", "lora:\n  target_modules: 5\n", ["lora.target_modules = 5", "expected a list of a string"]),
    ("wrong type: choice", "grpo:\n  loss_type: ppo\n", ["grpo.loss_type = 'ppo'", "'grpo', 'dr_grpo', 'dapo'"]),
    ("K < 2", "grpo:\n  num_generations: 1\n", ["grpo.num_generations = 1 is out of range", "expected >= 2"]),
    ("epsilon = 0", "grpo:\n  epsilon: 0\n", ["grpo.epsilon = 0.0 is out of range", "expected > 0"]),
    ("epsilon < 0", "grpo:\n  epsilon: -0.2\n", ["grpo.epsilon = -0.2 is out of range", "expected > 0"]),
    ("epsilon_high = 0", "grpo:\n  epsilon_high: 0\n", ["grpo.epsilon_high = 0.0", "null or > 0"]),
    ("lr = 0", "train:\n  lr: 0\n", ["train.lr = 0.0 is out of range", "expected > 0"]),
    ("lr < 0", "train:\n  lr: -1e-5\n", ["train.lr = -1e-05 is out of range", "expected > 0"]),
    ("top_p = 0", "grpo:\n  top_p: 0\n", ["grpo.top_p = 0.0", "in (0, 1]"]),
    ("eval_fraction > 1", "data:\n  eval_fraction: 1.5\n", ["data.eval_fraction = 1.5", "in [0, 1]"]),
    ("states_per_step = 0", "train:\n  states_per_step: 0\n", ["train.states_per_step = 0", ">= 1"]),
    ("negative beta", "grpo:\n  beta: -0.1\n", ["grpo.beta = -0.1", ">= 0"]),
    ("min clues above max", "env:\n  min_clues: 5\n  max_clues: 3\n", ["env.min_clues = 5 is above env.max_clues = 3"]),
    ("4-bit on cpu", "model:\n  device: cpu\n  load_in_4bit: true\n", ["model.load_in_4bit = true needs CUDA"]),
    ("bad device", "model:\n  device: tpu\n", ["model.device = 'tpu'", "auto, cpu, cuda or cuda:N"]),
    ("credentials in the server URL", "checker:\n  server: http://user:sk-secret@127.0.0.1:8000/v1\n",
     ["checker.server = 'http://***@127.0.0.1:8000/v1'", "without credentials", "checker.api_key_env"]),
    ("section not a mapping", "grpo: 3\n", ["grpo must be a mapping of keys to values"]),
    ("top level not a mapping", "- grpo\n- train\n", ["the top level must be a mapping of sections"]),
    ("invalid YAML", "grpo: [unclosed\n", ["not valid YAML"]),
]


@pytest.mark.parametrize("name, text, words", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_config_file_is_one_line_naming_the_key(name, text, words, tmp_path, capsys, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(["train", "--headless", "-c", str(path)], capsys, monkeypatch)
    assert code == 2, out
    line = assert_one_error_line(out, str(path), *words)
    assert "sk-secret" not in out
    assert not (tmp_path / "runs").exists(), line  # stopped before anything was written


def test_non_utf8_config_file(tmp_path, capsys, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"grpo:\n  beta: \xff\xfe\n")
    code, out = main_in_process(["config", "-c", str(path)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, str(path), "not valid YAML")


@pytest.mark.parametrize("override, words", [
    ("grpo", ["--set 'grpo'", "expected section.key=value"]),
    ("=3", ["expected section.key=value"]),
    ("grpo..beta=1", ["expected section.key=value"]),
    ("grpo.num_generations=1", ["<defaults> + --set: grpo.num_generations = 1 is out of range: expected >= 2"]),
])
def test_bad_override_is_one_line(override, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(["train", "--headless", "--set", override], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, *words)


def test_missing_files_name_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpts, corpus = tiny_world(tmp_path)
    cases = [
        (["-c", str(tmp_path / "nope.yaml")], [f"{tmp_path / 'nope.yaml'}: config file not found"]),
        (["--set", f"data.traces={ckpts}", "--set", f"data.corpus={tmp_path / 'nope.jsonl'}"],
         [f"{tmp_path / 'nope.jsonl'}: corpus file not found (data.corpus)"]),
        (["--set", f"data.traces={tmp_path / 'nope'}", "--set", f"data.corpus={corpus}"],
         [f"{tmp_path / 'nope'}: traces folder not found (data.traces)"]),
        (["--set", f"data.traces={ckpts}"], ["data.corpus is null: set both data.traces and data.corpus"]),
        (["--set", "model.base=./no-such-model"], ["model.base: folder no-such-model not found"]),
        (["--set", f"model.base={tmp_path}"], [f"model.base: {tmp_path} is not a Hugging Face model folder"]),
        (["--resume"], ["runs: no run to resume; start one without --resume"]),
    ]
    for args, words in cases:
        code, out = main_in_process(["train", "--headless", *SETS, *args], capsys, monkeypatch)
        assert code == 2, (args, out)
        assert_one_error_line(out, *words)
