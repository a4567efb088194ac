"""Scoring a policy on a set of states: the in-training evaluation (and the core of `eval`).

Each state gets greedy clues (or `num_samples` sampled ones) from the policy; they run through the
same environment as training. Metrics: mean reward and the IMPORTANT-document discovery rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from searchgrpo.agent_checkpoints import SearchState
from searchgrpo.checker import QuestionLabels
from searchgrpo.env import SearchRoundEnv, StepResult
from searchgrpo.metrics import discovery, discovery_rate
from searchgrpo.rollout import Completion, generate


@dataclass(frozen=True)
class ScoredState:
    state: SearchState
    completion: Completion
    result: StepResult
    found: int
    """Undiscovered IMPORTANT documents found."""
    wanted: int
    """Undiscovered IMPORTANT documents there were."""


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
    progress: Callable[[int, int], None] | None = None,
) -> list[ScoredState]:
    """Greedy clues for every state, run through `env`."""
    out: list[ScoredState] = []
    for start in range(0, len(states), batch_size):
        chunk = list(range(start, min(start + batch_size, len(states))))
        groups = generate(
            model, tokenizer, [prompts[i] for i in chunk], num_samples=1, max_new_tokens=max_new_tokens,
            greedy=True, device=device,
        )
        for i, group in zip(chunk, groups):
            state, completion = states[i], group[0]
            result = env.score_group(state, [completion.text])[0]
            found, wanted = discovery(state, result, labels.get(state.question_id))
            out.append(ScoredState(state, completion, result, found, wanted))
        if progress is not None:
            progress(len(out), len(states))
    return out


def summarise(scored: Sequence[ScoredState], prefix: str = "eval/") -> dict[str, float]:
    n = max(len(scored), 1)
    return {
        f"{prefix}states": float(len(scored)),
        f"{prefix}reward_mean": sum(s.result.reward.total for s in scored) / n,
        f"{prefix}important_discovery": discovery_rate((s.found, s.wanted) for s in scored),
        f"{prefix}new_important_mean": sum(s.found for s in scored) / n,
        f"{prefix}clues_mean": sum(len(s.result.clues) for s in scored) / n,
    }
