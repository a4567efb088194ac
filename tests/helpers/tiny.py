"""The tiny random model on a small demo world, as config overrides, and the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from searchgrpo.config import Config, load_config
from tests.helpers import ROOT

TINY_MODEL = (
    "model.base=tiny",
    "model.device=cpu",  # the same numbers on a GPU host; CUDA paths have tests of their own
    "model.dtype=float32",  # and on a CPU where `auto` means bfloat16 (AMX, AVX512-BF16)
)
"""The tiny random model in float32 on the CPU, whatever the machine: the overrides every test that
loads it starts from (exact-equality tests fail in bfloat16)."""

TINY_OVERRIDES = (
    *TINY_MODEL,
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
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        **kw,
    )


def tiny_config(tmp_path: Path, *overrides: str) -> Config:
    """The tiny random model on a small demo world, writing runs under tmp_path."""
    return load_config(None, [*TINY_OVERRIDES, f"train.output_dir={tmp_path / 'runs'}", *overrides])
