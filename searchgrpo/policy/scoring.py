"""Scoring a policy on a set of states: the in-training evaluation and the core of `eval`.

Each state gets greedy clues (or `num_samples` sampled ones) from the policy; they run through the
same environment as training (BM25 + checker + reward). Every sample carries its retrieval
metrics: recall of the whole union (recall@k), recall at fixed document budgets (recall@B, over
the first B documents of the round-robin fused list) and nDCG (`searchgrpo.env.metrics`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from searchgrpo.data.labels import Label, QuestionLabels
from searchgrpo.data.traces import SearchState
from searchgrpo.env.metrics import ndcg, recall_at_budget
from searchgrpo.env.search_round import SearchRoundEnv, StepResult
from searchgrpo.policy.sampling import Completion, generate


def undiscovered_important(state: SearchState, labels: QuestionLabels | None) -> set[str]:
    """The question's IMPORTANT docids (by the data) that the state has not discovered yet."""
    return set() if labels is None else labels.important - state.discovered


@dataclass(frozen=True)
class ScoredSample:
    """One clue set for one state, with what it found."""

    completion: Completion
    result: StepResult
    found: int
    """Undiscovered IMPORTANT documents (by the data's labels) this clue set retrieved."""
    wanted: int
    """Undiscovered IMPORTANT documents there were."""
    ndcg: float
    recall_at: dict[int, float]
    """Recall at each document budget B: wanted documents among the first B of the fused list."""


@dataclass(frozen=True)
class ScoredState:
    state: SearchState
    samples: list[ScoredSample]


def measure(
    state: SearchState,
    completion: Completion,
    result: StepResult,
    labels: QuestionLabels | None,
    budgets: Sequence[int] = (),
) -> ScoredSample:
    wanted = undiscovered_important(state, labels)
    found = {d.docid for d in result.docs if d.new and d.label is Label.IMPORTANT} & wanted
    ranking = [d.docid for d in result.docs]  # the environment reports them in fused order
    return ScoredSample(
        completion,
        result,
        len(found),
        len(wanted),
        ndcg(ranking, wanted),
        {b: recall_at_budget(ranking, wanted, b) for b in budgets},
    )


def score_policy(
    model: Any,
    tokenizer: Any,
    env: SearchRoundEnv,
    states: Sequence[SearchState],
    prompts: Sequence[list[int]],
    labels: dict[str, QuestionLabels],
    *,
    max_new_tokens: int,
    device: Any,
    batch_size: int = 8,
    num_samples: int = 1,
    temperature: float = 1.0,
    budgets: Sequence[int] = (),
    progress: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
) -> list[ScoredState]:
    """Clues for every state (greedy when num_samples == 1), run through `env`; `progress(done,
    total)` after each batch; `stop` is checked before every decode step (JobCancelled)."""
    greedy = num_samples == 1
    per_call = max(1, batch_size // num_samples)
    out: list[ScoredState] = []
    for start in range(0, len(states), per_call):
        chunk = list(range(start, min(start + per_call, len(states))))
        groups = generate(
            model,
            tokenizer,
            [prompts[i] for i in chunk],
            num_samples=num_samples,
            max_new_tokens=max_new_tokens,
            greedy=greedy,
            temperature=temperature,
            device=device,
            stop=stop,
        )
        for i, group in zip(chunk, groups):
            state = states[i]
            results = env.score_group(state, [c.text for c in group], [c.truncated for c in group])
            q_labels = labels.get(state.question_id)
            out.append(ScoredState(state, [measure(state, c, r, q_labels, budgets) for c, r in zip(group, results)]))
        if progress is not None:
            progress(len(out), len(states))
    return out


def state_summary(st: ScoredState) -> dict[str, float]:
    """One state's numbers for `summarise` (plain JSON, so ranks can gather them)."""
    n = len(st.samples)
    row = {
        "reward": sum(s.result.reward.total for s in st.samples) / n,
        "found": float(sum(s.found for s in st.samples)),
        "wanted": float(sum(s.wanted for s in st.samples)),
        "new_important": sum(s.found for s in st.samples) / n,
        "clues": sum(len(s.result.clues) for s in st.samples) / n,
        "docs": sum(len(s.result.docs) for s in st.samples) / n,
    }
    if st.samples[0].wanted:
        for b in st.samples[0].recall_at:
            row[f"recall_at_{b}"] = sum(s.recall_at[b] for s in st.samples) / n
    return row


def summarise(rows: Sequence[dict[str, float]], prefix: str = "eval/") -> dict[str, float]:
    """Means over states, the pooled IMPORTANT discovery rate, and the mean recall at each budget
    over the states with something to find, from `state_summary` rows."""
    n = max(len(rows), 1)
    wanted = sum(r["wanted"] for r in rows)
    out = {
        f"{prefix}states": float(len(rows)),
        f"{prefix}reward_mean": sum(r["reward"] for r in rows) / n,
        f"{prefix}important_discovery": sum(r["found"] for r in rows) / wanted if wanted else 0.0,
        f"{prefix}new_important_mean": sum(r["new_important"] for r in rows) / n,
        f"{prefix}clues_mean": sum(r["clues"] for r in rows) / n,
        f"{prefix}docs_mean": sum(r.get("docs", 0.0) for r in rows) / n,
    }
    for key in sorted({k for r in rows for k in r if k.startswith("recall_at_")}):
        values = [r[key] for r in rows if key in r]
        out[f"{prefix}{key}"] = sum(values) / len(values)
    return out
