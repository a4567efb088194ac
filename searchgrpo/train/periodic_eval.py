"""The held-out evaluation a run makes as it trains (`train.eval_every`, and at the end).

Greedy clues of the current adapter for the first `train.eval_states` eval states, scored as
`eval` scores them (`policy.scoring`): each rank scores its share, and every rank gets the summary
of all of them (`summarise`: recall, recall at the `eval.budgets`, nDCG, reward).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from searchgrpo.config import Config
from searchgrpo.data.dataset import Dataset
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.policy.sampling import Prompts
from searchgrpo.policy.scoring import score_policy, state_summary, summarise
from searchgrpo.train.distributed import Dist

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


def evaluate_held_out(
    cfg: Config,
    policy: Policy,
    env: SearchRoundEnv,
    prompts: Prompts,
    dataset: Dataset,
    dist: Dist,
    progress: Callable[[int, int], None],
) -> dict[str, float] | None:
    """The summary of the eval states' scores, or None when there are no eval states."""
    states = dataset.eval[: cfg.train.eval_states] if cfg.train.eval_states else dataset.eval
    if not states:
        return None
    mine = dist.shard(states)
    scored = score_policy(
        policy.model,
        policy.tokenizer,
        env,
        mine,
        [prompts(s) for s in mine],
        dataset.labels,
        max_new_tokens=cfg.grpo.max_new_tokens,
        device=policy.device,
        batch_size=cfg.train.micro_batch_size,
        budgets=cfg.eval.budgets,
        progress=progress,
    )
    rows = [row for part in dist.gather_json([state_summary(s) for s in scored]) for row in part]
    return summarise(rows)
