"""Config loading: defaults, the shipped file, overrides and one-line errors."""

import dataclasses

import pytest

from searchgrpo.config import Config, ConfigError, describe, field_docs, load_config
from tests.helpers import ROOT


def test_shipped_config_is_the_default_run():
    assert load_config(ROOT / "config.yaml") == Config()


def test_the_demo_config_is_the_demo_world_made_cheaper():
    """configs/demo.yaml (`make demo`): the default model on the demo world, with fewer tokens to
    sample and to train on per step, one group of as many samples as the default's step, no penalty
    for cut completions, a finite run and an eval curve that starts at step 0."""
    demo, default = load_config(ROOT / "configs" / "demo.yaml"), Config()
    assert demo.data.traces is None and demo.data.corpus is None and demo.model == default.model
    assert demo.grpo.max_new_tokens < default.grpo.max_new_tokens
    assert demo.data.max_table_rows < default.data.max_table_rows
    assert demo.grpo.beta == 0.0 and demo.train.max_steps and demo.train.eval_at_start and demo.train.eval_every
    # One larger group a step, with as many samples a step as the default's.
    assert demo.train.states_per_step == 1
    assert demo.grpo.num_generations == default.grpo.num_generations * default.train.states_per_step
    # The one reward change: no penalty for the cut that 32 tokens makes of most completions.
    assert demo.reward.cut_clue == 0.0 and default.reward.cut_clue < 0
    assert dataclasses.replace(demo.reward, cut_clue=default.reward.cut_clue) == default.reward
    assert "--config configs/demo.yaml" in (ROOT / "Makefile").read_text(encoding="utf-8")


def test_every_field_is_documented():
    def walk(cls):
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            assert docs.get(f.name), f"{cls.__name__}.{f.name} has no docstring"
            if dataclasses.is_dataclass(f.type) or (isinstance(f.type, str) and f.type.endswith("Config")):
                walk(type(getattr(cls(), f.name)))

    walk(Config)
    assert all(doc for _, _, doc in describe(Config()))


def test_overrides_are_typed():
    cfg = load_config(
        None,
        [
            "grpo.beta=0",
            "lora.target_modules=[q_proj, v_proj]",
            "train.run_name=abc",
            "grpo.epsilon_high=0.28",
            "data.demo.questions=7",
        ],
    )
    assert cfg.grpo.beta == 0.0 and isinstance(cfg.grpo.beta, float)
    assert cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.train.run_name == "abc"
    assert cfg.grpo.epsilon_high == 0.28
    assert cfg.data.demo.questions == 7


@pytest.mark.parametrize(
    "override, words",
    [
        ("grpo.kk=1", ["unknown key 'grpo.kk'", "num_generations"]),
        ("nosection.x=1", ["unknown key 'nosection'"]),
        ("grpo.num_generations=1", ["grpo.num_generations = 1", "out of range", ">= 2"]),
        ("grpo.epsilon=0", ["grpo.epsilon", "> 0"]),
        ("train.lr=-1e-5", ["train.lr", "> 0"]),
        ("train.lr=fast", ["train.lr = 'fast'", "a number"]),
        ("grpo.loss_type=ppo", ["grpo.loss_type", "'grpo', 'dr_grpo', 'dapo'"]),
        ("model.load_in_4bit=yes please", ["model.load_in_4bit", "true or false"]),
        ("train.epochs=1.5", ["train.epochs", "an integer"]),
        ("env.min_clues=9", ["env.min_clues = 9 is above env.max_clues"]),
        ("model.device=tpu", ["model.device", "cuda:N"]),
        ("grpo", ["expected section.key=value"]),
    ],
)
def test_bad_values_fail_in_one_line_naming_the_key(override, words):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    message = str(info.value)
    assert "\n" not in message
    for w in words:
        assert w in message


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(scalar)
    section = tmp_path / "section.yaml"
    section.write_text("grpo: 3")
    with pytest.raises(ConfigError, match=r"section.yaml: grpo must be a mapping"):
        load_config(section)


def test_file_errors_name_the_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("train:\n  lr: 0\n")
    with pytest.raises(ConfigError, match=r"c.yaml: train.lr = 0"):
        load_config(f)


def test_replace_keeps_validation():
    cfg = Config().replace(**{"grpo.beta": 0.0})
    assert cfg.grpo.beta == 0.0
    with pytest.raises(ConfigError):
        Config().replace(**{"grpo.beta": -1.0})


def test_the_old_name_of_data_traces_is_still_read():
    cfg = load_config(None, ["data.checkpoints=/data/traces", "data.corpus=/data/corpus.jsonl"])
    assert cfg.data.traces == "/data/traces"
