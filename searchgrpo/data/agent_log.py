"""`searchgrpo import-traces`: a multi-agent system's JSONL event log turned into traces.

The reference adapter of `trace_builder` (docs/traces.md, "From your system's logs"): one JSON
object per line, one agent event each, every line naming its question:

    {"event": "question", "question_id": "q1", "question": "...", "answers": [...], "gold_docids": [...]}
    {"event": "plan",     "question_id": "q1", "round": 1, "strategy": "SEARCH", "sub_goals": [...], "goals": [...]}
    {"event": "clues",    "question_id": "q1", "round": 1, "clues": ["...", "..."]}
    {"event": "search",   "question_id": "q1", "round": 1, "docids": ["...", "..."]}
    {"event": "verdicts", "question_id": "q1", "round": 1, "documents": [{"docid", "title", "verdict", "note"}]}
    {"event": "entities", "question_id": "q1", "round": 2, "entities": [{"name", "type", "facts", "source_docids"}]}
    {"event": "goals",    "question_id": "q1", "round": 2, "goals": [{"id", "text", "status", "answer"}]}
    {"event": "note",     "question_id": "q1", "round": 2, "text": "..."}

Every line may carry `"run": N` (the attempt, default 1) and any other field (ignored). Lines are
read in order, file after file; a question's `question` line comes before its other events.
Verdicts are IMPORTANT, RELEVANT or IRRELEVANT (any case). A line that cannot be used (not JSON,
a missing or mistyped field, an unknown event, an event of a question not started) is reported as
`file:line: reason` and counted, never dropped silently; `--strict` stops at the first. The traces
folder is written whole or not at all (`fileio.atomic_dir`), with `import.json` (the counts and
every issue) beside the questions; `--out` must be new, empty, or an import of ours (replaced
with `--overwrite`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.data.labels import Label
from searchgrpo.data.trace_builder import BuildReport, TraceBuilder
from searchgrpo.data.traces import RoundState, SchemaError, parse_round
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.fileio import OutputKind, atomic_dir, atomic_write_json, claim_output
from searchgrpo.jsonl import parsed_lines

EVENTS = ("question", "plan", "clues", "search", "verdicts", "entities", "goals", "note")
IMPORT_REPORT = "import.json"
IMPORTED_TRACES = OutputKind(
    "traces folder written by import-traces", "--out", folder=True, ours=lambda p: (p / IMPORT_REPORT).is_file()
)
"""`import-traces --out`: a new or empty folder, or one of our imports (replaced with --overwrite)."""
SHOWN_ISSUES = 200
"""Issues listed in import.json (all are counted)."""


@dataclass(frozen=True)
class LogEvent:
    """One validated line of an agent log."""

    event: str
    question_id: str
    run: int
    round: int
    data: dict[str, Any]


def _string_list(obj: dict[str, Any], key: str, required: bool = False) -> list[str] | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"field '{key}' is missing")
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"field '{key}' must be a list of strings")
    return value


def _tables(obj: dict[str, Any], keys: Sequence[str]) -> RoundState:
    """The tables among `keys` of an event, validated as a round file's (`traces.parse_round`)."""
    try:
        return parse_round({k: obj[k] for k in keys if k in obj})
    except SchemaError as exc:
        raise ValueError(f"field {exc}") from None


