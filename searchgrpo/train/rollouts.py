"""A step's groups: sample K clue sets per state, score them, and keep the batch informative.

`collect_groups` samples and scores the step's states (one batched sampling call per round, one
deduplicated checker batch per group). With dynamic sampling (DAPO, `grpo.dynamic_sampling`) the
groups whose K rewards are all equal carry no gradient; they are replaced by groups of fresh
states (`refill`), over at most `grpo.dynamic_max_retries` extra rounds, until the step holds
`len(states)` informative groups. If it still falls short, the others fill the batch, so the
batch always has the same number of groups (zero-variance ones cost nothing when beta = 0). With
`grpo.dynamic_filter: finds`, a group whose clue sets all found the same worth of new documents
counts as uninformative too (its rewards differ only by costs and guards); such groups fill the
batch before zero-variance ones. Under episode credit (`grpo.credit: episode`, the `credit` hook)
each sampling round's groups are paid their branch returns before both tests judge them.

Under data parallelism every round is split across ranks (candidate i goes to rank i % world),
the groups' flags are gathered, and every rank makes the same choice from them, so N
processes pick the same batch as one.

Groups are scored by `group_scoring.score`, which judges lazily (`grpo.lazy_judging`): a group
whose usefulness cannot depend on the verdicts is scored without the checker, and judged here
only if it fills the batch. The step reports the documents sent to the checker
(`checker/requests`), those spent on groups the batch does not keep (`checker/requests_discarded`)
and those lazy judging never sent (`checker/requests_skipped`).

A step's rollout has two halves, so that the trainer can pipeline them (`train.pipeline`):
`start_rollout` samples the first round now and hands its scoring (BM25 and the checker) to a
thread, and `finish_rollout` waits for the scores, runs dynamic sampling's rounds and picks the
batch. Started one step ahead, the checker labels step t+1's documents while step t's loss runs;
those samples come from the weights of one update earlier, so their old log-probs are taken when
they are sampled (`keep_old`) and the PPO ratio corrects for the difference. `collect_groups` is
the two halves back to back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from searchgrpo.config import GRPOConfig
from searchgrpo.data.traces import SearchState
from searchgrpo.env.search_round import SearchRoundEnv, StepResult
from searchgrpo.policy.logprobs import sampling_logprobs
from searchgrpo.policy.sampling import Completion, generate
from searchgrpo.train.distributed import Dist
from searchgrpo.train.group_scoring import lazy_filter_of, score, score_one, zero_variance
from searchgrpo.train.scored_group import Rollouts, ScoredGroup
from searchgrpo.train.timing import Stopwatch

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy

Refill = Callable[[int, int, set[str]], list[SearchState]]
"""(attempt, n, state ids already in the step) -> up to n fresh states, the same on every rank."""
Credit = Callable[[list[ScoredGroup]], None]
"""Pays a sampling round's groups their episode returns (`ScoredGroup.set_credit`), in place."""


def sample(
    g: GRPOConfig,
    policy: Policy,
    prompts: Sequence[list[int]],
    seeds: Sequence[int],
    sampler: Any = None,
    watch: Stopwatch | None = None,
    keep_old: bool = False,
) -> tuple[list[list[Completion]], list[Any]]:
    """K samples per prompt in one sampling call (timed as `generate`; `sampler`, when given,
    samples instead of `generate` on the policy), and with `keep_old` each group's log-probs under
    the weights of now (timed as `old_logprobs`)."""
    watch = watch or Stopwatch()
    if not prompts:
        return [], []
    with watch.time("generate"):
        if sampler is not None:
            groups = sampler.sample(
                list(prompts),
                num_samples=g.num_generations,
                max_new_tokens=g.max_new_tokens,
                temperature=g.temperature,
                top_p=g.top_p,
                seeds=list(seeds),
            )
        else:
            groups = generate(
                policy.model,
                policy.tokenizer,
                list(prompts),
                num_samples=g.num_generations,
                max_new_tokens=g.max_new_tokens,
                temperature=g.temperature,
                top_p=g.top_p,
                device=policy.device,
                seeds=list(seeds),
                decoder=g.decoder,
            )
    old: list[Any] = [None] * len(groups)
    if keep_old:
        with watch.time("old_logprobs"):
            old = [
                sampling_logprobs(policy, p, [c.token_ids for c in grp], g.temperature)
                for p, grp in zip(prompts, groups)
            ]
    return groups, old


