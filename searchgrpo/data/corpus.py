"""The searchable corpus: a JSONL file of `{"docid", "title", "text"}` documents.

Loading never crashes on bad lines: invalid JSON, missing or mistyped fields, empty documents and
duplicate docids are reported by `path:line` and skipped (or raised under `strict`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.errors import IssueLog, UserError
from searchgrpo.fileio import atomic_write_text
from searchgrpo.jsonl import read_records


@dataclass(frozen=True)
class Document:
    """One searchable document."""

    docid: str
    title: str
    text: str

    def snippet(self, chars: int) -> str:
        text = " ".join(self.text.split())
        return text if len(text) <= chars else text[: max(chars - 1, 0)].rstrip() + "…"


class Corpus:
    """Documents in file order, addressable by docid."""

    def __init__(self, documents: Iterable[Document], source: str = "<memory>") -> None:
        self.documents: list[Document] = list(documents)
        self.source = source
        self._by_id = {d.docid: i for i, d in enumerate(self.documents)}
        if len(self._by_id) != len(self.documents):
            raise ValueError(f"{source}: duplicate docids in corpus")

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def __contains__(self, docid: object) -> bool:
        return docid in self._by_id

    def get(self, docid: str) -> Document | None:
        i = self._by_id.get(docid)
        return None if i is None else self.documents[i]

    def document(self, docid: str) -> Document:
        """`get` for a docid known to be here (one a retriever returned): KeyError if it is not."""
        doc = self.get(docid)
        if doc is None:
            raise KeyError(docid)
        return doc


def parse_document(obj: object) -> Document:
    """Validate one decoded JSON line; raises ValueError naming the bad field."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    for key in ("docid", "title", "text"):
        if not isinstance(obj.get(key), str):
            raise ValueError(f"field '{key}' must be a string")
    if not obj["docid"].strip():
        raise ValueError("field 'docid' is empty")
    if not obj["title"].strip() and not obj["text"].strip():
        raise ValueError("document has no title and no text")
    return Document(obj["docid"], obj["title"], obj["text"])


def load_corpus(path: str | os.PathLike[str], issues: IssueLog | None = None) -> Corpus:
    """Read a JSONL corpus, skipping (and reporting) malformed lines."""
    issues = issues if issues is not None else IssueLog()
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: corpus file not found (data.corpus)")
    docs = read_records(p, parse_document, lambda d: d.docid, "docid", issues)
    if not docs:
        raise UserError(f"{p}: corpus holds no valid documents")
    return Corpus(docs, source=str(p))


def write_corpus(path: str | os.PathLike[str], documents: Iterable[Document]) -> None:
    """Write documents as JSONL, atomically."""
    lines = (json.dumps({"docid": d.docid, "title": d.title, "text": d.text}, ensure_ascii=False) for d in documents)
    atomic_write_text(Path(path), "".join(line + "\n" for line in lines))


def complete_corpus(path: Path, documents: list[Document]) -> tuple[list[Document], str]:
    """Make the corpus file `path` hold every one of `documents` as given: written when missing,
    rewritten (the given ones first, then those only the file had, which older traces may use) when
    one is missing or differs. Returns the corpus now in the file, and a note when it was rewritten."""
    if not path.is_file():
        write_corpus(path, documents)
        return documents, ""
    try:
        existing = list(load_corpus(path, IssueLog()))
    except UserError:  # nothing valid in it: rewritten whole
        existing = []
    have = {d.docid: d for d in existing}
    added = sum(1 for d in documents if d.docid not in have)
    changed = sum(1 for d in documents if d.docid in have and have[d.docid] != d)
    if not added and not changed:
        return existing, ""
    given = {d.docid for d in documents}
    complete = [*documents, *(d for d in existing if d.docid not in given)]
    write_corpus(path, complete)
    return complete, (
        f"{path}: rewritten for the question set as it is now ({added} documents added, {changed} "
        f"changed, {len(complete) - len(documents)} kept for earlier traces)"
    )
