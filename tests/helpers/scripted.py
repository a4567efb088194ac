"""The console tests' scripted trainer and backend, playing deterministic events
(`tests/helpers/scripted_events.py` builds them).

The `ScriptedRunner` plays them as the console's trainer would, honouring pause, stop and save-now
between steps, and optionally waiting for a test to let each step through. A `ScriptedBackend` is
the console's `tui.backend.Backend` for tests: training is a `ScriptedRunner`, eval writes a report
of the real format and merge makes the folders and reports the parity figures the real merge
reports; checkpoints are found on disk as the real backend finds them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from searchgrpo.events import (
    MERGE_STAGES,
    CheckpointSaved,
    EvalProgress,
    EvalReportWritten,
    EvalStarted,
    MergeFinished,
    MergeProgress,
    MergeStarted,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
)
from tests.helpers.scripted_events import T0, run_started, step_events


class ScriptedRunner:
    """Plays scripted steps like the trainer: control is honoured between steps.

    With `gated`, each step waits for `allow()`, so a test decides exactly how far the run gets.
    """

    def __init__(
        self,
        steps: int = 6,
        total: int | None = None,
        k: int = 4,
        gated: bool = False,
        fail_at: int | None = None,
        start_step: int = 0,
    ) -> None:
        self.steps, self.total, self.k = steps, total or steps, k
        self.start_step = start_step
        """A resumed run: it starts after this step (its checkpoint)."""
        self.gate = threading.Semaphore(0) if gated else None
        self.fail_at = fail_at
        self.calls: list[dict[str, Any]] = []
        self.finished = threading.Event()

    def allow(self, steps: int = 1) -> None:
        assert self.gate is not None
        for _ in range(steps):
            self.gate.release()

    def __call__(self, cfg, sink, control, run_dir, resume) -> None:
        self.calls.append({"cfg": cfg, "run_dir": run_dir, "resume": resume})
        self.finished.clear()
        try:
            self._play(sink, control)
        finally:
            self.finished.set()

    def _play(self, sink, control) -> None:
        sink(run_started(self.total, self.start_step))
        step, reason = self.start_step, "completed"
        while step < self.total:
            if control.pause.is_set() and not control.stop.is_set():
                sink(RunPaused(step, T0))
                while control.pause.is_set() and not control.stop.is_set():
                    control.stop.wait(0.01)
                if not control.stop.is_set():
                    sink(RunResumed(step, T0))
            if control.stop.is_set():
                reason = "stopped"
                break
            if self.gate is not None and not self._wait_for_gate(control):
                continue  # a pause or stop came while waiting: handle it at the top
            step += 1
            if step == self.fail_at:  # as the trainer does: report, then raise
                error = RuntimeError(f"CUDA out of memory at step {step} (scripted)")
                sink(RunFailed(step - 1, f"RuntimeError: {error}", "Traceback (scripted)\nRuntimeError", T0))
                raise error
            for event in step_events(step, self.total, self.k):
                sink(event)
            if control.save_now.is_set():
                control.save_now.clear()
                sink(CheckpointSaved(step, f"runs/20260101-000000/checkpoints/step-{step:06d}", T0))
        sink(CheckpointSaved(step, f"runs/20260101-000000/checkpoints/step-{step:06d}", T0))
        sink(RunFinished(step, reason, T0))

    def _wait_for_gate(self, control) -> bool:
        assert self.gate is not None
        while not self.gate.acquire(timeout=0.02):
            if control.stop.is_set() or control.pause.is_set():
                return False
        return True


def eval_report(policies: list[tuple[str, str | None]]) -> dict[str, Any]:
    """A `searchgrpo-eval-v1` report of these (name, checkpoint) policies with made-up numbers."""
    names = [n for n, _ in policies]
    agg = {
        n: {
            "reward_mean": 0.1 * i,
            "important_discovery": 0.2 + 0.1 * i,
            "recall_at_k": 0.3,
            "ndcg_at_k": 0.4,
            "clues_mean": 2.5,
            "docs_mean": 9.0,
            "ci": {"reward_mean": [0.1 * i - 0.05, 0.1 * i + 0.05]},
        }
        for i, n in enumerate(names)
    }
    paired = {
        n: {
            "reward_mean": {"diff": 0.1 * i, "ci": [0.02, 0.2]},
            "important_discovery": {"diff": -0.01, "ci": [-0.1, 0.05]},
            "recall_at_k": {"diff": 0.0, "ci": [-0.1, 0.1]},
            "ndcg_at_k": {"diff": 0.03, "ci": [-0.01, 0.07]},
        }
        for i, n in enumerate(names)
        if n != "baseline" and "baseline" in names
    }
    questions = [
        {
            "question_id": f"q{i:03d}",
            "question": f"Which river flows through city {i}?",
            "states": 2,
            "reward": {n: 0.1 * i + 0.05 * j for j, n in enumerate(names)},
            "recall_at_k": {n: 0.5 for n in names},
        }
        for i in range(3)
    ]
    return {
        "format": "searchgrpo-eval-v1",
        "created": 0,
        "seed": 0,
        "top_k": 5,
        "states": 6,
        "decoding": {"greedy": True, "num_samples": 1, "temperature": 1.0},
        "policies": [{"name": n, "checkpoint": c} for n, c in policies],
        "aggregate": agg,
        "paired": paired,
        "per_question": questions,
        "per_state": [],
    }


class ScriptedBackend:
    """The console's backend with scripted jobs; records every request.

    `eval_error` / `merge_error`, when set, are raised by the next eval / merge. Merge refuses
    existing outputs unless the request says overwrite, as the real one does, and fails the parity
    check of the checkpoints in `parity_fails` (the others are written). With `hold`, eval and
    merge send their first progress and then wait until their stop flag is set (the console's `q`
    cancels them) and end as the real jobs do, with `JobCancelled`; `started` is set once they wait.
    """

    def __init__(self, runner: ScriptedRunner | None = None) -> None:
        from tui.backend import CoreBackend

        self.runner = runner
        self.disk = CoreBackend()
        self.train_requests: list[Any] = []
        self.eval_requests: list[Any] = []
        self.merge_requests: list[Any] = []
        self.eval_error: BaseException | None = None
        self.merge_error: BaseException | None = None
        self.parity_fails: set[str] = set()
        self.hold = False
        self.started = threading.Event()

    def _wait_for_cancel(self, stop, what: str) -> None:
        from searchgrpo.errors import JobCancelled

        if not self.hold:
            return
        self.started.set()
        while not stop.wait(0.01):
            pass
        raise JobCancelled(f"{what} cancelled: nothing written")

    def train(self, cfg, request, sink, control) -> None:
        self.train_requests.append(request)
        if self.runner is None:
            raise RuntimeError("this scripted backend has no runner")
        self.runner(cfg, sink, control, request.run_dir, request.resume)

    def evaluate(self, cfg, request, sink, stop):
        from tui.backend import EvalDone

        self.eval_requests.append(request)
        if self.eval_error is not None:
            raise self.eval_error
        policies = ([("baseline", None)] if request.baseline else []) + [(Path(c).name, c) for c in request.checkpoints]
        sink(EvalStarted([n for n, _ in policies], 6, "evals/report.json", T0))
        sink(EvalProgress(policies[0][0], 1, 6, T0))
        self._wait_for_cancel(stop, "eval")
        for name, _ in policies:
            for done in range(1, 7):
                sink(EvalProgress(name, done, 6, T0))
        path = Path("evals/report.json")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(eval_report(policies)))
        sink(EvalReportWritten(str(path), {}, T0))
        return EvalDone(str(path))

    def merge(self, cfg, request, sink, stop):
        from tui.backend import MergeDone, MergeRefused

        self.merge_requests.append(request)
        if self.merge_error is not None:
            raise self.merge_error
        outputs = [str(Path(request.output_dir) / f"tiny-grpo-step{int(c[-6:])}") for c in request.checkpoints]
        existing = [o for o in outputs if Path(o).exists()]
        if existing and not request.overwrite:
            return MergeRefused(existing)
        sink(MergeStarted(list(request.checkpoints), request.output_dir, T0))
        self._wait_for_cancel(stop, "merge")
        refused = [
            {"checkpoint": c, "output": o, "reason": f"{o}: parity check failed (scripted). Remedy: merge another"}
            for c, o in zip(request.checkpoints, outputs)
            if c in self.parity_fails
        ]
        outputs = [o for c, o in zip(request.checkpoints, outputs) if c not in self.parity_fails]
        for c in request.checkpoints:
            for i, stage in enumerate(MERGE_STAGES):
                sink(MergeProgress(c, stage, i, len(MERGE_STAGES), T0))
            ending = "refused" if c in self.parity_fails else "done"
            sink(MergeProgress(c, ending, len(MERGE_STAGES), len(MERGE_STAGES), T0))
        for o in outputs:
            Path(o).mkdir(parents=True, exist_ok=True)
        parity = [
            {
                "output": o,
                "dtype": request.dtype,
                "compared_with": f"base + adapter in {request.dtype}",
                "max_abs_logprob_delta": 0.0312,
                "mean_abs_logprob_delta": 0.0041,
                "top1_agreement": 0.9922,
                "tokens": 128,
                "near_ties": 1,
                "flips": 0,
            }
            for o in outputs
        ]
        sink(MergeFinished(outputs, parity, refused, time=T0))
        return MergeDone(outputs, refused)

    def audit(self, cfg, request, sink, stop):
        from searchgrpo.events import AuditProgress, AuditStarted

        sink(AuditStarted("gold", "gold checker", request.pairs, "audits/a.json", T0))
        sink(AuditProgress(1, request.pairs, 0.5, T0))
        self._wait_for_cancel(stop, "audit")
        raise RuntimeError("this scripted backend audits only with hold = True")

    def newest_run(self, output_dir):
        return self.disk.newest_run(output_dir)

    def checkpoints(self, run_dir):
        return self.disk.checkpoints(run_dir)
