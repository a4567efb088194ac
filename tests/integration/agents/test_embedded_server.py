"""The embedded llama.cpp server's life cycle: a stop always ends, however soon after start, and
`searchgrpo serve` serves until SIGINT, whatever signal dispositions it inherited."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

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


def test_serve_command_serves_until_interrupted(tmp_path):
    """`searchgrpo serve` answers, then ends with exit 0 on SIGINT, even started with SIGINT ignored
    (as every process started from a shell's background job is: `nohup make test-stress &` ran
    the suite so, and `serve` never ended). The child ignores SIGINT here on purpose, so the test
    does not depend on how the suite itself was started."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "searchgrpo", "serve", "--port", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving SmolLM2-135M-Instruct at http://127.0.0.1:"), line + proc.stdout.read()
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "/models", timeout=CEILING_S) as response:  # closed before the stop
            models = json.loads(response.read())
        assert models["data"][0]["id"] == "SmolLM2-135M-Instruct"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=CEILING_S)  # the hang guard: llama.cpp joins its threads
        assert proc.returncode == 0, out
        assert out.rstrip().endswith("stopping"), out
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve had not ended {CEILING_S:g} s after SIGINT")
    finally:
        if proc.poll() is None:
            proc.kill()
