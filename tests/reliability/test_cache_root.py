"""The cache root is its own key (`paths.cache_root`), read by every module that caches; the old
`model.cache_dir` spelling still moves it, and $SEARCHGRPO_HOME still applies when neither is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchgrpo.config import cache_root, from_dict, load_config


def test_paths_cache_root_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCHGRPO_HOME", str(tmp_path / "env"))
    assert cache_root(load_config(None, [])) == tmp_path / "env"
    cfg = load_config(None, [f"paths.cache_root={tmp_path / 'set'}"])
    assert cache_root(cfg) == tmp_path / "set"


def test_the_old_model_cache_dir_key_is_read_as_paths_cache_root(tmp_path: Path) -> None:
    cfg = from_dict({"model": {"base": "tiny", "cache_dir": str(tmp_path / "old")}})
    assert cfg.paths.cache_root == str(tmp_path / "old")
    assert cache_root(cfg) == tmp_path / "old"
    both = from_dict({"model": {"cache_dir": "old"}, "paths": {"cache_root": "new"}})
    assert both.paths.cache_root == "new"


def test_the_demo_world_and_indexes_go_under_the_configured_root(tmp_path: Path) -> None:
    from searchgrpo.world import demo_dir, load_dataset, make_retriever
    from tests.helpers.tiny import TINY_OVERRIDES

    cfg = load_config(None, [*TINY_OVERRIDES, f"paths.cache_root={tmp_path / 'root'}"])
    assert demo_dir(cfg).is_relative_to(tmp_path / "root")
    ds = load_dataset(cfg)
    make_retriever(cfg, ds)
    assert (tmp_path / "root" / "indexes").is_dir()
    assert (tmp_path / "root" / "demo").is_dir()
