"""Episode credit's arithmetic (pure functions): a branch's return, and how it reorders a group.

Under `grpo.credit: episode` each of a state's K clue sets is a branch: its round t, then H more
rounds played on from it (`train/episode_credit.py`). Its return is

    return = r_t + sum_{j=1..H} gamma^j * (finds_{t+j} + retrieved_doc * checked_{t+j})

where r_t is the round's own reward (finds, the per-document cost and every guard: cut, copied,
invented, ...), finds_{t+j} = new_important * (new IMPORTANT documents) + new_relevant * (new
RELEVANT documents) of round t+j (the reward's weights; an EXTRACT or ANSWER round finds nothing
and costs nothing), and checked_{t+j} the documents that round sent to the checker, each costing
`reward.retrieved_doc` (a negative weight). A later round's whole value is discounted. The
**own value** is r_t, the **continuation value** the sum. The guards of later rounds' clues are
not counted: those clues are the current policy's greedy ones, not the sampled completion, whose
tokens alone get the gradient.

>>> later = [LaterRound(1), LaterRound(2, important=1, checked=5)]   # EXTRACT, then a SEARCH
>>> b = branch_return(-0.1, 0.0, later, gamma=0.5, new_important=1.0, new_relevant=0.2, retrieved_doc=-0.02)
>>> round(b.continuation, 6), round(b.total, 6), b.rounds
(0.225, 0.125, 2)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from searchgrpo.train.grpo import ZERO_STD_TOL


@dataclass(frozen=True)
class LaterRound:
    """One round played after the sampled one, as episode credit counts it."""

    offset: int
    """j: the round is t + j."""
    important: int = 0
    """New documents the checker called IMPORTANT."""
    relevant: int = 0
    """New documents the checker called RELEVANT."""
    checked: int = 0
    """Documents sent to the checker (each new to the episode)."""


@dataclass(frozen=True)
class BranchReturn:
    """One clue set's return under episode credit, and its parts."""

    own: float
    """r_t: the round's own reward."""
    continuation: float
    """The discounted value of the later rounds."""
    own_finds: float
    """The round's paid finds (new IMPORTANT and RELEVANT, weighted)."""
    continuation_finds: float
    """The later rounds' paid finds, discounted (no cost): with `own_finds`, what dynamic
    sampling's `finds` filter compares."""
    rounds: int = 0
    """Later rounds played (fewer than the horizon when the episode answered sooner)."""

    @property
    def total(self) -> float:
        """The return: what the group's advantages are computed on."""
        return round(self.own + self.continuation, 10)

    @property
    def finds(self) -> float:
        return round(self.own_finds + self.continuation_finds, 10)


def branch_return(
    own: float,
    own_finds: float,
    later: Sequence[LaterRound],
    *,
    gamma: float,
    new_important: float,
    new_relevant: float,
    retrieved_doc: float,
) -> BranchReturn:
    """The return of a branch whose round scored `own` (finding `own_finds`) and whose later rounds
    went as `later` (see the module docstring). Rounded to 10 decimals, as rewards are, so that
    equal outcomes give equal returns."""
    value = finds = 0.0
    for r in later:
        found = new_important * r.important + new_relevant * r.relevant
        value += gamma**r.offset * (found + retrieved_doc * r.checked)
        finds += gamma**r.offset * found
    return BranchReturn(own, round(value, 10) + 0.0, own_finds, round(finds, 10) + 0.0, len(later))


def _sign(x: float) -> int:
    return 0 if abs(x) < ZERO_STD_TOL else (1 if x > 0 else -1)


@dataclass(frozen=True)
class RankingChange:
    """How a group's order by return differs from its order by own reward."""

    argmax_changed: bool
    """The samples with the best return are not the samples with the best own reward."""
    discordant: int
    """Pairs the two orders rank differently (one ahead in one, behind or tied in the other, or
    tied in one and not the other)."""
    pairs: int
    """K (K - 1) / 2."""


def ranking_change(own: Sequence[float], returns: Sequence[float]) -> RankingChange:
    """Compare a group's order by own reward with its order by return (ties within ZERO_STD_TOL).

    >>> ranking_change([0.0, 0.0, 1.0], [0.5, 0.0, 1.0])   # a tie broken; the best stays the best
    RankingChange(argmax_changed=False, discordant=1, pairs=3)
    >>> ranking_change([0.0, 0.0], [0.8, 0.0]).argmax_changed   # the bridge now leads alone
    True
    """
    best_own, best_return = max(own), max(returns)
    top_own = {i for i, x in enumerate(own) if _sign(best_own - x) == 0}
    top_return = {i for i, x in enumerate(returns) if _sign(best_return - x) == 0}
    pairs = list(itertools.combinations(range(len(own)), 2))
    discordant = sum(1 for i, j in pairs if _sign(own[i] - own[j]) != _sign(returns[i] - returns[j]))
    return RankingChange(top_own != top_return, discordant, len(pairs))
