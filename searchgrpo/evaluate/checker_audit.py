"""`searchgrpo audit-checker`: how far the configured checker agrees with gold, how fast it is, and
what it over-rates.

The pairs (`audit_pairs.py`) are labelled by the checker `checker.backend` names (gold, llm,
simulated, or any other backend `world.make_checker` builds), in batches of `BATCH` pairs of
consecutive contexts, with an `AuditProgress` event after each. The speed is the time spent inside
the checker's `check` (not its start-up: a server's launch or a model's load), over the verdicts
it gave; a verdict cache answering some of them is reported beside it. The JSON report
(`REPORT_FORMAT`) holds the figures of `audit_metrics.py`, the speed, and every pair with its
verdict; a PNG of the confusion matrix, the bias probes and (when there are probabilities) the
reliability diagram is written beside it unless `plot` is off.

A report path that exists is replaced only when it holds an earlier audit report, or with
`overwrite`; a folder, a link or anything but a regular file is never written over. Both are
checked before any work.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.agents.checker import DocumentChecker, Verdict
from searchgrpo.config import Config
from searchgrpo.errors import UserError, check_cancel
from searchgrpo.evaluate.audit_metrics import audit_figures, verdict_probs
from searchgrpo.evaluate.audit_pairs import AuditPair, load_audit_data, sample_pairs, strata_counts
from searchgrpo.events import AuditProgress, AuditReportWritten, AuditStarted, EventSink
from searchgrpo.fileio import OutputKind, atomic_write_json, claim_output, json_safe

REPORT_FORMAT = "searchgrpo-checker-audit-v1"
BATCH = 32
"""Pairs per `check` call (and per progress event)."""


@dataclass(frozen=True)
class AuditRequest:
    """What to audit on, how many pairs, and where the report goes."""

    questions: str | None = None
    """A question set with gold evidence (normalised JSONL, as `collect --questions` reads)."""
    traces: str | None = None
    """Or a traces folder whose runs' meta.json list gold_docids (needs `corpus`)."""
    corpus: str | None = None
    pairs: int = 500
    """(context, document) pairs to label."""
    seed: int = 0
    """Seeds the sample and the bootstrap."""
    output: str | None = None
    """The JSON report (default: {train.output_dir}/audits/audit-<time>.json)."""
    overwrite: bool = False
    """Replace an existing file at `output` that is not an audit report."""
    plot: bool = True
    """Write the PNG beside the report (needs matplotlib: the `bench` extra)."""
    bootstrap: int = 2000

    def checked(self) -> AuditRequest:
        if self.pairs < 1:
            raise UserError(f"--pairs {self.pairs} is out of range: expected >= 1")
        if self.seed < 0:
            raise UserError(f"--seed {self.seed} is out of range: expected >= 0")
        if self.traces and not self.corpus:
            raise UserError("--traces needs --corpus (the JSONL corpus those traces searched)")
        if self.questions and self.traces:
            raise UserError("--questions and --traces are exclusive: audit on one of them")
        return self


def report_path(cfg: Config, request: AuditRequest) -> Path:
    if request.output:
        return Path(request.output)
    return Path(cfg.train.output_dir) / "audits" / (time.strftime("audit-%Y%m%d-%H%M%S") + ".json")


