"""Fingerprints of a run's data, so that a resumed run can tell when its data changed.

`data_fingerprint(dataset)` digests what training reads, not file names or times: every corpus
document (docid, title, text), and every state with its question, tables and original clues, plus
the gold labels (the traces, and through them the question set they were collected from). Moving
or touching a file changes nothing; editing one document or one trace does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from searchgrpo.data.dataset import Dataset


def _digest(items: Iterable[object]) -> str:
    h = hashlib.sha256()
    for item in items:
        h.update(json.dumps(item, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:24]


def data_fingerprint(ds: Dataset) -> dict[str, str]:
    """{"corpus": digest, "traces": digest}: equal exactly when training would read the same data."""
    corpus = ((d.docid, d.title, d.text) for d in ds.corpus)
    states = sorted(
        (
            (s.state_id, s.question, list(s.answers), s.round, s.before.to_json(), list(s.original_clues))
            for s in [*ds.train, *ds.eval]
        ),
        key=lambda t: t[0],
    )
    labels = sorted((qid, {d: lab.value for d, lab in sorted(q.labels.items())}) for qid, q in ds.labels.items())
    return {"corpus": _digest(corpus), "traces": _digest([*states, *labels])}
