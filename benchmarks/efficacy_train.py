"""efficacy.py's training: a run to its steps or minutes (resumable), or the checkpoint and curve of a run
trained elsewhere, each with its training curve and wall-clock seconds."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from searchgrpo.events import EvalFinished, StepFinished
from searchgrpo.sinks import JsonlSink, fanout
from searchgrpo.terminal import ConsoleSink
from searchgrpo.train.checkpoints import latest_checkpoint
from searchgrpo.train.trainer import Trainer, TrainerControl


def events_curve(run_dir: Path) -> tuple[list[dict[str, float]], float]:
    """The curve of a run's events.jsonl (the last record of a step repeated after a resume wins)
    and its wall-clock seconds."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    points: dict[tuple[str, int], dict[str, float]] = {}
    for e in events:
        if e.get("type") in ("StepFinished", "EvalFinished"):
            points[(e["type"], e["step"])] = {"step": e["step"], **e["metrics"]}
    times = [e["time"] for e in events if "time" in e]
    curve = [points[k] for k in sorted(points, key=lambda k: (k[1], k[0] != "StepFinished"))]
    return curve, (max(times) - min(times)) if times else 0.0


def train(
    cfg: Any, out: Path, minutes: float | None, resume: bool = False
) -> tuple[Path, list[dict[str, float]], float]:
    run_dir = out / "run"
    done = run_dir / "trained.json"
    if resume and done.is_file():  # trained to its end (steps or minutes) before: not again
        ckpt = latest_checkpoint(run_dir)
        assert ckpt is not None
        return ckpt.path, *events_curve(run_dir)
    resume = resume and (run_dir / "config.yaml").is_file()
    control = TrainerControl()
    trainer = Trainer(cfg, control=control, run_dir=run_dir, resume=resume)
    curve: list[dict[str, float]] = []

    def record(event: Any) -> None:
        if isinstance(event, (StepFinished, EvalFinished)):
            curve.append({"step": event.step, **event.metrics})

    jsonl = JsonlSink(trainer.run_dir / "events.jsonl")
    trainer.sink = fanout(ConsoleSink(every=10), jsonl, record)
    timer = threading.Timer(minutes * 60, control.stop.set) if minutes else None  # saves and stops after the step
    started = time.time()
    if timer:
        timer.start()
    try:
        trainer.train()
    finally:
        if timer:
            timer.cancel()
        jsonl.close()
    ckpt = latest_checkpoint(trainer.run_dir)
    assert ckpt is not None
    seconds = time.time() - started
    if resume:
        curve, seconds = events_curve(trainer.run_dir)
    # Ended by its steps or its minutes (a killed run never gets here, and --resume continues it).
    done.write_text(json.dumps({"checkpoint": str(ckpt.path), "seconds": seconds}))
    return ckpt.path, curve, seconds


def trained_elsewhere(run_dir: Path) -> tuple[Path, list[dict[str, float]], float]:
    """(newest checkpoint, curve, training seconds) of a run trained by an earlier --train-only. The
    checkpoint needs only its adapter and trainer_state.json (what eval loads)."""
    found = sorted(p for p in (run_dir / "checkpoints").glob("step-*") if (p / "adapter").is_dir())
    if not found:
        raise SystemExit(f"{run_dir}: no checkpoint with an adapter")
    saved = run_dir / "curve.json"
    if saved.is_file():
        data = json.loads(saved.read_text())
        return found[-1], data["curve"], data.get("train_seconds", 0.0)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    curve = [{"step": e["step"], **e["metrics"]} for e in events if e.get("type") in ("StepFinished", "EvalFinished")]
    times = [e["time"] for e in events if "time" in e]
    return found[-1], curve, (max(times) - min(times)) if times else 0.0
