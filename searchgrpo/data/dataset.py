"""A run's data: the corpus, the SEARCH-round states split by question, and the data's labels."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from searchgrpo.data.corpus import Corpus
from searchgrpo.data.labels import QuestionLabels
from searchgrpo.data.traces import SearchState
from searchgrpo.errors import IssueLog


@dataclass
class Dataset:
    """Everything a run needs from its data."""

    corpus: Corpus
    train: list[SearchState]
    eval: list[SearchState]
    labels: dict[str, QuestionLabels]
    issues: IssueLog
    traces_dir: Path
    corpus_path: Path
    is_demo: bool

    def issue_summary(self, shown: int) -> list[str]:
        """Warnings about the malformed inputs skipped: the first `shown`, then the count."""
        issues = self.issues.issues
        lines = [f"skipped {issue}" for issue in issues[:shown]]
        if len(issues) > shown:
            lines.append(f"... and {len(issues) - shown} more malformed inputs skipped")
        if issues:
            lines.append(f"{len(issues)} malformed inputs skipped in all (data.strict / --strict stops at the "
                         "first instead)")
        return lines
