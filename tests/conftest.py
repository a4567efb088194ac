"""Shared fixtures and hooks: an isolated cache root, a tiny config, the tiers marked by folder.

The tier of a test is its folder: `tests/unit/` is the fast tier (`make test-fast`, with the
package's doctests); every other folder (`integration/`, `reliability/`, `console/`) is marked
`slow` here and runs in the full tier (`make test`). Helpers live in `tests/helpers/`."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from searchgrpo.config import Config
from searchgrpo.trackers import TRACKER_THREAD_PREFIX
from tests.helpers.tiny import tiny_config
from tests.helpers.tiny_gguf import ensure_tiny_gguf

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


TRACKER_THREAD_CEILING_S = 120.0
"""Hang guard for a tracker's abandoned call to end after its test (it ends in seconds)."""


@pytest.fixture(autouse=True)
def no_tracker_thread_outlives_its_test():
    """A tracker call cut off at `train.tracker_timeout_s` goes on in its daemon thread until its
    own retries end. Left running, it ends during a later test of the same worker and changes the
    process's thread and descriptor counts under that test (the soak test failed so once in CI):
    wait for it here, where it started."""
    yield
    for thread in threading.enumerate():
        if thread.name.startswith(TRACKER_THREAD_PREFIX):
            thread.join(TRACKER_THREAD_CEILING_S)
            late = f"thread {thread.name} still running {TRACKER_THREAD_CEILING_S:g} s after its test"
            assert not thread.is_alive(), late


@pytest.fixture
def tiny_cfg(tmp_path: Path) -> Config:
    return tiny_config(tmp_path)


@pytest.fixture(scope="session")
def tiny_gguf(searchgrpo_home: Path) -> Path:
    """A tiny random-weight Llama GGUF (tests/helpers/tiny_gguf.py) for the llama.cpp tests."""
    return ensure_tiny_gguf(searchgrpo_home)


TESTS = Path(__file__).resolve().parent
FAST_TIER = TESTS / "unit"


LONGEST_FILES = (
    "console/test_every_key.py",
    "integration/train/test_distributed_variants.py",
    "reliability/test_signals.py",
    "reliability/test_faults_training.py",
    "console/test_snapshots.py",
    "reliability/test_weights_and_disk.py",
    "integration/train/test_distributed.py",
    "console/test_feedback.py",
    "reliability/test_server_replies.py",
    "integration/commands/test_cli.py",
    "reliability/test_faults_checker.py",
    "reliability/test_environment.py",
)
"""The files that take longest (wall time, `make test-profile`), longest first. They are collected
first, and `make test` keeps that order (`--no-loadscope-reorder`): pytest-xdist hands files to
workers in collection order, so the long ones start first and the short ones fill the gaps at the
end. By default it orders files by test count, which sent these few-test files last and left one
worker running them alone for the last half-minute. A stale list only costs speed."""


def _longest_first(item: pytest.Item) -> int:
    path = Path(item.path)
    if path.is_relative_to(TESTS):
        relative = path.relative_to(TESTS).as_posix()
        if relative in LONGEST_FILES:
            return LONGEST_FILES.index(relative)
    return len(LONGEST_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test under tests/ outside tests/unit/ is `slow` (the full tier). Tests marked `gpu` are
    skipped where CUDA is not available (CI has none). The longest files come first (a stable sort:
    every other test keeps its place)."""
    items.sort(key=_longest_first)
    for item in items:
        path = Path(item.path)
        if path.is_relative_to(TESTS) and not path.is_relative_to(FAST_TIER):
            item.add_marker(pytest.mark.slow)
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
