"""Shared fixtures: an isolated cache root, a tiny config, and a small demo world."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from searchgrpo.config import Config, load_config

# One OpenMP thread per process (this one, set before torch is imported, and every subprocess a
# test starts): with one thread per core, a busy neighbour on a small shared machine makes torch's
# threads spin at barriers and a tiny training step 10-50x slower (the suite took 13 minutes
# instead of 4). The tiny models gain nothing from more threads. An explicit setting wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def searchgrpo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache root per test session: the tiny model and demo worlds are built once."""
    home = tmp_path_factory.mktemp("searchgrpo-home")
    os.environ["SEARCHGRPO_HOME"] = str(home)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    return home


TINY_OVERRIDES = (
    "model.base=tiny",
    "model.device=cpu",  # the same numbers on a GPU host; CUDA paths have tests of their own
    "model.dtype=float32",  # and on a CPU where `auto` means bfloat16 (AMX, AVX512-BF16)
    "data.demo.questions=24",
    "data.demo.distractors=40",
    "grpo.num_generations=3",
    "grpo.max_new_tokens=12",
    "grpo.max_prompt_tokens=384",
    "data.max_table_rows=4",
    "train.states_per_step=2",
    "train.micro_batch_size=6",
    "train.lr=1e-2",
    "train.eval_every=0",
    "train.save_every=0",
)


SETS = [arg for o in TINY_OVERRIDES for arg in ("--set", o)]
"""TINY_OVERRIDES as command-line options."""


def searchgrpo(*args: str, cwd: Path, **kw) -> subprocess.Popen:
    """The `searchgrpo` command in a subprocess (this checkout on its path), output merged."""
    return subprocess.Popen(
        [sys.executable, "-m", "searchgrpo", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        **kw,
    )


def tiny_config(tmp_path: Path, *overrides: str) -> Config:
    """The tiny random model on a small demo world, writing runs under tmp_path."""
    return load_config(None, [*TINY_OVERRIDES, f"train.output_dir={tmp_path / 'runs'}", *overrides])


@pytest.fixture
def tiny_cfg(tmp_path: Path) -> Config:
    return tiny_config(tmp_path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` are skipped where CUDA is not available (CI has none)."""
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
