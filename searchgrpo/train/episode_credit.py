"""Episode credit (`grpo.credit: episode`): pay each sampled clue set for what it sets up.

A training state stands before SEARCH round t. Each of its K sampled clue sets has been executed
by the environment (BM25, the checker, the reward): that is the branch's round t, whose outcome is
known. `branch_returns` turns every branch of a sampling round into an episode at round t
(`episodes.play.branch`, no new search or checker call for round t) and plays them all on for
`grpo.credit_horizon` rounds in one lockstep loop (`episodes.play.advance`, the loop of collect
and episode eval): the rule Planner (answering at `train.refresh_rounds`) and EntityManager, the
run's retriever and checker, and the current policy writing the later rounds' clues greedily
(`PolicyExecutor`, every branch of the turn in one generation call). Each branch's return
(`returns.branch_return`) then replaces its round reward as what the group's advantages are
computed on (`ScoredGroup.set_credit`); only round t's tokens are in the loss.

`EpisodeCredit` is the trainer's hook (`rollouts.finish_rollout(credit=...)`): it pays every
sampling round's groups before dynamic sampling judges them, times the continuations as
`time/continuation`, and reports per step (over every rank's sampled groups):

- `credit/own_value`, `credit/continuation_value`, `credit/return`: means over branches;
- `credit/continuation_rounds`: later rounds played per branch (fewer than the horizon when the
  Planner answered sooner);
- `credit/argmax_changed`: share of groups whose best samples by return are not those by own
  reward; `credit/reordered_groups`: share of groups with a pair ordered differently;
  `credit/discordant_pairs`: share of sample pairs ordered differently (`returns.ranking_change`);
- `credit/branches`: branches played on;
- `credit/generated_share`: the later rounds' clue requests actually generated: branches that
  stand at the same state (clue sets that found the same documents) ask with the same prompt,
  and greedy decoding answers them once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from searchgrpo.agents.checker import Verdict
from searchgrpo.agents.rules import RuleEntityManager, RulePlanner
from searchgrpo.config import Config
from searchgrpo.data.labels import Label
from searchgrpo.env.search_round import RetrievedDoc, SearchRoundEnv, StepResult
from searchgrpo.episodes.play import EntityManager, Episode, EpisodeStart, Executor, Planner, advance, branch
from searchgrpo.train.distributed import Dist
from searchgrpo.train.returns import BranchReturn, LaterRound, branch_return, ranking_change
from searchgrpo.train.rollouts import ScoredGroup
from searchgrpo.train.timing import Stopwatch

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


def own_finds(result: StepResult) -> float:
    """The round's paid finds: its weighted new IMPORTANT and RELEVANT documents."""
    w = result.reward.weighted
    return w.get("new_important", 0.0) + w.get("new_relevant", 0.0)


def start_branch(group: ScoredGroup, result: StepResult, env: SearchRoundEnv, horizon: int) -> Episode:
    """The episode of one sampled clue set: its state, its round as the environment scored it."""
    state, corpus = group.state, env.retriever.corpus
    start = EpisodeStart(state.question_id, state.question, state.answers, initial=state.before)
    fresh = [d for d in result.docs if d.new]
    return branch(
        start,
        state.round,
        result.clues,
        [d.docid for d in result.docs],
        [corpus.document(d.docid) for d in fresh],
        [_verdict(d) for d in fresh],
        rounds_after=horizon,
    )


def _verdict(doc: RetrievedDoc) -> Verdict:
    assert doc.label is not None, "episode credit judges every group (group_scoring.lazy_filter_of)"
    return Verdict(doc.label, doc.reason)


def later_rounds(episode: Episode, round_no: int) -> list[LaterRound]:
    """The rounds a branch played after its round `round_no`, as episode credit counts them."""
    return [
        LaterRound(
            r.round - round_no,
            sum(1 for v in r.verdicts if v == Label.IMPORTANT.value),
            sum(1 for v in r.verdicts if v == Label.RELEVANT.value),
            len(r.checked),
        )
        for r in episode.rounds
        if r.round > round_no
    ]


