"""The suite's CPU profiler (`make test-profile`): the plugin records every test of a pytest run,
subprocesses included, and the summary adds them up."""

import json
import subprocess
import sys

from tests.helpers import ROOT
from tests.helpers.cpu_profile import main, summarise

BUSY_TESTS = """
import os, subprocess, sys, time

def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_in_process():
    busy(0.3)

def test_in_a_subprocess():
    code = "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)

def test_waiting_in_another_folder(tmp_path):
    os.chdir(tmp_path)  # not undone: the records still go to the folder given on the command line
    time.sleep(0.3)
"""


def test_the_plugin_records_each_tests_own_and_subprocess_cpu(tmp_path):
    (tmp_path / "test_busy.py").write_text(BUSY_TESTS)
    profile = tmp_path / "profile"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.helpers.cpu_profile"),
            *("--cpu-profile", "profile", str(tmp_path / "test_busy.py")),
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = profile.glob("cpu-*.jsonl")
    rows = {r["test"].rpartition(":")[2]: r for r in map(json.loads, path.read_text().splitlines())}
    assert {r["file"] for r in rows.values()} == {"test_busy.py"}
    assert set(rows) == {"test_in_process", "test_in_a_subprocess", "test_waiting_in_another_folder"}
    # CPU time is counted as it was spent, whatever the machine's speed: at least what each burnt.
    assert rows["test_in_process"]["self_cpu_s"] >= 0.3 and rows["test_in_process"]["children_cpu_s"] == 0
    assert rows["test_in_a_subprocess"]["children_cpu_s"] >= 0.3
    waiting = rows["test_waiting_in_another_folder"]
    assert waiting["wall_s"] >= 0.3 and waiting["children_cpu_s"] == 0


def test_the_summary_adds_up_by_file_and_counts_waiting(tmp_path, capsys):
    rows = [
        {"test": "a.py::t1", "file": "a.py", "self_cpu_s": 2.0, "children_cpu_s": 0.0, "wall_s": 3.0},
        {"test": "a.py::t2", "file": "a.py", "self_cpu_s": 1.0, "children_cpu_s": 4.0, "wall_s": 4.5},
        {"test": "b.py::t", "file": "b.py", "self_cpu_s": 0.5, "children_cpu_s": 0.0, "wall_s": 0.5},
    ]
    s = summarise(rows)
    assert (s["tests"], s["self_cpu_s"], s["children_cpu_s"], s["cpu_s"], s["wall_s"]) == (3, 3.5, 4.0, 7.5, 8.0)
    assert s["waiting_s"] == 1.0  # t1 waited 1 s; t2's subprocess ran beside it, nothing waited
    assert s["files"]["a.py"] == {"tests": 2, "self_cpu_s": 3.0, "children_cpu_s": 4.0, "wall_s": 7.5}
    (tmp_path / "cpu-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(tmp_path), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "3 tests: 8 s of CPU" in out and "needs at least 4 s" in out
    assert json.loads((tmp_path / "s.json").read_text())["cpu_s"] == 7.5
