"""Is the evaluation held out? Each checkpoint's training questions against the questions it is scored on.

A checkpoint under `runs/<id>/checkpoints/` belongs to a known run, whose history
(`config_history.jsonl`) records the questions every start trained on. An eval under another
`data.split_seed` or `data.eval_fraction`, or on a question set or traces folder holding some of
those questions, would score the checkpoint on questions it was trained on: the eval refuses,
naming how many and how to get a held-out split, unless `--allow-overlap` is given; the report
records the overlap either way. For runs older than that record, the split is derived again from the
run's own `data.split_seed` and `data.eval_fraction` when the data's fingerprint shows it is the
same data; when neither works the report says the overlap is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgrpo.data.dataset import Dataset
from searchgrpo.data.fingerprint import data_fingerprint
from searchgrpo.data.states import split_by_question
from searchgrpo.errors import UserError, printable
from searchgrpo.train.checkpoints import CHECKPOINT_DIR
from searchgrpo.train.run_history import read_history
from searchgrpo.train.run_lock import is_run_folder

SHOWN_IDS = 20
"""Overlapping question ids the report lists (the count is always complete)."""


@dataclass(frozen=True)
class HeldOut:
    """One checkpoint's training questions against the eval's."""

    policy: str
    run: str | None
    """The checkpoint's run folder (None: not under a run's checkpoints/)."""
    known: bool
    """Whether the run's training questions could be told."""
    eval_questions: int
    overlap: list[str] = field(default_factory=list)
    """Eval questions the checkpoint's run trained on (sorted)."""
    how: str = ""
    """Where the training questions came from, or why they are unknown."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "known": self.known,
            "eval_questions": self.eval_questions,
            "overlap_questions": len(self.overlap),
            "overlap_ids": self.overlap[:SHOWN_IDS],
            "how": self.how,
        }


def run_of(checkpoint: str) -> Path | None:
    """The run folder a checkpoint sits in (`<run>/checkpoints/step-N`), if it is one."""
    folder = Path(checkpoint).resolve()
    run = folder.parent.parent
    return run if folder.parent.name == CHECKPOINT_DIR and is_run_folder(run) else None


def trained_questions(run: Path, dataset: Dataset) -> tuple[set[str] | None, str]:
    """(the questions `run` trained on, how that is known) or (None, why it is not)."""
    history = read_history(run)
    recorded = [e["train_questions"] for e in history if isinstance(e.get("train_questions"), list)]
    if recorded:  # every start's, in case a resume changed the split (--allow-changes)
        return {str(q) for qs in recorded for q in qs}, f"recorded in {run.name}'s config history"
    last = history[-1] if history else {}
    data = last.get("config", {}).get("data", {}) if isinstance(last.get("config"), dict) else {}
    if not isinstance(data, dict) or last.get("data") != data_fingerprint(dataset):
        return None, f"{run.name} records neither its training questions nor this data's fingerprint"
    try:
        train, _ = split_by_question([*dataset.train, *dataset.eval], float(data["eval_fraction"]), data["split_seed"])
    except (KeyError, TypeError, ValueError):
        return None, f"{run.name}'s history has no usable data.split_seed / data.eval_fraction"
    return {s.question_id for s in train}, f"the split of {run.name} (same data, its split_seed and eval_fraction)"


def run_split(run: Path) -> str:
    """The `--set` options that give `run`'s own split, as its history's last entry records them."""
    history = read_history(run)
    config = history[-1].get("config") if history else None
    data = config.get("data") if isinstance(config, dict) else None
    if not isinstance(data, dict) or "split_seed" not in data or "eval_fraction" not in data:
        return "see its config_history.jsonl"
    return f"--set data.split_seed={data['split_seed']} --set data.eval_fraction={data['eval_fraction']}"


def held_out_overlap(
    specs: Sequence[Any], dataset: Dataset, eval_question_ids: Sequence[str], *, allow_overlap: bool
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """({policy: what HeldOut.to_json says}, warnings) for every checkpoint among `specs`; raises a
    one-line UserError on an overlap unless `allow_overlap`. Nothing is loaded but the run's history."""
    questions = set(eval_question_ids)
    found: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    for spec in specs:
        if spec.checkpoint is None:
            continue
        run = run_of(spec.checkpoint)
        if run is None:
            result = HeldOut(spec.name, None, False, len(questions), how="not inside a run's checkpoints/ folder")
        else:
            trained, how = trained_questions(run, dataset)
            overlap = sorted(questions & trained) if trained is not None else []
            result = HeldOut(spec.name, str(run), trained is not None, len(questions), overlap, how)
        found[spec.name] = result.to_json()
        if not result.known:
            warnings.append(
                f"{printable(spec.checkpoint)}: cannot tell whether the eval questions are held out ({result.how})"
            )
        elif result.overlap:
            assert run is not None  # an overlap is only found inside a run
            first = printable(result.overlap[0])
            what = (
                f"--checkpoint {printable(spec.checkpoint)}: {len(result.overlap)} of the {len(questions)} eval "
                f"questions are training questions of its run {printable(run)} (first: {first!r})"
            )
            if not allow_overlap:
                raise UserError(
                    f"{what}; evaluate on questions it never trained on (its run's split: {run_split(run)}; or "
                    "another question set), or pass --allow-overlap (recorded in the report)"
                )
            warnings.append(f"{what}: scored anyway (--allow-overlap); the report records the overlap")
    return found, warnings
