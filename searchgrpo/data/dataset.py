"""A run's data: the corpus, the SEARCH-round states split by question, and the data's labels.

`read_dataset` reads a traces folder and its corpus (`load_dataset` in `searchgrpo.world`
first resolves the config's paths, building the demo world when they are null).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from searchgrpo.config import DataConfig
from searchgrpo.data.corpus import Corpus, load_corpus
from searchgrpo.data.labels import QuestionLabels
from searchgrpo.data.states import load_states, split_by_question
from searchgrpo.data.traces import RoundState, SearchState
from searchgrpo.errors import IssueLog, UserError


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
    initial: dict[str, RoundState] = field(default_factory=dict)
    """Each question's state before round 1 (`LoadedStates.initial`): where its episodes start."""
    answers: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def issue_summary(self, shown: int) -> list[str]:
        """Warnings about the malformed inputs skipped: the first `shown`, then the count."""
        issues = self.issues.issues
        lines = [f"{'conflict' if issue.conflict else 'skipped'} {issue}" for issue in issues[:shown]]
        if len(issues) > shown:
            lines.append(f"... and {len(issues) - shown} more malformed inputs skipped")
        conflicts = self.issues.conflicts
        if conflicts:
            lines.append(f"{len(conflicts)} conflicting inputs in all (`searchgrpo check` fails on them)")
        if issues:
            lines.append(
                f"{len(issues)} malformed inputs skipped in all (data.strict / --strict stops at the first instead)"
            )
        return lines


def read_dataset(
    data: DataConfig,
    traces_dir: Path,
    corpus_path: Path,
    *,
    split: bool = True,
    strict: bool | None = None,
    is_demo: bool = False,
) -> Dataset:
    """Read the corpus and the traces' states. With `split`, the questions are split into train and
    eval (`data.eval_fraction`); without, every state is an eval state (a held-out set)."""
    strict = data.strict if strict is None else strict
    issues = IssueLog(strict)
    corpus = load_corpus(corpus_path, issues)
    loaded = load_states(
        traces_dir,
        min_clues_per_round=data.min_clues_per_round,
        max_samples_per_question=data.max_samples_per_question,
        strict=strict,
        seed=data.split_seed,
    )
    issues.issues.extend(loaded.issues.issues)
    if not loaded.states:
        raise UserError(
            f"{traces_dir}: no usable SEARCH-round states ({len(loaded.issues)} malformed files, "
            f"{loaded.rounds_skipped_few_clues} rounds with fewer than data.min_clues_per_round clues)"
        )
    if split:
        train, evals = split_by_question(loaded.states, data.eval_fraction, data.split_seed)
        if not train:
            raise UserError(f"{traces_dir}: every question went to eval; lower data.eval_fraction")
    else:
        train, evals = [], loaded.states
    return Dataset(
        corpus, train, evals, loaded.labels, issues, traces_dir, corpus_path, is_demo, loaded.initial, loaded.answers
    )