def parse_event(obj: object) -> LogEvent:
    """Validate one decoded line; ValueError naming the bad field."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object (one event per line)")
    event = obj.get("event")
    if event not in EVENTS:
        raise ValueError(f"field 'event' = {event!r}: expected one of {', '.join(EVENTS)}")
    qid = obj.get("question_id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise ValueError("field 'question_id' must be a non-empty string (or an integer)")
    run = obj.get("run", 1)
    if isinstance(run, bool) or not isinstance(run, int) or run < 1:
        raise ValueError("field 'run' must be an integer >= 1")
    rnd = 0
    if event == "question":
        if not isinstance(obj.get("question"), str) or not obj["question"].strip():
            raise ValueError("field 'question' must be a non-empty string")
        data = {
            "question": obj["question"],
            "answers": _string_list(obj, "answers") or [],
            "gold_docids": _string_list(obj, "gold_docids") or [],
        }
    else:
        given = obj.get("round")
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise ValueError("field 'round' must be an integer >= 1")
        rnd = given
        data = _event_data(event, obj)
    return LogEvent(event, str(qid), run, rnd, data)


def _event_data(event: str, obj: dict[str, Any]) -> dict[str, Any]:
    if event == "plan":
        strategy = obj.get("strategy")
        if not isinstance(strategy, str):
            raise ValueError("field 'strategy' must be a string (SEARCH, EXTRACT or ANSWER)")
        tables = _tables(obj, ("sub_goals", "goals"))
        return {
            "strategy": strategy,
            "sub_goals": tables.sub_goals if "sub_goals" in obj and obj["sub_goals"] is not None else None,
            "goals": tables.goals if "goals" in obj and obj["goals"] is not None else None,
        }
    if event == "clues":
        return {"clues": _string_list(obj, "clues", required=True)}
    if event == "search":
        return {"docids": _string_list(obj, "docids", required=True)}
    if event == "verdicts":
        if not isinstance(obj.get("documents"), list):
            raise ValueError("field 'documents' must be a list")
        documents = _tables(obj, ("documents",)).documents
        for i, doc in enumerate(documents):
            if Label.parse(doc.verdict) is None:
                raise ValueError(
                    f"field documents[{i}].verdict = {doc.verdict!r}: expected IMPORTANT, RELEVANT or IRRELEVANT"
                )
        return {"documents": documents}
    if event == "entities":
        if not isinstance(obj.get("entities"), list):
            raise ValueError("field 'entities' must be a list")
        return {"entities": _tables(obj, ("entities",)).entities}
    if event == "goals":
        if not isinstance(obj.get("goals"), list):
            raise ValueError("field 'goals' must be a list")
        return {"goals": _tables(obj, ("goals",)).goals}
    if not isinstance(obj.get("text"), str):
        raise ValueError("field 'text' must be a string")
    return {"text": obj["text"]}


def read_agent_log(path: Path, builder: TraceBuilder) -> tuple[int, int]:
    """Feed every event of one log file to `builder`; returns (lines with an event, events used)."""
    issues = builder.issues
    lines = used = 0
    for where, ev in parsed_lines(path, parse_event, issues):
        lines += 1
        if ev.event == "question":
            d = ev.data
            used += (
                builder.question(
                    ev.question_id,
                    d["question"],
                    answers=d["answers"],
                    gold_docids=d["gold_docids"],
                    run=ev.run,
                    where=where,
                )
                is not None
            )
            continue
        log = builder.get(ev.question_id, ev.run)
        if log is None:
            issues.record(
                where,
                f"a {ev.event} event of question {ev.question_id!r} run {ev.run} with no question event before it "
                "(or with a question event that was left out); left out",
            )
            continue
        d = ev.data
        before = len(issues)
        if ev.event == "plan":
            log.plan(ev.round, d["strategy"], sub_goals=d["sub_goals"], goals=d["goals"], where=where)
        elif ev.event == "clues":
            log.clues(ev.round, d["clues"], where=where)
        elif ev.event == "search":
            log.search(ev.round, d["docids"], where=where)
        elif ev.event == "verdicts":
            log.verdicts(ev.round, d["documents"], where=where)
        elif ev.event == "entities":
            log.entities(ev.round, d["entities"], where=where)
        elif ev.event == "goals":
            log.goals(ev.round, d["goals"], where=where)
        else:
            log.note(ev.round, d["text"], where=where)
        used += len(issues) == before
    return lines, used


@dataclass(frozen=True)
class ImportResult:
    """What `import_agent_logs` wrote."""

    out: Path
    report: BuildReport
    lines: int
    """Lines that held a valid event."""
    used: int
    """Events that went into the traces."""

    @property
    def issues(self) -> IssueLog:
        return self.report.issues

    def summary_lines(self, shown: int = 10) -> list[str]:
        r, issues = self.report, self.report.issues.issues
        lines = [f"{'conflict' if i.conflict else 'skipped'} {i}" for i in issues[:shown]]
        if len(issues) > shown:
            lines.append(f"... and {len(issues) - shown} more (all in {self.out / IMPORT_REPORT})")
        lines.append(
            f"{self.used} of {self.lines} events used; {len(issues)} lines or events left out; {r.questions} "
            f"questions, {r.runs} runs, {r.rounds} rounds ({r.search_rounds} SEARCH) written to {self.out}"
        )
        return lines


def import_agent_logs(
    logs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    strict: bool = False,
) -> ImportResult:
    """Convert agent logs (module docstring) into the traces folder `out`, atomically."""
    paths = [Path(p).expanduser() for p in logs]
    if not paths:
        raise UserError("give at least one log file")
    for p in paths:
        if not p.is_file():
            raise UserError(f"{p}: log file not found")
    target = claim_output(out, IMPORTED_TRACES, overwrite=overwrite)
    builder = TraceBuilder(IssueLog(strict))
    lines = used = 0
    for p in paths:
        n, u = read_agent_log(p, builder)
        lines, used = lines + n, used + u
    with atomic_dir(target, overwrite=overwrite) as tmp:
        report = builder.write(tmp)
        if not report.runs:
            raise UserError(
                f"{', '.join(str(p) for p in paths)}: no question with round events to write "
                f"({len(builder.issues)} lines or events left out; see docs/traces.md for the log format)"
            )
        issues = builder.issues.issues
        atomic_write_json(
            tmp / IMPORT_REPORT,
            {
                "format": 1,
                "logs": [str(p.resolve()) for p in paths],
                "event_lines": lines,
                "events_used": used,
                "questions": report.questions,
                "runs": report.runs,
                "rounds": report.rounds,
                "search_rounds": report.search_rounds,
                "issues_total": len(issues),
                "conflicts": sum(1 for i in issues if i.conflict),
                "issues": [str(i) for i in issues[:SHOWN_ISSUES]],
            },
        )
    return ImportResult(target, report, lines, used)