def is_audit_report(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and str(data.get("format", "")).startswith("searchgrpo-checker-audit-")


def plot_path(report: Path) -> Path:
    return report.with_suffix(".png")


AUDIT_REPORT = OutputKind("checker audit report", "--output", ours=is_audit_report)
"""An audit report: an earlier one is replaced, any other file only with --overwrite."""
AUDIT_PLOT = OutputKind("checker audit plot", "--output's plot", ours=lambda p: is_audit_report(p.with_suffix(".json")))
"""The PNG beside an audit report: the plot of an earlier audit report is that audit's, so ours."""


def claim_report_path(path: Path, overwrite: bool, plot: bool = True) -> Path:
    """`path` once a report (and its plot) may be written there (`fileio.claim_output`); else one
    line with the fix."""
    claim_output(path, AUDIT_REPORT, overwrite=overwrite)
    if plot:
        claim_output(plot_path(path), AUDIT_PLOT, overwrite=overwrite)
    return path


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("the audit plot needs matplotlib: pip install 'searchgrpo[bench]', or pass --no-plot") from None


def label_pairs(
    checker: DocumentChecker, pairs: list[AuditPair], sink: EventSink, stop: threading.Event | None
) -> tuple[list[Verdict], float, float]:
    """The checker's verdicts, the seconds spent in `check`, and those of the first batch."""
    verdicts: list[Verdict] = []
    spent = first = 0.0
    for start in range(0, len(pairs), BATCH):
        check_cancel(stop, f"audit cancelled after {len(verdicts)} of {len(pairs)} verdicts: no report written")
        batch = [p.request for p in pairs[start : start + BATCH]]
        began = time.perf_counter()
        got = checker.check(batch)
        took = time.perf_counter() - began
        if len(got) != len(batch):
            raise RuntimeError(f"the {checker.name} checker answered {len(got)} verdicts for {len(batch)} documents")
        verdicts.extend(got)
        spent += took
        first = first or took
        sink(AuditProgress(len(verdicts), len(pairs), spent))
    return verdicts, spent, first


def _stats(checker: DocumentChecker) -> dict[str, float]:
    return dict(checker.stats() or {})


def run_audit(
    cfg: Config, request: AuditRequest, sink: EventSink | None = None, stop: threading.Event | None = None
) -> Path:
    """Sample, label and measure; write the report (and the plot); returns the report's path."""
    from searchgrpo.world import make_checker, make_retriever

    sink = sink or (lambda e: None)
    request = request.checked()
    output = claim_report_path(report_path(cfg, request), request.overwrite, request.plot)
    if request.plot:
        require_matplotlib()
    data = load_audit_data(cfg, request.questions, request.traces, request.corpus)
    pairs = sample_pairs(data, make_retriever(cfg, data.dataset), request.pairs, request.seed)
    checker = make_checker(cfg, data.dataset)
    try:
        described = checker.describe()
        sink(AuditStarted(checker.name, described, len(pairs), str(output)))
        before = _stats(checker)
        verdicts, spent, first = label_pairs(checker, pairs, sink, stop)
        after = _stats(checker)
    finally:
        checker.close()
    report = build_report(cfg, request, data.source, pairs, verdicts, described, checker.name)
    report["speed"] = speed(len(verdicts), spent, first, before, after)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(output, json_safe(report))
    if request.plot:
        from searchgrpo.evaluate.audit_report import load_audit_report, plot_audit

        plot_audit(load_audit_report(output), plot_path(output))
    sink(AuditReportWritten(str(output), summary(report)))
    return output


def speed(verdicts: int, spent: float, first: float, before: dict, after: dict) -> dict[str, Any]:
    counters = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    return {
        "verdicts": verdicts,
        "seconds": spent,
        "seconds_per_verdict": spent / verdicts if verdicts else math.nan,
        "verdicts_per_second": verdicts / spent if spent > 0 else math.nan,
        "first_batch_seconds": first,
        "batch": BATCH,
        "checker_counters": counters,
        "cache_hits": counters.get("cache_hits", 0.0),
    }


def summary(report: dict[str, Any]) -> dict[str, float]:
    """The headline numbers an event carries (agreement, kappa, IMPORTANT precision/recall, rate)."""
    three, imp = report["three_label"], report["important_vs_rest"]
    return {
        "agreement": three["accuracy"]["value"],
        "kappa": three["kappa"]["value"],
        "important_precision": imp["precision"]["IMPORTANT"]["value"],
        "important_recall": imp["recall"]["IMPORTANT"]["value"],
        "verdicts_per_second": report.get("speed", {}).get("verdicts_per_second", math.nan),
    }


def build_report(
    cfg: Config,
    request: AuditRequest,
    source: str,
    pairs: list[AuditPair],
    verdicts: list[Any],
    described: str,
    backend: str,
) -> dict[str, Any]:
    figures = audit_figures(pairs, verdicts, resamples=request.bootstrap, seed=request.seed)
    return {
        "format": REPORT_FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "checker": {"backend": backend, "description": described, "config": cfg.to_dict()["checker"]},
        "data": {"source": source, "pairs_requested": request.pairs, "strata": strata_counts(pairs)},
        "seed": request.seed,
        "bootstrap": {"resamples": request.bootstrap, "seed": request.seed, "over": "questions"},
        "gold_rule": (
            "IMPORTANT: the question's gold documents; other documents: the gold checker's rule with only "
            "the gold documents known (RELEVANT if it mentions a gold title or its title is in the question, "
            "else IRRELEVANT)"
        ),
        **figures,
        "pairs": [
            {
                "question_id": p.request.question_id,
                "sub_goals": list(p.request.sub_goals),
                "docid": p.request.docid,
                "stratum": p.stratum,
                "gold": p.gold.value,
                "verdict": v.label.value,
                "probs": verdict_probs(v),
                "reason": getattr(v, "reason", ""),
                "length": p.length,
                "overlap": p.overlap,
            }
            for p, v in zip(pairs, verdicts)
        ],
    }
