"""Bad config through the real entry point (`searchgrpo.cli.main`, in-process: it stops before any
heavy work): each mistake is exit 2 and one `error:` line naming the file, the key and what is
allowed; no traceback. `tests/unit/test_config.py` covers the loader itself and
`tests/integration/commands/test_cli.py` one case in a subprocess; this is the matrix at the command
line, including missing files.
"""

from __future__ import annotations

import pytest

from tests.helpers.faults import assert_one_error_line, main_in_process, tiny_world
from tests.helpers.tiny import SETS

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
    (
        "credentials in the server URL",
        "checker:\n  server: http://user:sk-secret@127.0.0.1:8000/v1\n",
        ["checker.server = 'http://***@127.0.0.1:8000/v1'", "without credentials", "checker.api_key_env"],
    ),
    ("section not a mapping", "grpo: 3\n", ["grpo must be a mapping of keys to values"]),
    ("top level not a mapping", "- grpo\n- train\n", ["the top level must be a mapping of sections"]),
    ("invalid YAML", "grpo: [unclosed\n", ["not valid YAML"]),
    ("nan lr", "train:\n  lr: .nan\n", ["train.lr = nan is not valid: expected a finite number"]),
    ("inf beta", "grpo:\n  beta: .inf\n", ["grpo.beta = inf is not valid: expected a finite number"]),
    ("-inf reward weight", "reward:\n  irrelevant: -.inf\n", ["reward.irrelevant = -inf", "a finite number"]),
    ("nan epsilon", "grpo:\n  epsilon: .NaN\n", ["grpo.epsilon = nan", "a finite number"]),
    ("inf temperature", "grpo:\n  temperature: .inf\n", ["grpo.temperature = inf", "a finite number"]),
    ("inf timeout", "checker:\n  timeout_s: .inf\n", ["checker.timeout_s = inf", "a finite number"]),
    ("overflowing lr", "train:\n  lr: 1e999\n", ["train.lr = '1e999'", "a finite number"]),
    ("huge K", "grpo:\n  num_generations: 100000\n", ["grpo.num_generations = 100000 is out of range", "<= 1024"]),
    ("huge LoRA rank", "lora:\n  r: 1000000\n", ["lora.r = 1000000 is out of range", "<= 4096"]),
    ("huge completion", "grpo:\n  max_new_tokens: 10000000\n", ["grpo.max_new_tokens = 10000000", "<= 65536"]),
    ("huge prompt", "grpo:\n  max_prompt_tokens: 100000000\n", ["grpo.max_prompt_tokens = 100000000", "<= 1048576"]),
    ("huge batch", "train:\n  states_per_step: 10000000\n", ["train.states_per_step = 10000000", "<= 100000"]),
    (
        "billion laughs",
        "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]\n",
        ["not valid YAML (aliases expand to more than 10000 values"],
    ),
    ("recursive alias", "grpo: &g\n  x: *g\n", ["not valid YAML (aliases expand to more than 10000 values"]),
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


def test_a_billion_laughs_in_set_is_refused_too(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bomb = "[" + ",".join(["&a [" + ",".join(["x"] * 200) + "]"] + ["*a"] * 200) + "]"
    code, out = main_in_process(["config", "--set", f"lora.target_modules={bomb}"], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "--set lora.target_modules: aliases expand to more than 10000 values")


@pytest.mark.parametrize("spelling", ["None", "none", "null", "~"])
def test_none_means_null_for_a_key_that_may_be_null(spelling, tmp_path, capsys, monkeypatch):
    from searchgrpo.config import load_config

    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, [f"checker.model={spelling}", f"train.max_steps={spelling}", f"checker.gguf={spelling}"])
    assert (cfg.checker.model, cfg.train.max_steps, cfg.checker.gguf) == (None, None, None)
    code, out = main_in_process(["config", "--set", f"checker.model={spelling}"], capsys, monkeypatch)
    assert code == 0 and "'None'" not in out
    code, out = main_in_process(["config", "--set", f"train.lr={spelling}"], capsys, monkeypatch)
    assert code == 2  # a key that may not be null still refuses it
    assert_one_error_line(out, "train.lr", "expected a number")


def test_non_utf8_config_file(tmp_path, capsys, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"grpo:\n  beta: \xff\xfe\n")
    code, out = main_in_process(["config", "-c", str(path)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, str(path), "not valid YAML")


@pytest.mark.parametrize(
    "override, words",
    [
        ("grpo", ["--set 'grpo'", "expected section.key=value"]),
        ("=3", ["expected section.key=value"]),
        ("grpo..beta=1", ["expected section.key=value"]),
        ("grpo.num_generations=1", ["<defaults> + --set: grpo.num_generations = 1 is out of range: expected >= 2"]),
    ],
)
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
        (
            ["--set", f"data.traces={ckpts}", "--set", f"data.corpus={tmp_path / 'nope.jsonl'}"],
            [f"{tmp_path / 'nope.jsonl'}: corpus file not found (data.corpus)"],
        ),
        (
            ["--set", f"data.traces={tmp_path / 'nope'}", "--set", f"data.corpus={corpus}"],
            [f"{tmp_path / 'nope'}: traces folder not found (data.traces)"],
        ),
        (["--set", f"data.traces={ckpts}"], ["data.corpus is null: set both data.traces and data.corpus"]),
        (["--set", "model.base=./no-such-model"], ["model.base: folder no-such-model not found"]),
        (["--set", f"model.base={tmp_path}"], [f"model.base: {tmp_path} is not a Hugging Face model folder"]),
        (["--resume"], ["runs: no run to resume; start one without --resume"]),
    ]
    for args, words in cases:
        code, out = main_in_process(["train", "--headless", *SETS, *args], capsys, monkeypatch)
        assert code == 2, (args, out)
        assert_one_error_line(out, *words)
