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
