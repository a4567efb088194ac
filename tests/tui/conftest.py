"""Console test fixtures: a config, apps over scripted runners, fake eval/merge modules, and
helpers to wait for the app without timing assertions."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any, Callable

import pytest
from textual.worker import WorkerFailed

from searchgrpo.config import load_config
from searchgrpo.events import EvalProgress, EvalReportWritten, EvalStarted, MergeFinished, MergeProgress, MergeStarted
from tests.conftest import TINY_OVERRIDES
from tui.app import ConsoleApp

SIZE = (120, 40)


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    """The tiny config with runs under ./runs of a fresh working folder (paths shown stay fixed)."""
    monkeypatch.chdir(tmp_path)
    return load_config(None, [*TINY_OVERRIDES, "train.output_dir=runs"])


def make_app(cfg, runner=None, **kwargs: Any) -> ConsoleApp:
    if runner is not None:
        kwargs["runner"] = runner
    return ConsoleApp(cfg, "built-in defaults", **kwargs)


async def until(pilot, condition: Callable[[], bool], what: str = "condition", turns: int = 1500) -> None:
    """Let the app run until `condition` holds; fail after `turns` turns of the event loop."""
    for _ in range(turns):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"never reached: {what}")


async def settle(pilot) -> None:
    """Wait for every worker (a failed one included), then fold in all events and redraw everything."""
    try:
        await pilot.app.workers.wait_for_complete()
    except WorkerFailed:
        pass
    await pilot.pause()
    pilot.app.redraw()
    await pilot.pause()


def make_checkpoint(run_dir: Path, step: int) -> Path:
    """A folder that `list_checkpoints` accepts as a complete checkpoint."""
    path = run_dir / "checkpoints" / f"step-{step:06d}"
    (path / "adapter").mkdir(parents=True)
    for name in ("adapter/adapter_config.json", "adapter/adapter_model.safetensors", "optimizer.pt",
                 "scheduler.pt", "rng.safetensors"):
        (path / name).write_text("{}")
    (path / "trainer_state.json").write_text(json.dumps({"step": step}))
    return path


def eval_report(policies: list[tuple[str, str | None]]) -> dict[str, Any]:
    names = [n for n, _ in policies]
    agg = {n: {"reward_mean": 0.1 * i, "important_discovery": 0.2 + 0.1 * i, "recall_at_k": 0.3, "ndcg_at_k": 0.4,
               "clues_mean": 2.5, "docs_mean": 9.0, "ci": {"reward_mean": [0.1 * i - 0.05, 0.1 * i + 0.05]}}
           for i, n in enumerate(names)}
    paired = {n: {"reward_mean": {"diff": 0.1 * i, "ci": [0.02, 0.2]}, "important_discovery": {"diff": -0.01, "ci": [-0.1, 0.05]},
                  "recall_at_k": {"diff": 0.0, "ci": [-0.1, 0.1]}, "ndcg_at_k": {"diff": 0.03, "ci": [-0.01, 0.07]}}
              for i, n in enumerate(names) if n != "baseline" and "baseline" in names}
    questions = [{"question_id": f"q{i:03d}", "question": f"Which river flows through city {i}?", "states": 2,
                  "reward": {n: 0.1 * i + 0.05 * j for j, n in enumerate(names)}, "recall_at_k": {n: 0.5 for n in names}}
                 for i in range(3)]
    return {"format": "searchgrpo-eval-v1", "created": 0, "seed": 0, "top_k": 5, "states": 6,
            "decoding": {"greedy": True, "num_samples": 1, "temperature": 1.0},
            "policies": [{"name": n, "checkpoint": c} for n, c in policies], "aggregate": agg, "paired": paired,
            "per_question": questions, "per_state": []}


@pytest.fixture
def fake_eval(monkeypatch):
    """A stand-in `searchgrpo.evaluate.round_eval` with the contract's names; records each request."""
    module = types.ModuleType("searchgrpo.evaluate.round_eval")
    module.requests = []
    module.error = None

    class EvalRequest:
        def __init__(self, baseline=True, checkpoints=(), output=None, num_samples=1, temperature=1.0, seed=0,
                     questions=None, limit=None):
            self.baseline, self.checkpoints, self.output = baseline, list(checkpoints), output
            self.num_samples, self.temperature, self.seed, self.questions, self.limit = (
                num_samples, temperature, seed, questions, limit)

    def run_eval(cfg, request, sink, stop=None):
        module.requests.append(request)
        if module.error is not None:
            raise module.error
        policies = ([("baseline", None)] if request.baseline else []) + [(Path(c).name, c) for c in request.checkpoints]
        sink(EvalStarted([n for n, _ in policies], 6, "evals/report.json", 0.0))
        for name, _ in policies:
            for done in range(1, 7):
                sink(EvalProgress(name, done, 6, 0.0))
        path = Path("evals/report.json")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(eval_report(policies)))
        sink(EvalReportWritten(str(path), {}, 0.0))
        return path

    module.EvalRequest, module.run_eval = EvalRequest, run_eval
    monkeypatch.setitem(sys.modules, "searchgrpo.evaluate.round_eval", module)
    return module


@pytest.fixture
def fake_merge(monkeypatch):
    """A stand-in `searchgrpo.export.merge` that refuses to overwrite existing outputs, as the real one does."""
    from searchgrpo.errors import UserError

    module = types.ModuleType("searchgrpo.export.merge")
    module.requests = []

    class OutputExists(UserError):
        def __init__(self, paths):
            self.paths = list(paths)
            super().__init__(f"{paths[0]} already exists")

    class MergeRequest:
        def __init__(self, checkpoints=(), run_dir=None, output_dir="merged", overwrite=False, device="cpu"):
            self.checkpoints, self.run_dir, self.output_dir = list(checkpoints), run_dir, output_dir
            self.overwrite, self.device = overwrite, device

    def run_merge(cfg, request, sink, stop=None):
        module.requests.append(request)
        outputs = [str(Path(request.output_dir) / f"tiny-grpo-step{int(c[-6:])}") for c in request.checkpoints]
        existing = [o for o in outputs if Path(o).exists()]
        if existing and not request.overwrite:
            raise OutputExists(existing)
        sink(MergeStarted(list(request.checkpoints), request.output_dir, 0.0))
        for c in request.checkpoints:
            for stage in ("load", "merge", "save", "parity"):
                sink(MergeProgress(c, stage, 1, 1, 0.0))
        for o in outputs:
            Path(o).mkdir(parents=True, exist_ok=True)
        sink(MergeFinished(outputs, [{"max_abs_logp_delta": 0.0012, "greedy_match": True} for _ in outputs], 0.0))
        return [Path(o) for o in outputs]

    module.OutputExists, module.MergeRequest, module.run_merge = OutputExists, MergeRequest, run_merge
    monkeypatch.setitem(sys.modules, "searchgrpo.export.merge", module)
    return module
