"""The embedded llama.cpp server's own life cycle: a stop always ends, however soon after start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.helpers.waiting import CEILING_S

START_THEN_STOP = """
from searchgrpo.agents.server import EmbeddedServer
from searchgrpo.embedded import embedded_gguf_path
for i in range(5):
    EmbeddedServer(embedded_gguf_path(), parallel=1, threads=1).start().stop()
    print("stopped", i, flush=True)
"""


def test_a_server_stopped_as_soon_as_it_started_stops():
    """`start()` returns once llama.cpp's task loop runs, so a `stop()` right after it ends.

    Before, a stop that came before the loop's thread had started its loop was lost, and the stop
    joined that thread for ever: `searchgrpo serve` never exited after a Ctrl-C (seen beside two
    busy processes; without `start()`'s wait, a bare xllamacpp.Server deleted at once hung within
    a few tries even on an idle machine). In a subprocess, so a hang fails at the hang guard
    instead of hanging the test's worker."""
    proc = subprocess.Popen(
        [sys.executable, "-c", START_THEN_STOP],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        out, _ = proc.communicate(timeout=CEILING_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"a stop never ended within the {CEILING_S:g} s hang guard:\n{proc.communicate()[0]}")
    assert proc.returncode == 0, out
    assert [line for line in out.splitlines() if line.startswith("stopped")] == [f"stopped {i}" for i in range(5)]