def scored_groups(
    round_no: int,
    first_index: int,
    stride: int,
    states: Sequence[SearchState],
    prompts: Sequence[list[int]],
    groups: Sequence[Sequence[Completion]],
    results: Sequence[list[StepResult]],
    old: Sequence[Any],
) -> list[ScoredGroup]:
    return [
        ScoredGroup(
            (round_no, first_index + j * stride),
            state,
            list(prompt),
            list(group),
            res,
            zero_variance([r.reward.total for r in res]),
            old_logp=o,
        )
        for j, (state, prompt, group, res, o) in enumerate(zip(states, prompts, groups, results, old))
    ]


def sample_and_score(
    g: GRPOConfig,
    policy: Policy,
    env: SearchRoundEnv,
    states: Sequence[SearchState],
    prompts: Sequence[list[int]],
    seeds: Sequence[int],
    round_no: int,
    first_index: int = 0,
    stride: int = 1,
    watch: Stopwatch | None = None,
    sampler: Any = None,
    keep_old: bool = False,
) -> list[ScoredGroup]:
    """One round: `sample`, then `score` (timed as `score`)."""
    watch = watch or Stopwatch()
    groups, old = sample(g, policy, prompts, seeds, sampler, watch, keep_old)
    with watch.time("score"):
        results = score(env, states, groups, lazy_filter_of(g))
    return scored_groups(round_no, first_index, stride, states, prompts, groups, results, old)


@dataclass
class PendingRollout:
    """A step's first round, sampled, its scores on their way (`start_rollout`)."""

    states: list[SearchState]
    """Every rank's states of the step, in step order."""
    picked: list[SearchState]
    """This rank's share of them."""
    prompts: list[list[int]]
    groups: list[list[Completion]]
    old: list[Any]
    results: Future[list[list[StepResult]]] | list[list[StepResult]]
    """The scores: a future while a thread computes them."""

    def settle(self) -> list[list[StepResult]]:
        """Wait until the scores are in (the environment may then be used by someone else); them."""
        if isinstance(self.results, Future):
            self.results = self.results.result()
        return self.results


def start_rollout(
    g: GRPOConfig,
    policy: Policy,
    env: SearchRoundEnv,
    states: Sequence[SearchState],
    *,
    prompt_of: Callable[[SearchState], list[int]],
    seed_of: Callable[[SearchState, int], int],
    dist: Dist | None = None,
    watch: Stopwatch | None = None,
    sampler: Any = None,
    scorer: Executor | None = None,
    keep_old: bool = False,
) -> PendingRollout:
    """Sample this rank's share of the step's first round now; score it on `scorer` (a thread) if
    given, else now. `keep_old`: keep the samples' log-probs under the weights of now."""
    dist = dist or Dist()
    watch = watch or Stopwatch()
    picked = [states[i] for i in range(dist.rank, len(states), dist.world)]
    prompts = [prompt_of(s) for s in picked]
    groups, old = sample(g, policy, prompts, [seed_of(s, 0) for s in picked], sampler, watch, keep_old)
    if scorer is not None:
        results: Future[list[list[StepResult]]] | list[list[StepResult]] = scorer.submit(
            score, env, picked, groups, lazy_filter_of(g)
        )
    else:
        with watch.time("score"):
            results = score(env, picked, groups, lazy_filter_of(g))
    return PendingRollout(list(states), picked, prompts, groups, old, results)


