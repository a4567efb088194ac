"""Question sets in the normalised JSONL schema of `../shared/data/`.

One question a line: `{"id", "question", "answers": [...], "docs": [{"docid", "title", "text",
"gold": bool}]}`. `gold` marks the evidence (IMPORTANT) paragraphs. An optional `sub_goals` list
(an extension written by the demo world) gives the Planner's decomposition.
The union of all `docs` is the question set's search corpus.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from searchgrpo.data.corpus import Document, parse_document
from searchgrpo.errors import IssueLog, UserError
from searchgrpo.fileio import atomic_write_text
from searchgrpo.jsonl import read_records


@dataclass(frozen=True)
class QuestionRecord:
    """One multi-hop question with its candidate documents."""

    id: str
    question: str
    answers: tuple[str, ...]
    docs: tuple[Document, ...]
    gold: frozenset[str]
    sub_goals: tuple[str, ...] = field(default=())

    def to_json(self) -> dict:
        out = {
            "id": self.id,
            "question": self.question,
            "answers": list(self.answers),
            "docs": [
                {"docid": d.docid, "title": d.title, "text": d.text, "gold": d.docid in self.gold} for d in self.docs
            ],
        }
        if self.sub_goals:
            out["sub_goals"] = list(self.sub_goals)
        return out


def parse_question(obj: object) -> QuestionRecord:
    """Validate one decoded line; raises ValueError naming the bad field."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    for key in ("id", "question"):
        if not isinstance(obj.get(key), str) or not obj[key].strip():
            raise ValueError(f"field '{key}' must be a non-empty string")
    answers = obj.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError("field 'answers' must be a list of strings")
    raw_docs = obj.get("docs")
    if not isinstance(raw_docs, list):
        raise ValueError("field 'docs' must be a list")
    docs, gold = [], set()
    for i, d in enumerate(raw_docs):
        try:
            doc = parse_document(d)
        except ValueError as exc:
            raise ValueError(f"docs[{i}]: {exc}") from None
        if "gold" in d and not isinstance(d["gold"], bool):
            raise ValueError(f"docs[{i}].gold must be true or false")
        docs.append(doc)
        if d.get("gold"):
            gold.add(doc.docid)
    if not gold:
        raise ValueError('no gold (evidence) document: at least one doc needs "gold": true')
    sub_goals = obj.get("sub_goals", [])
    if not isinstance(sub_goals, list) or not all(isinstance(s, str) for s in sub_goals):
        raise ValueError("field 'sub_goals' must be a list of strings")
    return QuestionRecord(obj["id"], obj["question"], tuple(answers), tuple(docs), frozenset(gold), tuple(sub_goals))


def load_questions(path: str | os.PathLike[str], issues: IssueLog | None = None) -> list[QuestionRecord]:
    """Read a question set, skipping (and reporting) malformed lines and repeated ids."""
    issues = issues if issues is not None else IssueLog()
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: question set not found")
    out = read_records(p, parse_question, lambda r: r.id, "question id", issues)
    if not out:
        raise UserError(f"{p}: no valid questions")
    return out


def docid_conflicts(records: Iterable[QuestionRecord]) -> dict[str, list[str]]:
    """{docid: the ids of the questions holding it} for every docid that names different documents
    (another title or text) in different questions, as when each question numbers its own (`d0`,
    `d1`, ...). The same document shared by questions (HotpotQA's paragraphs) is no conflict."""
    content: dict[str, dict[tuple[str, str], list[str]]] = {}
    for rec in records:
        for doc in rec.docs:
            content.setdefault(doc.docid, {}).setdefault((doc.title, doc.text), []).append(rec.id)
    return {
        docid: sorted({q for qids in versions.values() for q in qids})
        for docid, versions in content.items()
        if len(versions) > 1
    }


def unique_docids(records: list[QuestionRecord], issues: IssueLog, source: object) -> list[QuestionRecord]:
    """`records` with every conflicting docid (`docid_conflicts`) renamed `<question id>:<docid>` in
    each question that holds it, gold labels included, so that pooling the set into one corpus
    keeps every question's own documents; each renamed docid is reported as a conflict (under
    strict: refused)."""
    conflicts = docid_conflicts(records)
    if not conflicts:
        return records
    for docid, qids in sorted(conflicts.items()):
        shown = ", ".join(repr(q) for q in qids[:3]) + (", ..." if len(qids) > 3 else "")
        issues.record(
            source,
            f"docid {docid!r} names different documents in {len(qids)} questions ({shown}); each question's "
            f"copy is renamed '<question id>:{docid}' (docids must be unique across a question set)",
            conflict=True,
        )
    taken = {d.docid for rec in records for d in rec.docs}

    def renamed(qid: str, docid: str) -> str:
        new, n = f"{qid}:{docid}", 2
        while new in taken:
            new, n = f"{qid}:{docid}~{n}", n + 1
        taken.add(new)
        return new

    out = []
    for rec in records:
        names = {d.docid: renamed(rec.id, d.docid) for d in rec.docs if d.docid in conflicts}
        if not names:
            out.append(rec)
            continue
        docs = tuple(replace(d, docid=names.get(d.docid, d.docid)) for d in rec.docs)
        out.append(replace(rec, docs=docs, gold=frozenset(names.get(g, g) for g in rec.gold)))
    return out


def pooled_corpus(records: Iterable[QuestionRecord]) -> list[Document]:
    """The union of every question's documents, first occurrence first."""
    seen: dict[str, Document] = {}
    for rec in records:
        for doc in rec.docs:
            seen.setdefault(doc.docid, doc)
    return list(seen.values())


def write_questions(path: str | os.PathLike[str], records: Iterable[QuestionRecord]) -> None:
    atomic_write_text(Path(path), "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records))
