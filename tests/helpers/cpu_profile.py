"""Where the suite's CPU goes: a pytest plugin that records, for every test, the CPU time of the
process that ran it (its threads included: torch's, llama.cpp's) and of the subprocesses it waited
for (`RUSAGE_CHILDREN`: a training CLI, torchrun and its workers), beside its wall time.

    make test-profile            # the full suite as `make test` runs it, then the summary
    python -m pytest -p tests.helpers.cpu_profile --cpu-profile runs/suite-cpu ...
    python -m tests.helpers.cpu_profile runs/suite-cpu [--top 25] [--json out.json]

Each process (every xdist worker) appends one JSON line per test to `<dir>/cpu-<pid>.jsonl`:
`{"test", "file", "self_cpu_s", "children_cpu_s", "wall_s"}`. Wall time beyond CPU time is waiting (a
sleep, a server's reply, a subprocess not yet reaped); a subprocess killed and never waited for
is not counted. The summary gives the totals (CPU in the pytest processes, in the subprocesses
they waited for, the wall time the tests spent waiting), the files by CPU and the single tests by
CPU: on 2 cores the suite's wall time cannot go below its total CPU over 2, whatever the number of
workers. docs/testing.md has the figures this gave."""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest


def cpu_seconds() -> tuple[float, float]:
    """User + system CPU seconds of this process and of its waited-for children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-profile", metavar="DIR", help="write each test's CPU and wall time to DIR")


def pytest_configure(config: pytest.Config) -> None:
    option = config.getoption("--cpu-profile")
    if option:
        folder = Path(option).resolve()  # tests chdir into their own folders
        folder.mkdir(parents=True, exist_ok=True)
        config.pluginmanager.register(CpuRecorder(folder / f"cpu-{os.getpid()}.jsonl"), "cpu-recorder")


class CpuRecorder:
    """Appends one line per test to its file (a worker's own: workers never share one)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        own, children = cpu_seconds()
        start = time.monotonic()
        yield
        own_after, children_after = cpu_seconds()
        row = {
            "test": item.nodeid,
            "file": item.location[0],
            "self_cpu_s": round(own_after - own, 3),
            "children_cpu_s": round(children_after - children, 3),
            "wall_s": round(time.monotonic() - start, 3),
        }
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


def read_rows(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(folder.glob("cpu-*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{folder}: no cpu-*.jsonl records (run pytest with --cpu-profile {folder})")
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals, and per file: tests, CPU in the pytest process, in its subprocesses, wall."""
    files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        f = files[row["file"]]
        f["tests"] += 1
        f["self_cpu_s"] += row["self_cpu_s"]
        f["children_cpu_s"] += row["children_cpu_s"]
        f["wall_s"] += row["wall_s"]
    own = sum(r["self_cpu_s"] for r in rows)
    children = sum(r["children_cpu_s"] for r in rows)
    wall = sum(r["wall_s"] for r in rows)
    waiting = sum(max(0.0, r["wall_s"] - r["self_cpu_s"] - r["children_cpu_s"]) for r in rows)
    return {
        "tests": len(rows),
        "self_cpu_s": round(own, 1),
        "children_cpu_s": round(children, 1),
        "cpu_s": round(own + children, 1),
        "wall_s": round(wall, 1),
        "waiting_s": round(waiting, 1),
        "files": {name: {k: round(v, 1) for k, v in f.items()} for name, f in files.items()},
    }


def _cpu(record: dict[str, Any]) -> float:
    return record["self_cpu_s"] + record["children_cpu_s"]


def _row(r: dict[str, Any]) -> str:
    return f"{_cpu(r):7.1f} {r['self_cpu_s']:7.1f} {r['children_cpu_s']:7.1f} {r['wall_s']:7.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The suite's CPU by file and by test, from --cpu-profile records.")
    p.add_argument("folder", type=Path, help="the --cpu-profile folder")
    p.add_argument("--top", type=int, default=25, help="files and tests listed (default 25)")
    p.add_argument("--json", type=Path, help="also write the summary here")
    args = p.parse_args(argv)
    rows = read_rows(args.folder)
    s = summarise(rows)
    print(
        f"{s['tests']} tests: {s['cpu_s']:.0f} s of CPU ({s['self_cpu_s']:.0f} s in the pytest processes, "
        f"{s['children_cpu_s']:.0f} s in the subprocesses they waited for); the tests' wall time adds up to "
        f"{s['wall_s']:.0f} s, {s['waiting_s']:.0f} s of it waiting. On 2 cores the suite needs at least "
        f"{s['cpu_s'] / 2:.0f} s."
    )
    print(f"\n{'CPU s':>7} {'self':>7} {'subproc':>7} {'wall s':>7} {'tests':>5}  file")
    for name, f in sorted(s["files"].items(), key=lambda kv: -_cpu(kv[1]))[: args.top]:
        print(f"{_row(f)} {f['tests']:5.0f}  {name}")
    print(f"\n{'CPU s':>7} {'self':>7} {'subproc':>7} {'wall s':>7}  test")
    for r in sorted(rows, key=lambda r: -_cpu(r))[: args.top]:
        print(f"{_row(r)}  {r['test']}")
    if args.json:
        args.json.write_text(json.dumps(s, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
