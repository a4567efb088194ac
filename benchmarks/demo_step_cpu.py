"""Per-phase CPU time of trainer steps on a shared CPU (issue 26.4): where a demo step's time goes.

    python benchmarks/demo_step_cpu.py --steps 3 [--config configs/demo.yaml] [--set key=value ...] [--eval]

Sets up a `Trainer` (eval and checkpoints off), runs --steps + 1 steps (the first warms up) and
prints, per step, the process's CPU seconds and wall seconds, the 1-minute load average, and the
CPU seconds of each of the trainer's own timed phases (`time/generate`, `time/score`, `time/loss`:
the `Stopwatch` phases, measured here with `time.process_time` beside the wall clock); `--eval`
then times one in-training evaluation (`train.eval_states` states). One torch thread by default
(--threads): on a machine shared with other work, the CPU time of one thread is the steady clock.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402
from searchgrpo.train import timing  # noqa: E402
from searchgrpo.train.trainer import Trainer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="key=value (repeatable)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--output-dir", default="/tmp/demo_step_cpu_runs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cpu: dict[str, float] = {}
    wall_phase = timing.Stopwatch.time

    @contextlib.contextmanager
    def both(self: timing.Stopwatch, name: str):  # type: ignore[no-untyped-def]
        start = time.process_time()
        try:
            with wall_phase(self, name):
                yield
        finally:
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - start

    timing.Stopwatch.time = both  # type: ignore[method-assign]
    cfg = load_config(
        args.config,
        [
            "train.eval_every=0",
            "train.save_every=0",
            f"train.output_dir={args.output_dir}",
            f"train.max_steps={args.steps + 1}",
            *args.overrides,
        ],
    )
    quiet_libraries()
    trainer = Trainer(cfg, sink=lambda event: None)
    trainer.setup()
    print(json.dumps({"threads": torch.get_num_threads(), "dtype": str(trainer.policy.dtype)}))
    try:
        for index in range(args.steps + 1):
            cpu.clear()
            c0, w0, load = time.process_time(), time.perf_counter(), os.getloadavg()[0]
            _, outcome = trainer.runner.run(index, next_wanted=False)
            row = {
                "step": index + 1,
                "warm_up": index == 0,
                "cpu_s": time.process_time() - c0,
                "wall_s": time.perf_counter() - w0,
                "load1": load,
                **{f"cpu/{k}": v for k, v in cpu.items()},
                "reward": outcome.metrics.get("reward/mean"),
                "sampled_groups": outcome.metrics.get("dynamic/sampled_groups"),
            }
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        if args.eval:
            c0, w0 = time.process_time(), time.perf_counter()
            metrics = trainer.evaluate()
            print(
                json.dumps(
                    {
                        "eval_states": cfg.train.eval_states,
                        "cpu_s": time.process_time() - c0,
                        "wall_s": time.perf_counter() - w0,
                        **metrics,
                    }
                )
            )
    finally:
        trainer.close()


if __name__ == "__main__":
    main()
