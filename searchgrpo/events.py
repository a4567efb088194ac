"""Typed events: what the core tells the outside world while it works.

Events are frozen dataclasses of plain data (str, int, float, bool, lists and dicts of those):
no tensors, so they cross threads and processes safely and serialise to one JSON line each.
Train, eval and merge all publish through an `EventSink`, a plain callable. The console (`tui/`)
and `events.jsonl` readers rebuild them with `event_from_dict`; unknown fields are ignored, so an
older console can follow a newer run.
"""

from __future__ import annotations

import dataclasses
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class RunStarted:
    """Training began (or resumed)."""

    run_id: str
    run_dir: str
    base_model: str
    device: str
    total_steps: int
    steps_per_epoch: int
    epochs: int
    num_train_states: int
    num_eval_states: int
    start_step: int = 0
    """0 for a new run; the checkpoint's step when resuming."""
    config: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class DocView:
    """A retrieved document as the console shows it."""

    docid: str
    title: str
    snippet: str
    label: str
    """IMPORTANT, RELEVANT or IRRELEVANT; empty where the group was never judged (lazy judging)."""
    reason: str
    new: bool
    clue_index: int
    rank: int
    probs: list[float] | None = None
    """The checker's probabilities of IMPORTANT, RELEVANT and IRRELEVANT, where it gives them."""


@dataclass(frozen=True)
class SampleView:
    """One of the K samples of a group."""

    index: int
    completion: str
    clues: list[str]
    reward: float
    advantage: float
    components: dict[str, float]
    """Weighted reward components, by name."""
    counts: dict[str, float]
    """Raw component counts, by name."""
    docs: list[DocView]
    unparsable: bool = False
    completion_tokens: int = 0
    truncated: bool = False
    """The completion hit the token limit: its last clue is cut."""
    invented: list[str] = field(default_factory=list)
    """Numbers in the clues found nowhere in the state or question (invented facts)."""
    clue_marginals: list[float] = field(default_factory=list)
    """Each clue's leave-one-out marginal value: the set's finds minus its finds without the clue."""
    clue_shares: list[float] = field(default_factory=list)
    """Each clue's share of the set's credit (`searchgrpo.env.clue_credit`)."""
    episode_return: float | None = None
    """Episode credit: the sample's return (its reward plus `continuation`); None under round credit."""
    continuation: float | None = None
    """Episode credit: the discounted value of the rounds played on after the sample's."""


@dataclass(frozen=True)
class GroupScored:
    """The K samples of one state were scored."""

    step: int
    epoch: int
    state_id: str
    question: str
    round: int
    samples: list[SampleView]
    reward_mean: float
    reward_std: float
    zero_std: bool
    """All K rewards were equal: no learning signal from this group."""
    original_clues: list[str] = field(default_factory=list)
    in_batch: bool = True
    """Trained on; False when dynamic sampling replaced this group (zero reward variance, or with
    `grpo.dynamic_filter: finds` equal finds) by another."""
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepFinished:
    """An optimiser step ended. Metric keys are namespaced: reward/mean, loss/policy, ..."""

    step: int
    epoch: int
    total_steps: int
    metrics: dict[str, float]
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class EvalFinished:
    """An evaluation pass over the eval split ended."""

    step: int
    metrics: dict[str, float]
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class TrainEvalProgress:
    """The in-training evaluation after step `step` has scored `done` of `total` states (this
    process's share of the eval split)."""

    step: int
    done: int
    total: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class CheckpointSaved:
    """A complete checkpoint was written."""

    step: int
    path: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunPaused:
    """Training is paused (between steps) until resumed."""

    step: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunResumed:
    """A paused run continues."""

    step: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFinished:
    """Training ended without error: `completed` all steps, or `stopped` on request."""

    step: int
    reason: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFailed:
    """Training ended with an error."""

    step: int
    error: str
    traceback: str = ""
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class LogMessage:
    """A line for the log pane: data issues, warnings, notes."""

    level: str
    text: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class EvalStarted:
    """`eval` began: the policies compared and how many units each is scored on (states; for whole
    episodes, question-rounds: questions x the round limit, `episode_eval.rounds_played`)."""

    policies: list[str]
    states: int
    output: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class EvalProgress:
    """`eval` scored `done` of `total` units (see EvalStarted) for one policy."""

    policy: str
    done: int
    total: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class EvalReportWritten:
    """`eval` finished and wrote its JSON report; `summary` holds each policy's aggregate metrics."""

    path: str
    summary: dict[str, dict[str, float]]
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class MergeStarted:
    """`merge` began for these checkpoints."""

    checkpoints: list[str]
    output_dir: str
    time: float = field(default_factory=_now)


MERGE_STAGES = ("load", "reference", "merge", "save", "parity")
"""The stages of one checkpoint's merge, in order; `MergeProgress` then says `done` or `refused`."""


@dataclass(frozen=True)
class MergeProgress:
    """A merge stage of one checkpoint began (`MERGE_STAGES`; `done` of `total` stages finished
    before it), or the checkpoint ended: stage `done` (its folder written) or `refused` (parity)."""

    checkpoint: str
    stage: str
    done: int
    total: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class MergeFinished:
    """`merge` wrote these model folders; `parity` holds each one's parity-check figures, and
    `refused` each merge that failed its parity check (checkpoint, output, reason with its remedy)."""

    outputs: list[str]
    parity: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class AuditStarted:
    """`audit-checker` began: the checker audited and how many (context, document) pairs it labels."""

    backend: str
    checker: str
    pairs: int
    output: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class AuditProgress:
    """`audit-checker` has `done` of `total` verdicts, after `seconds` inside the checker."""

    done: int
    total: int
    seconds: float = 0.0
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class AuditReportWritten:
    """`audit-checker` wrote its JSON report; `summary` holds its headline figures."""

    path: str
    summary: dict[str, float]
    time: float = field(default_factory=_now)


@dataclass(frozen=True)
class JobFailed:
    """An `eval`, `merge` or `audit` job ended with an error."""

    job: str
    error: str
    traceback: str = ""
    time: float = field(default_factory=_now)


Event = (
    RunStarted
    | GroupScored
    | StepFinished
    | EvalFinished
    | TrainEvalProgress
    | CheckpointSaved
    | RunPaused
    | RunResumed
    | RunFinished
    | RunFailed
    | LogMessage
    | EvalStarted
    | EvalProgress
    | EvalReportWritten
    | MergeStarted
    | MergeProgress
    | MergeFinished
    | AuditStarted
    | AuditProgress
    | AuditReportWritten
    | JobFailed
)
EventSink = Callable[[Any], None]
"""Receives events; must not raise. Called from the thread that runs the work."""

EVENT_TYPES: dict[str, type] = {cls.__name__: cls for cls in typing.get_args(Event)}


def event_to_dict(event: Any) -> dict[str, Any]:
    return {"type": type(event).__name__, **dataclasses.asdict(event)}


def _build(tp: Any, value: Any) -> Any:
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _build(hints[k], v) for k, v in value.items() if k in names})
    if typing.get_origin(tp) is list and isinstance(value, list):
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    return value


def event_from_dict(data: dict[str, Any]) -> Any:
    """Rebuild an event from `event_to_dict` output; raises ValueError for an unknown type."""
    cls = EVENT_TYPES.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    return _build(cls, {k: v for k, v in data.items() if k != "type"})
