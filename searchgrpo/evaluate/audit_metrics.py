"""The checker audit's figures from its pairs and the checker's verdicts: agreement with gold,
calibration and bias probes, each with a bootstrap CI over questions where it has one.

- `three_label`: the 3x3 confusion matrix against the derived gold labels (`audit_pairs.py`), its
  accuracy (the *agreement* the judge study charts), Cohen's kappa, and each label's precision and
  recall.
- `important_vs_rest`: the same for IMPORTANT against the two other labels together (what the
  reward's largest weight pays for), with the judge's and gold's IMPORTANT rates.
- `strata`: pairs, agreement and both IMPORTANT rates in each stratum.
- `calibration` (only when verdicts carry `probs`): a reliability table and ECE for P(IMPORTANT)
  against gold IMPORTANT, and for the verdict's own probability against its being right.
- `bias`: the judge's and gold's IMPORTANT rates, and their difference, per quartile of document
  length (tokens of title and text, quartiles of the audited pairs) and per quarter of word
  overlap with the question ([0, .25), [.25, .5), [.5, .75), [.75, 1]: the hack radar's bins;
  `agents/doc_features.py`).

The figures describe the stratified sample (a third of it gold documents when every stratum has
enough pairs), not the mix of documents a policy retrieves.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from searchgrpo.agents.checker import Verdict
from searchgrpo.agents.doc_features import OVERLAP_EDGES, OVERLAP_NAMES
from searchgrpo.data.labels import Label
from searchgrpo.evaluate import agreement as ag
from searchgrpo.evaluate.audit_pairs import STRATA, AuditPair
from searchgrpo.evaluate.stats import paired_ratio_diff_ci, ratio_ci

LABELS: tuple[Label, ...] = tuple(Label)
INDEX = {lab: i for i, lab in enumerate(LABELS)}
IMPORTANT = INDEX[Label.IMPORTANT]
CALIBRATION_BINS = 10


def verdict_probs(verdict: Verdict) -> tuple[float, float, float] | None:
    """The verdict's label probabilities (`Verdict.probs`, in Label order) as plain floats, or None."""
    if verdict.probs is None:
        return None
    important, relevant, irrelevant = verdict.probs
    return float(important), float(relevant), float(irrelevant)


def _ci(lo_hi: tuple[float, float]) -> list[float]:
    return [float(lo_hi[0]), float(lo_hi[1])]


def _with_ci(per_q: np.ndarray, metric: Any, boot: dict[str, int]) -> dict[str, Any]:
    return {"value": float(metric(per_q.sum(axis=0))), "ci": _ci(ag.matrix_ci(per_q, metric, **boot))}


def agreement_block(per_q: np.ndarray, names: Sequence[str], boot: dict[str, int]) -> dict[str, Any]:
    """Confusion matrix, accuracy, kappa, per-label precision and recall (with CIs) of [Q, n, n] counts."""
    cm = per_q.sum(axis=0)
    out: dict[str, Any] = {
        "labels": list(names),
        "confusion": cm.astype(int).tolist(),
        "pairs": int(cm.sum()),
        "accuracy": _with_ci(per_q, ag.accuracy, boot),
        "kappa": _with_ci(per_q, ag.cohen_kappa, boot),
        "precision": {},
        "recall": {},
    }
    for k, name in enumerate(names):
        out["precision"][name] = _with_ci(per_q, lambda m, k=k: ag.precision(m)[..., k], boot)
        out["recall"][name] = _with_ci(per_q, lambda m, k=k: ag.recall(m)[..., k], boot)
    return out


def rate_bins(
    q_index: np.ndarray,
    bins: np.ndarray,
    judged: np.ndarray,
    gold: np.ndarray,
    names: Sequence[str],
    n_q: int,
    boot: dict,
) -> list[dict[str, Any]]:
    """Per bin: pairs, the judge's and gold's IMPORTANT rates and judge - gold, each with its CI."""
    counts = ag.per_question_counts(q_index, bins, [judged, gold], n_q, len(names))
    rows = []
    for b, name in enumerate(names):
        n, j, g = counts[:, b, 0], counts[:, b, 1], counts[:, b, 2]
        total = float(n.sum())
        row: dict[str, Any] = {"bin": name, "pairs": int(total)}
        if total:
            row["judge_rate"] = {"value": float(j.sum()) / total, "ci": _ci(ratio_ci(j, n, **boot))}
            row["gold_rate"] = {"value": float(g.sum()) / total, "ci": _ci(ratio_ci(g, n, **boot))}
            row["excess"] = {
                "value": (float(j.sum()) - float(g.sum())) / total,
                "ci": _ci(paired_ratio_diff_ci(g, n, j, n, **boot)),
            }
        rows.append(row)
    return rows


