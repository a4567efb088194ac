"""Configuration that means what it says: a key written twice is refused naming both lines; values
are read as written (no YAML 1.1 octal, hex or sexagesimal numbers); a key given both a value and
keys, a string key given a number, look-alike keys and values, huge values and integers too long
to read all give one line that names the fix, cut to a few hundred characters;
`SEARCHGRPO_DEBUG=0` means off.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searchgrpo.config import load_config
from tests.helpers import ROOT
from tests.helpers.faults import assert_one_error_line, cli_env, main_in_process, run_cli, tiny_world
from tests.helpers.tiny import TINY_OVERRIDES


def config_cli(args: list[str], capsys, monkeypatch) -> tuple[int, str]:
    return main_in_process(["config", *args], capsys, monkeypatch)


# --------------------------------------------------------------------------- written twice


def test_a_pasted_second_section_is_refused_naming_both_lines(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config.yaml", config)
    lines = config.read_text().splitlines()
    first = lines.index("train:") + 1
    config.write_text("\n".join([*lines, "", "train:", "  lr: 1.0e-4", ""]))
    second = len(lines) + 2
    code, out = config_cli(["--config", str(config)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(
        out, f"{config}: not valid YAML (line {second}: key 'train' is written twice (first at line {first})"
    )


def test_a_key_written_twice_in_a_section_is_refused(tmp_path, capsys, monkeypatch):
    config = tmp_path / "c.yaml"
    config.write_text("grpo:\n  beta: 0.0\n  epsilon: 0.2\n  beta: 0.5\n")
    code, out = config_cli(["--config", str(config)], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "line 4: key 'beta' is written twice (first at line 2)")


def test_a_merge_key_may_still_be_overridden(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("base: &b {beta: 0.1, epsilon: 0.3}\n")
    config.write_text("grpo:\n  <<: {beta: 0.1, epsilon: 0.3}\n  beta: 0.0\n")
    cfg = load_config(config)
    assert cfg.grpo.beta == 0.0 and cfg.grpo.epsilon == 0.3


# --------------------------------------------------------------------------- read as written


def test_numbers_are_read_as_written():
    cfg = load_config(None, ["train.seed=010", "train.lr=1e-5", "grpo.beta=.5"])
    assert cfg.train.seed == 10 and cfg.train.lr == 1e-5 and cfg.grpo.beta == 0.5


@pytest.mark.parametrize(
    "override, shown",
    [
        ("train.seed=1:30", "'1:30'"),
        ("train.lr=0x10", "'0x10'"),
        ("train.seed=0o17", "'0o17'"),
        ("train.seed=1_000", "'1_000'"),
    ],
)
def test_yaml_1_1_numbers_are_refused(override, shown, capsys, monkeypatch):
    code, out = config_cli(["--set", override], capsys, monkeypatch)
    assert code == 2
    key = override.split("=")[0]
    assert_one_error_line(out, f"{key} = {shown} is not valid", "numbers are read as written, in decimal")


@pytest.mark.parametrize("args", [["grpo=1", "grpo.beta=0"], ["grpo.beta=0", "grpo=1"]])
def test_a_section_given_a_value_and_keys_is_one_clear_line(args, capsys, monkeypatch):
    code, out = config_cli([a for arg in args for a in ("--set", arg)], capsys, monkeypatch)
    assert code == 2
    line = assert_one_error_line(out, "grpo")
    assert "TypeError" not in line and ("section" in line)


@pytest.mark.parametrize("value", ["8", "2024", "true"])
def test_a_string_key_given_a_number_says_how_to_quote_it(value, capsys, monkeypatch):
    code, out = config_cli(["--set", f"checker.model={value}"], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(
        out, f'to give {value} as text, quote it: model: "{value}" in YAML, or --set \'checker.model="{value}"\''
    )
    assert load_config(None, [f'checker.model="{value}"']).checker.model == value


# --------------------------------------------------------------------------- look-alikes and sizes


@pytest.mark.parametrize(
    "override, words",
    [
        ("grpo.loss_type=d\u0430po", "grpo.loss_type = 'd\\u0430po' is not valid"),  # Cyrillic a
        ("grpo.loss_type=dapo\u200b", "'dapo\\u200b'"),  # a zero-width space
        ("checker.structured_output=none\u0301", "'none\\u0301'"),  # NFD: a combining accent
        ("train.lr\u200b=0.1", "unknown key 'train.lr\\u200b'; did you mean 'train.lr'?"),
        ("tr\u0430in.lr=0.1", "unknown key 'tr\\u0430in'; did you mean 'train'?"),
    ],
)
def test_look_alikes_are_shown_escaped(override, words, capsys, monkeypatch):
    code, out = config_cli(["--set", override], capsys, monkeypatch)
    assert code == 2
    line = assert_one_error_line(out, words)
    assert line.isascii()


def test_a_huge_value_gives_a_short_line(capsys, monkeypatch):
    code, out = config_cli(["--set", "grpo.loss_type=" + "x" * 20_000_000], capsys, monkeypatch)
    assert code == 2
    line = assert_one_error_line(out, "grpo.loss_type = 'xxx", "(20000002 characters)")
    assert len(line) < 600


def test_a_huge_unparsable_set_gives_a_short_line(capsys, monkeypatch):
    code, out = config_cli(["--set", "y" * 5_000_000], capsys, monkeypatch)
    assert code == 2
    assert len(assert_one_error_line(out, "expected section.key=value")) < 600


def test_an_integer_too_long_to_read_in_the_config_and_in_set(tmp_path, capsys, monkeypatch):
    config = tmp_path / "c.yaml"
    config.write_text("train:\n  seed: " + "9" * 5000 + "\n")
    code, out = config_cli(["--config", str(config)], capsys, monkeypatch)
    assert code == 2
    assert len(assert_one_error_line(out, f"{config}: not valid YAML (line 2: an integer of 5000 digits")) < 600
    code, out = config_cli(["--set", "train.seed=" + "9" * 5000], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "--set train.seed: line 1: an integer of 5000 digits (at most 4300 are read)")


def test_an_integer_too_long_in_a_trace_file_costs_that_file_only(tmp_path):
    from searchgrpo.world import load_dataset

    traces, corpus = tiny_world(tmp_path)
    run = sorted(traces.glob("*/run_001"))[0]
    second = run / "round_002.json"
    text = second.read_text()
    second.write_text(text.replace('"round": 2', '"round": ' + "2" * 5000, 1))
    with corpus.open("a") as fh:
        fh.write(json.dumps({"docid": "big", "title": "t", "text": "x"})[:-1] + ', "n": ' + "7" * 5000 + "}\n")
    ds = load_dataset(load_config(None, [*TINY_OVERRIDES, f"data.traces={traces}", f"data.corpus={corpus}"]))
    issues = [str(i) for i in ds.issues.issues]
    assert f"{second}: holds an integer of more than 4300 digits, too long to read" in issues
    assert any(i.startswith(f"{corpus}:") and "more than 4300 digits" in i for i in issues)
    assert len(ds.train) + len(ds.eval) > 10  # the rest loaded


# --------------------------------------------------------------------------- SEARCHGRPO_DEBUG


@pytest.mark.parametrize("value, traceback", [("0", False), ("off", False), ("", False), ("1", True)])
def test_searchgrpo_debug_zero_means_off(value, traceback, tmp_path):
    code, out = run_cli("config", "--set", "grpo.beta=-1", cwd=tmp_path, env=cli_env(SEARCHGRPO_DEBUG=value))
    assert ("Traceback" in out) is traceback, out
    if not traceback:
        assert code == 2
        assert_one_error_line(out, "grpo.beta = -1")


def test_paths_round_trip_through_the_shown_value(tmp_path: Path):
    """A path with a plain non-ASCII letter still loads as written (only errors escape it)."""
    cfg = load_config(None, [f"data.corpus={tmp_path / 'café.jsonl'}", f"data.traces={tmp_path}"])
    assert cfg.data.corpus.endswith("café.jsonl")
