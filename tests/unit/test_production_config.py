"""The shipped production config (`configs/qwen3-8b.yaml`): every key valid, every production value
that config.yaml's comments name set to that value, and the README's recipe using the file."""

from __future__ import annotations

import re

from searchgrpo.config import Config, load_config
from searchgrpo.train.run_history import flatten
from searchgrpo.yaml_safe import safe_yaml
from tests.helpers import ROOT

PRODUCTION = ROOT / "configs" / "qwen3-8b.yaml"
PRODUCTION_COMMENT = re.compile(r"^\s+(\w+):.*#.*\bproduction: (\S+)")


def production_comments() -> dict[str, object]:
    """{dotted key: value} of every `# production: VALUE` comment in config.yaml."""
    out, section = {}, ""
    for line in (ROOT / "config.yaml").read_text(encoding="utf-8").splitlines():
        top = re.match(r"^(\w+):", line)
        if top:
            section = top.group(1)
        found = PRODUCTION_COMMENT.match(line)
        if found:
            out[f"{section}.{found.group(1)}"] = safe_yaml(found.group(2))
    return out


def test_the_production_config_loads_and_every_key_is_a_real_one():
    cfg = load_config(PRODUCTION)  # an unknown key, a wrong type or a value out of range would raise
    written = flatten(safe_yaml(PRODUCTION.read_text(encoding="utf-8")))
    resolved = flatten(cfg.to_dict())
    assert set(written) <= set(resolved)
    for key, value in written.items():
        assert resolved[key] == value or (isinstance(value, int) and resolved[key] == float(value)), key
    defaults = flatten(Config().to_dict())
    assert {k for k in written if written[k] != defaults[k]} >= {"model.base", "checker.backend", "data.traces"}


def test_it_holds_every_production_value_config_yaml_names():
    comments = production_comments()
    assert len(comments) >= 14  # the recipe's former --set flags, and dynamic_filter
    resolved = flatten(load_config(PRODUCTION).to_dict())
    for key, value in comments.items():
        assert resolved[key] == value, (key, resolved[key], value)


def test_the_readme_recipe_trains_with_the_file_not_with_flags():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Production", 1)[1].split("\n## ", 1)[0]
    commands = " ".join(section.split("```bash", 1)[1].split("```", 1)[0].split("\\\n"))
    train = next(line for line in commands.splitlines() if "searchgrpo train" in line)
    assert "--config configs/qwen3-8b.yaml" in train and "--set" not in train
