"""Benchmark: how long `q` takes to end the console while a real job runs (issue 26: "q during
any job exits within 5 s").

    python benchmarks/console_quit.py --run-dir runs/<id> --job merge    # SmolLM2 merge in bfloat16
    python benchmarks/console_quit.py --run-dir runs/<id> --job eval

A child process opens the console headless on the run (its config.yaml, the real core), starts the
job on the run's newest checkpoint from its tab, waits until the job reports progress (merge: the
parity probe has begun; eval: the first policy is being scored), then presses `q` and answers
`y`. It writes the time of `y` to a file; the parent takes the time the child process ended. The
difference is printed with how the job ended (cancelled through its flag, or left behind by
`let_go` after its grace). Results: benchmarks/results/console_quit.txt.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from searchgrpo.config import load_config
from tests.helpers.console import show_tab, until
from tui.app import ConsoleApp
from tui.launch import run_console

run = Path({run!r})
cfg = load_config(run / "config.yaml")
app = ConsoleApp(cfg, str(run / "config.yaml"), run_dir=run)
job = {job!r}


async def press(pilot):
    if job == "merge":
        await show_tab(pilot, "3")
        boxes = app.query_one("#merge-checkpoints")
        boxes.select(boxes.get_option_at_index(0).value)
        app.query_one("#merge-output").value = {out!r}
        await pilot.click("#merge-run")
        await until(pilot, lambda: any(s in ("reference", "merge", "save", "parity")
                                       for s in app.model.merge.stages.values()), "the merge's reference", 10**6)
    else:
        await show_tab(pilot, "2")
        await pilot.click("#eval-run")
        await until(pilot, lambda: bool(app.model.eval.progress), "the eval's first batch", 10**6)
    await pilot.press("q")
    await until(pilot, lambda: type(app.screen).__name__ == "ChoiceScreen", "the question", 10**6)
    Path({stamp!r}).write_text(repr(time.time()))
    await pilot.press("y")


code = run_console(app, headless=True, size=(120, 40), auto_pilot=press)
print("job ended cooperatively; run_console returned", code, flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--job", choices=["merge", "eval"], default="merge")
    args = parser.parse_args()
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"console-quit-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    stamp = scratch / "y.txt"
    code = CHILD.format(
        root=str(ROOT), run=str(args.run_dir.resolve()), job=args.job, out=str(scratch / "merged"), stamp=str(stamp)
    )
    began = time.time()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=scratch)
    ended = time.time()
    pressed = float(stamp.read_text()) if stamp.is_file() else float("nan")
    print(f"job {args.job}: exit status {proc.returncode}; y pressed {pressed - began:.1f}s after start;")
    print(f"process ended {ended - pressed:.2f}s after y")
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    print("last lines:", *tail, sep="\n  ")


if __name__ == "__main__":
    main()