def finish_rollout(
    pending: PendingRollout,
    g: GRPOConfig,
    policy: Policy,
    env: SearchRoundEnv,
    *,
    prompt_of: Callable[[SearchState], list[int]],
    seed_of: Callable[[SearchState, int], int],
    refill: Refill | None = None,
    dist: Dist | None = None,
    watch: Stopwatch | None = None,
    sampler: Any = None,
    keep_old: bool = False,
    credit: Credit | None = None,
) -> Rollouts:
    """Wait for the first round's scores (timed as `score_wait` when they came from a thread), run
    dynamic sampling's rounds (`credit` pays each round's groups), and pick the batch; see the
    module docstring."""
    dist = dist or Dist()
    watch = watch or Stopwatch()
    if isinstance(pending.results, Future):
        with watch.time("score_wait"):
            pending.settle()
    target = len(pending.states)
    sampled = scored_groups(
        0, dist.rank, dist.world, pending.picked, pending.prompts, pending.groups, pending.settle(), pending.old
    )
    if credit is not None:
        credit(sampled)
    flags: dict[tuple[int, int], int] = {}  # every rank's groups: key -> usefulness (0 is informative)
    same_finds: dict[tuple[int, int], bool] = {}
    state_of: dict[tuple[int, int], str] = {}
    seen = {s.state_id for s in pending.states}
    groups, round_no = sampled, 0
    while True:
        mine = [[list(x.key), x.usefulness(g.dynamic_filter), x.same_finds, x.state.state_id] for x in groups]
        for part in dist.gather_json(mine):
            flags.update({tuple(key): int(flag) for key, flag, _, _ in part})
            same_finds.update({tuple(key): bool(same) for key, _, same, _ in part})
            state_of.update({tuple(key): state_id for key, _, _, state_id in part})
        informative = sum(1 for flag in flags.values() if flag == 0)
        need = target - informative
        if not g.dynamic_sampling or refill is None or need <= 0 or round_no >= g.dynamic_max_retries:
            break
        round_no += 1
        # Draw enough for the informative share seen so far, within 4x what is missing.
        rate = max(informative / len(flags), 0.25)
        candidates = refill(round_no, min(math.ceil(need / rate), 4 * need), seen)
        if not candidates:
            break
        seen.update(s.state_id for s in candidates)
        picked = [candidates[i] for i in range(dist.rank, len(candidates), dist.world)]
        groups = sample_and_score(
            g,
            policy,
            env,
            picked,
            [prompt_of(s) for s in picked],
            [seed_of(s, round_no) for s in picked],
            round_no,
            dist.rank,
            dist.world,
            watch,
            sampler,
            keep_old,
        )
        if credit is not None:
            credit(groups)
        sampled.extend(groups)

    chosen = choose_batch(flags, target)
    for x in sampled:
        x.in_batch = x.key in chosen
        if x.in_batch and not x.judged:  # deferred, yet it fills the batch: its rewards need verdicts
            with watch.time("score"):
                x.results = score_one(env, x.state, x.completions)
    sampled.sort(key=lambda x: x.key)
    batch = [x for x in sampled if x.in_batch]
    n = max(len(flags), 1)
    requests = dist.sum(
        [
            sum(x.documents for x in sampled if x.judged),
            sum(x.documents for x in sampled if x.judged and not x.in_batch),
            sum(x.documents for x in sampled if not x.judged),
        ]
    )
    stats = {
        "dynamic/sampled_groups": float(len(flags)),
        "dynamic/replaced_groups": float(sum(1 for k, flag in flags.items() if flag and k not in chosen)),
        "dynamic/rounds": float(round_no + 1),
        "dynamic/frac_zero_std_sampled": sum(1 for flag in flags.values() if flag == 2) / n,
        "dynamic/frac_same_finds_sampled": sum(same_finds.values()) / n,
        "dynamic/frac_uninformative_batch": sum(1 for k in chosen if flags[k]) / max(len(chosen), 1),
        "checker/requests": float(requests[0]),
        "checker/requests_discarded": float(requests[1]),
        "checker/requests_skipped": float(requests[2]),
    }
    return Rollouts(batch, sampled, target, stats, [(state_of[k], flags[k]) for k in sorted(flags)])


def collect_groups(
    g: GRPOConfig,
    policy: Policy,
    env: SearchRoundEnv,
    states: Sequence[SearchState],
    *,
    prompt_of: Callable[[SearchState], list[int]],
    seed_of: Callable[[SearchState, int], int],
    refill: Refill | None = None,
    dist: Dist | None = None,
    watch: Stopwatch | None = None,
    sampler: Any = None,
    credit: Credit | None = None,
) -> Rollouts:
    """Sample and score the step's `states` (all ranks' states, in step order) now: `start_rollout`
    then `finish_rollout`. `seed_of(state, round)` seeds a group's sampling."""
    pending = start_rollout(
        g, policy, env, states, prompt_of=prompt_of, seed_of=seed_of, dist=dist, watch=watch, sampler=sampler
    )
    return finish_rollout(
        pending,
        g,
        policy,
        env,
        prompt_of=prompt_of,
        seed_of=seed_of,
        refill=refill,
        dist=dist,
        watch=watch,
        sampler=sampler,
        credit=credit,
    )


def choose_batch(flags: dict[tuple[int, int], int], target: int) -> set[tuple[int, int]]:
    """The step's batch: the first `target` informative groups (flag 0) in step order, then, if too
    few were informative, the others by flag (1 before 2; see `ScoredGroup.usefulness`), first
    sampled first.

    >>> sorted(choose_batch({(0, 0): 2, (0, 1): 0, (1, 0): 0, (1, 1): 0}, 2))
    [(0, 1), (1, 0)]
    >>> sorted(choose_batch({(0, 0): 2, (0, 1): 0, (1, 0): 2}, 2))
    [(0, 0), (0, 1)]
    >>> sorted(choose_batch({(0, 0): 2, (0, 1): 0, (1, 0): 1}, 2))
    [(0, 1), (1, 0)]
    """
    return set(sorted(flags, key=lambda k: (flags[k], k))[:target])