def branch_returns(
    groups: Sequence[ScoredGroup],
    *,
    env: SearchRoundEnv,
    executor: Executor,
    planner: Planner,
    entity_manager: EntityManager,
    horizon: int,
    gamma: float,
) -> list[list[BranchReturn]]:
    """Every sample's return, group by group: all branches played on together (see the module
    docstring)."""
    branches = [[start_branch(g, r, env, horizon) for r in g.results] for g in groups]
    advance(
        [e for per in branches for e in per],
        planner=planner,
        executor=executor,
        entity_manager=entity_manager,
        retriever=env.retriever,
        checker=env.checker,
        top_k=env.top_k,
    )
    w = env.reward.weights
    return [
        [
            branch_return(
                r.reward.total,
                own_finds(r),
                later_rounds(e, g.state.round),
                gamma=gamma,
                new_important=w["new_important"],
                new_relevant=w["new_relevant"],
                retrieved_doc=w["retrieved_doc"],
            )
            for r, e in zip(g.results, per)
        ]
        for g, per in zip(groups, branches)
    ]


class EpisodeCredit:
    """The trainer's episode-credit hook (see the module docstring)."""

    def __init__(
        self,
        cfg: Config,
        policy: Policy,
        env: SearchRoundEnv,
        *,
        executor: Executor | None = None,
        planner: Planner | None = None,
        entity_manager: EntityManager | None = None,
    ) -> None:
        from searchgrpo.policy.executor import PolicyExecutor

        self.cfg, self.env = cfg, env
        self.executor = executor or PolicyExecutor(
            cfg, policy, use_adapter=True, seed=cfg.train.seed, batch_size=0, decoder=cfg.grpo.decoder, dedupe=True
        )
        self.planner = planner or RulePlanner(cfg.train.refresh_rounds)
        self.entity_manager = entity_manager or RuleEntityManager()
        self._groups: list[list[list[float]]] = []
        self._asked = self._generated = 0

    def pay(self, groups: list[ScoredGroup], watch: Stopwatch | None = None) -> None:
        """Give `groups` (one sampling round's, this rank's) their branch returns."""
        if not groups:
            return
        calls, generated = getattr(self.executor, "calls", 0), getattr(self.executor, "generated", 0)
        with (watch or Stopwatch()).time("continuation"):
            returns = branch_returns(
                groups,
                env=self.env,
                executor=self.executor,
                planner=self.planner,
                entity_manager=self.entity_manager,
                horizon=self.cfg.grpo.credit_horizon,
                gamma=self.cfg.grpo.credit_gamma,
            )
        self._asked += getattr(self.executor, "calls", 0) - calls
        self._generated += getattr(self.executor, "generated", 0) - generated
        for g, rets in zip(groups, returns):
            g.set_credit(rets)
            self._groups.append([[b.own, b.continuation, float(b.rounds)] for b in rets])

    def step_metrics(self, dist: Dist | None = None) -> dict[str, float]:
        """The `credit/*` metrics of the groups paid since the last call, over every rank."""
        dist = dist or Dist()
        groups = [grp for part in dist.gather_json(self._groups) for grp in part]
        asked, generated = dist.sum([float(self._asked), float(self._generated)])
        self._groups, self._asked, self._generated = [], 0, 0
        metrics = credit_metrics(groups)
        if asked:
            metrics["credit/generated_share"] = generated / asked
        return metrics


def credit_metrics(groups: Sequence[Sequence[Sequence[float]]]) -> dict[str, float]:
    """The `credit/*` metrics from each group's [own, continuation, rounds] per sample.

    >>> m = credit_metrics([[[0.0, 0.8, 2], [0.0, 0.0, 2]], [[1.0, 0.0, 1], [0.5, 0.0, 2]]])
    >>> m["credit/argmax_changed"], m["credit/discordant_pairs"], m["credit/continuation_value"]
    (0.5, 0.5, 0.2)
    """
    branches = [b for g in groups for b in g]
    if not branches:
        return {}
    n = len(branches)
    changes = [ranking_change([b[0] for b in g], [b[0] + b[1] for b in g]) for g in groups]
    pairs = sum(c.pairs for c in changes)
    return {
        "credit/own_value": sum(b[0] for b in branches) / n,
        "credit/continuation_value": sum(b[1] for b in branches) / n,
        "credit/return": sum(b[0] + b[1] for b in branches) / n,
        "credit/continuation_rounds": sum(b[2] for b in branches) / n,
        "credit/argmax_changed": sum(c.argmax_changed for c in changes) / len(changes),
        "credit/reordered_groups": sum(c.discordant > 0 for c in changes) / len(changes),
        "credit/discordant_pairs": sum(c.discordant for c in changes) / pairs if pairs else 0.0,
        "credit/branches": float(n),
    }
