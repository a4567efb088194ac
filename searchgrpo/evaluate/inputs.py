"""What an evaluation compares and on what: the request, the policies, and the states or questions.

Both evaluation modes read the same inputs: the baseline (the base model without adapter) and/or
checkpoints (validated by `train.checkpoints.checkpoint_adapter`), on the run's eval split, a
question set (collected once with the rule-based agents, then cached), or a folder of traces.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from searchgrpo.config import Config
from searchgrpo.data.dataset import Dataset, read_dataset
from searchgrpo.data.traces import SearchState
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.events import EventSink, LogMessage
from searchgrpo.fileio import OutputKind, claim_output, json_head_matches
from searchgrpo.train.checkpoints import checkpoint_adapter

BASELINE = "baseline"
EVAL_REPORT = OutputKind(
    "searchgrpo eval report",
    "--output",
    ours=lambda p: json_head_matches(p, r'^\s*\{\s*"format":\s*"searchgrpo-(eval|episodes)-v\d+"'),
)
"""An eval report: an existing one is replaced, any other file only with --overwrite."""


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate and how: the one request type of `searchgrpo eval` and the console's Eval tab."""

    baseline: bool = True
    """Score the base model without adapter."""
    checkpoints: list[str] = field(default_factory=list)
    """Training checkpoints (`runs/<id>/checkpoints/step-N`) or adapter folders to score."""
    output: str | None = None
    """The JSON report's path (default: {train.output_dir}/evals/eval-<time>.json)."""
    overwrite: bool = False
    """Replace an existing file at `output` that is not an eval report."""
    allow_overlap: bool = False
    """Score a checkpoint even on questions its run trained on (recorded in the report's `held_out`)."""
    num_samples: int = 1
    """1: greedy clues. More: that many samples per state at `temperature` (per-round mode only)."""
    temperature: float = 1.0
    seed: int = 0
    """Seeds sampling and the bootstrap."""
    questions: str | None = None
    """Evaluate on a question set (normalised JSONL) instead: states come from a baseline
    multi-agent pass over it (cached), and its pooled documents form the corpus."""
    traces: str | None = None
    """Evaluate every state of this folder of multi-agent traces (needs `corpus`)."""
    corpus: str | None = None
    limit: int | None = None
    """Score at most this many states (episodes: questions), the first ones in a fixed order."""
    bootstrap: int = 2000
    """Bootstrap resamples for the confidence intervals."""
    episodes: bool = False
    """Play whole episodes of the multi-agent loop instead of scoring single rounds."""
    max_rounds: int | None = None
    """Episodes: rounds per episode (default eval.episode_rounds)."""
    doc_budget: int | None = None
    """Episodes: documents per SEARCH round sent to the checker (default eval.episode_doc_budget)."""

    def validated(self) -> EvalRequest:
        """This request, or one clear line (UserError) naming the option that is out of range."""
        for bad, option, expected in (
            (self.num_samples < 1, f"--samples {self.num_samples}", ">= 1"),
            (self.limit is not None and self.limit < 1, f"--limit {self.limit}", ">= 1 (or leave it out)"),
            (self.seed < 0, f"--seed {self.seed}", ">= 0"),
            (
                not (math.isfinite(self.temperature) and self.temperature > 0),
                f"--temperature {self.temperature}",
                "a finite number > 0",
            ),
            (self.max_rounds is not None and self.max_rounds < 1, f"--max-rounds {self.max_rounds}", ">= 1"),
            (self.doc_budget is not None and self.doc_budget < 1, f"--doc-budget {self.doc_budget}", ">= 1"),
        ):
            if bad:
                raise UserError(f"{option} is out of range: expected {expected}")
        if self.episodes and self.num_samples > 1:
            raise UserError("--episodes plays greedy episodes: leave --samples at 1")
        return self


@dataclass(frozen=True)
class PolicySpec:
    name: str
    checkpoint: str | None
    adapter: Path | None


def policy_specs(request: EvalRequest, cfg: Config) -> list[PolicySpec]:
    """The baseline and each checkpoint, with names that tell them apart."""
    specs = [PolicySpec(BASELINE, None, None)] if request.baseline else []
    names: set[str] = {BASELINE}
    base = None
    for ckpt in request.checkpoints:
        adapter = checkpoint_adapter(ckpt, cfg.model.base)
        if base is None:
            from searchgrpo.policy.model import resolve_base
            from searchgrpo.policy.model_files import adapter_fit

            base = resolve_base(cfg)
        adapter_fit(adapter, base.path)  # before any weight loads, as merge does
        folder = Path(ckpt).resolve()
        name = folder.name if folder.name not in names else f"{folder.parent.parent.name}/{folder.name}"
        names.add(name)
        specs.append(PolicySpec(name, str(ckpt), adapter))
    if not specs:
        raise UserError("nothing to evaluate: give --baseline and/or --checkpoint PATH")
    return specs


def eval_dataset(cfg: Config, request: EvalRequest) -> Dataset:
    """The data to evaluate on: its `eval` states are the held-out ones (the run's eval split, or
    every state of a question set or traces folder)."""
    if request.questions:
        from searchgrpo.episodes.collect import collect_question_set

        paths = collect_question_set(cfg, Path(request.questions))
        ds = read_dataset(cfg.data, paths.traces, paths.corpus, split=False)
        ds.issues.issues[:0] = paths.issues
        return ds
    if request.traces:
        if not request.corpus:
            raise UserError("--traces needs --corpus (the JSONL corpus those traces searched)")
        return read_dataset(cfg.data, Path(request.traces), Path(request.corpus), split=False)
    from searchgrpo.world import load_dataset  # the search stack, only once there is work to do

    ds = load_dataset(cfg)
    if not ds.eval:
        raise UserError("the eval split is empty: raise data.eval_fraction, or give --questions")
    return ds


def eval_states(ds: Dataset, request: EvalRequest) -> list[SearchState]:
    return ds.eval[: request.limit] if request.limit else ds.eval


def report_path(cfg: Config, request: EvalRequest, kind: str = "eval") -> Path:
    """Where the report goes, once `claim_output` says it may be written there (called before any
    scoring: a bad path costs nothing)."""
    if request.output:
        return claim_output(request.output, EVAL_REPORT, overwrite=request.overwrite)
    default = Path(cfg.train.output_dir) / "evals" / (time.strftime(f"{kind}-%Y%m%d-%H%M%S") + ".json")
    return claim_output(default, EVAL_REPORT)


def warn_skipped_inputs(issues: IssueLog, sink: EventSink, shown: int = 20) -> None:
    """Each skipped input as a warning (the first `shown`), then how many were skipped in all."""
    for issue in issues.issues[:shown]:
        sink(LogMessage("warning", f"{'conflict' if issue.conflict else 'skipped'} {issue}"))
    if issues.issues:
        sink(
            LogMessage(
                "warning",
                f"{len(issues)} malformed inputs skipped in all (data.strict / --strict stops at the first instead)",
            )
        )


def cancelled_note(done: int, total: int, unit: str) -> str:
    """What a cancelled eval kept, in words: nothing, since the report is written at the end.

    >>> cancelled_note(40, 222, "states")[:58]
    'eval cancelled after 40 of 222 states: no report written ('
    """
    return (
        f"eval cancelled after {done} of {total} {unit}: no report written "
        "(it is written once every policy is scored; --limit scores fewer)"
    )
