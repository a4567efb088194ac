"""A step's groups: sample K clue sets per state, score them, and keep the batch informative.

`collect_groups` samples and scores the step's states (one batched sampling call per round, one
deduplicated checker batch per group). With dynamic sampling (DAPO, `grpo.dynamic_sampling`) the
groups whose K rewards are all equal carry no gradient; they are replaced by groups of fresh
states (`refill`), over at most `grpo.dynamic_max_retries` extra rounds, until the step holds
`len(states)` informative groups. If it still falls short, zero-variance groups fill the batch,
so the batch always has the same number of groups (they cost nothing when beta = 0).

Under data parallelism every round is split across ranks (candidate i goes to rank i % world),
the zero-variance flags are gathered, and every rank makes the same choice from them, so N
processes pick the same batch as one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from searchgrpo.config import GRPOConfig
from searchgrpo.data.traces import SearchState
from searchgrpo.env.search_round import SearchRoundEnv, StepResult
from searchgrpo.policy.sampling import Completion, generate
from searchgrpo.train.distributed import Dist
from searchgrpo.train.grpo import ZERO_STD_TOL
from searchgrpo.train.timing import Stopwatch

Refill = Callable[[int, int, set[str]], list[SearchState]]
"""(attempt, n, state ids already in the step) -> up to n fresh states, the same on every rank."""


@dataclass
class ScoredGroup:
    """One state's K samples and what they scored."""

    key: tuple[int, int]
    """(sampling round, position in that round): the group's place in the step, on every rank."""
    state: SearchState
    prompt: list[int]
    completions: list[Completion]
    results: list[StepResult]
    zero_std: bool
    """All K rewards equal: the group has no learning signal."""
    in_batch: bool = True
    """Trained on; False for a zero-variance group that dynamic sampling replaced."""

    @property
    def rewards(self) -> list[float]:
        return [r.reward.total for r in self.results]


@dataclass
class Rollouts:
    """This rank's groups of the step and what dynamic sampling did (global counts)."""

    batch: list[ScoredGroup]
    """This rank's groups to train on, in step order."""
    sampled: list[ScoredGroup]
    """Every group this rank sampled (the batch and the replaced ones), in step order."""
    target: int
    """Groups in the step's batch, over all ranks."""
    stats: dict[str, float] = field(default_factory=dict)


def zero_variance(rewards: Sequence[float]) -> bool:
    """The same test as `group_advantages`: the rewards' spread is below ZERO_STD_TOL."""
    return max(rewards) - min(rewards) < ZERO_STD_TOL


def sample_and_score(g: GRPOConfig, policy: Any, env: SearchRoundEnv, states: Sequence[SearchState],
                     prompts: Sequence[list[int]], seeds: Sequence[int], round_no: int,
                     first_index: int = 0, stride: int = 1, watch: Stopwatch | None = None) -> list[ScoredGroup]:
    """K samples for each state in one sampling call (timed as `generate`), each group scored with
    one checker batch (timed as `score`)."""
    if not states:
        return []
    watch = watch or Stopwatch()
    with watch.time("generate"):
        groups = generate(
            policy.model, policy.tokenizer, list(prompts), num_samples=g.num_generations,
            max_new_tokens=g.max_new_tokens, temperature=g.temperature, top_p=g.top_p, device=policy.device,
            seeds=list(seeds), decoder=g.decoder,
        )
    out = []
    with watch.time("score"):
        for j, (state, prompt, group) in enumerate(zip(states, prompts, groups)):
            results = env.score_group(state, [c.text for c in group], [c.truncated for c in group])
            out.append(ScoredGroup((round_no, first_index + j * stride), state, list(prompt), list(group), results,
                                   zero_variance([r.reward.total for r in results])))
    return out


def collect_groups(
    g: GRPOConfig,
    policy: Any,
    env: SearchRoundEnv,
    states: Sequence[SearchState],
    *,
    prompt_of: Callable[[SearchState], list[int]],
    seed_of: Callable[[SearchState, int], int],
    refill: Refill | None = None,
    dist: Dist | None = None,
    watch: Stopwatch | None = None,
) -> Rollouts:
    """Sample and score the step's `states` (all ranks' states, in step order); see the module
    docstring. `seed_of(state, round)` seeds a group's sampling."""
    dist = dist or Dist()
    target = len(states)
    candidates = list(states)
    sampled: list[ScoredGroup] = []
    flags: dict[tuple[int, int], bool] = {}  # every rank's groups: key -> zero variance
    seen = {s.state_id for s in states}
    round_no = 0
    while candidates:
        mine = list(range(dist.rank, len(candidates), dist.world))
        picked = [candidates[i] for i in mine]
        groups = sample_and_score(g, policy, env, picked, [prompt_of(s) for s in picked],
                                  [seed_of(s, round_no) for s in picked], round_no, dist.rank, dist.world, watch)
        sampled.extend(groups)
        for part in dist.gather_json([[list(x.key), x.zero_std] for x in groups]):
            flags.update({tuple(key): bool(zero) for key, zero in part})
        informative = sum(1 for zero in flags.values() if not zero)
        need = target - informative
        if not g.dynamic_sampling or refill is None or need <= 0 or round_no >= g.dynamic_max_retries:
            break
        round_no += 1
        # Draw enough for the informative share seen so far, within 4x what is missing.
        rate = max(informative / len(flags), 0.25)
        candidates = refill(round_no, min(math.ceil(need / rate), 4 * need), seen)
        seen.update(s.state_id for s in candidates)

    chosen = choose_batch(flags, target)
    for x in sampled:
        x.in_batch = x.key in chosen
    sampled.sort(key=lambda x: x.key)
    batch = [x for x in sampled if x.in_batch]
    zero_sampled = sum(flags.values())
    stats = {
        "dynamic/sampled_groups": float(len(flags)),
        "dynamic/replaced_groups": float(sum(1 for k, zero in flags.items() if zero and k not in chosen)),
        "dynamic/rounds": float(round_no + 1),
        "dynamic/frac_zero_std_sampled": zero_sampled / len(flags) if flags else 0.0,
    }
    return Rollouts(batch, sampled, target, stats)


def choose_batch(flags: dict[tuple[int, int], bool], target: int) -> set[tuple[int, int]]:
    """The step's batch: the first `target` informative groups in step order, then zero-variance
    groups (first sampled first) if too few were informative.

    >>> sorted(choose_batch({(0, 0): True, (0, 1): False, (1, 0): False, (1, 1): False}, 2))
    [(0, 1), (1, 0)]
    >>> sorted(choose_batch({(0, 0): True, (0, 1): False, (1, 0): True}, 2))
    [(0, 0), (0, 1)]
    """
    order = sorted(flags)
    informative = [k for k in order if not flags[k]][:target]
    fill = [k for k in order if flags[k]][: target - len(informative)]
    return set(informative + fill)