def calibration(pairs: Sequence[AuditPair], verdicts: Sequence[Verdict]) -> dict[str, Any] | None:
    """Reliability tables and ECEs of the verdicts that carry probabilities (None if none do)."""
    rows = [(p, v, pr) for p, v in zip(pairs, verdicts) if (pr := verdict_probs(v)) is not None]
    if not rows:
        return None
    important = ag.reliability_table(
        [pr[IMPORTANT] for _, _, pr in rows], [p.gold is Label.IMPORTANT for p, _, _ in rows], CALIBRATION_BINS
    )
    verdict = ag.reliability_table(
        [pr[INDEX[v.label]] for _, v, pr in rows],
        [v.label is p.gold for p, v, _ in rows],
        CALIBRATION_BINS,
    )
    return {
        "pairs_with_probabilities": len(rows),
        "important": {"table": important, "ece": ag.expected_calibration_error(important)},
        "verdict": {"table": verdict, "ece": ag.expected_calibration_error(verdict)},
    }


def audit_figures(
    pairs: Sequence[AuditPair], verdicts: Sequence[Verdict], *, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Every figure of the report but speed (see the module docstring)."""
    boot = {"resamples": resamples, "seed": seed}
    questions = sorted({p.request.question_id for p in pairs})
    where = {q: i for i, q in enumerate(questions)}
    q_index = np.array([where[p.request.question_id] for p in pairs], dtype=np.int64)
    gold = np.array([INDEX[p.gold] for p in pairs], dtype=np.int64)
    pred = np.array([INDEX[v.label] for v in verdicts], dtype=np.int64)
    per_q = np.zeros((len(questions), len(LABELS), len(LABELS)))
    np.add.at(per_q, (q_index, gold, pred), 1.0)
    binary_per_q = ag.one_vs_rest(per_q, IMPORTANT)
    judged, gold_imp = pred == IMPORTANT, gold == IMPORTANT
    important = agreement_block(binary_per_q, ["IMPORTANT", "other"], boot)
    important["judge_rate"] = float(judged.mean()) if len(pairs) else float("nan")
    important["gold_rate"] = float(gold_imp.mean()) if len(pairs) else float("nan")
    strata = {}
    for s in STRATA:
        inside = np.array([p.stratum == s for p in pairs], dtype=bool)
        n = int(inside.sum())
        strata[s] = {
            "pairs": n,
            "agreement": float((gold[inside] == pred[inside]).mean()) if n else None,
            "judge_important_rate": float(judged[inside].mean()) if n else None,
            "gold_important_rate": float(gold_imp[inside].mean()) if n else None,
        }
    lengths = np.array([p.length for p in pairs], dtype=np.float64)
    edges = ag.quantile_edges(lengths, 4)
    length_names = _length_names(edges)
    overlaps = np.array([p.overlap for p in pairs], dtype=np.float64)
    return {
        "questions": len(questions),
        "three_label": agreement_block(per_q, [lab.value for lab in LABELS], boot),
        "important_vs_rest": important,
        "strata": strata,
        "calibration": calibration(pairs, verdicts),
        "bias": {
            "length": {
                "unit": "tokens of the document's title and text",
                "edges": edges,
                "bins": rate_bins(
                    q_index, ag.bin_of(lengths, edges), judged, gold_imp, length_names, len(questions), boot
                ),
            },
            "overlap": {
                "unit": "share of the question's content words in the document",
                "edges": list(OVERLAP_EDGES),
                "bins": rate_bins(
                    q_index, ag.bin_of(overlaps, OVERLAP_EDGES), judged, gold_imp, OVERLAP_NAMES, len(questions), boot
                ),
            },
        },
    }


def _length_names(edges: Sequence[float]) -> list[str]:
    if not edges:
        return ["all"]
    cuts = [f"{e:g}" for e in edges]
    return [f"< {cuts[0]}", *(f"[{a}, {b})" for a, b in itertools.pairwise(cuts)), f">= {cuts[-1]}"]
