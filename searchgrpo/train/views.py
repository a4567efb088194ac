"""The console's view of a scored group: the `GroupScored` event the trainer publishes per group.

Plain data only (no tensors): every sample's clues with each clue's share of the finds, reward
components, advantage (and under episode credit its return), the clue-text flags (cut at the
token limit, invented numbers) and the documents with their verdicts and snippets, so the console
can show why each clue set scored what it did. A document carries the checker's label
probabilities where it gives them; a group lazy judging never sent to the checker shows its
documents with an empty label.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from searchgrpo.events import DocView, GroupScored, SampleView, event_from_dict, event_to_dict
from searchgrpo.train.returns import BranchReturn
from searchgrpo.train.rollouts import ScoredGroup


def group_event(
    step: int, epoch: int, group: ScoredGroup, advantages: Sequence[float] | None, corpus: Any, snippet_chars: int
) -> GroupScored:
    """The event of one group; `advantages` None for a group left out of the batch (all 0)."""
    advantages = advantages if advantages is not None else [0.0] * len(group.results)
    samples = []
    credit: Sequence[BranchReturn | None] = group.credit or [None] * len(group.results)
    for i, (c, r, a, b) in enumerate(zip(group.completions, group.results, advantages, credit)):
        docs = [
            DocView(
                d.docid,
                d.title,
                corpus.get(d.docid).snippet(snippet_chars),
                d.label.value if d.label is not None else "",
                d.reason,
                d.new,
                d.clue_index,
                d.rank,
                list(d.probs) if d.probs is not None else None,
            )
            for d in r.docs
        ]
        samples.append(
            SampleView(
                i,
                c.text,
                list(r.clues),
                r.reward.total,
                float(a),
                r.reward.weighted,
                r.reward.counts,
                docs,
                r.parsed.unparsable,
                len(c.token_ids),
                r.truncated,
                list(r.invented),
                list(r.clue_credit.marginals),
                list(r.clue_credit.shares),
                b.total if b is not None else None,
                b.continuation if b is not None else None,
            )
        )
    rewards = [r.reward.total for r in group.results]
    state = group.state
    return GroupScored(
        step=step,
        epoch=epoch,
        state_id=state.state_id,
        question=state.question,
        round=state.round,
        samples=samples,
        reward_mean=statistics.fmean(rewards),
        reward_std=statistics.stdev(rewards) if len(rewards) > 1 else 0.0,
        zero_std=group.zero_std,
        original_clues=list(state.original_clues),
        in_batch=group.in_batch,
    )


def step_events(
    step: int,
    epoch: int,
    groups: Sequence[ScoredGroup],
    advantages: dict[tuple[int, int], list[float]],
    corpus: Any,
    snippet_chars: int,
    dist: Any,
) -> list[GroupScored]:
    """Every rank's groups of a step as events, in step order (gathered as JSON on every rank)."""
    mine = [group_event(step, epoch, g, advantages.get(g.key), corpus, snippet_chars) for g in groups]
    if not dist.enabled:
        return mine
    parts = dist.gather_json([[list(g.key), event_to_dict(e)] for g, e in zip(groups, mine)])
    return [event_from_dict(d) for _, d in sorted((tuple(k), d) for part in parts for k, d in part)]
