"""The Executor as the base policy, for `collect --executor policy`.

The clues come from the model that training starts from (`model.base`, adapter disabled), with the
very prompt training uses (`rollout.encode_prompt`), decoded greedily so that a collect is
deterministic. If no clue can be read from the completion, the rule-based Executor's clues are
used for that round (counted in `fallbacks`), so the run can still search.
"""

from __future__ import annotations

from typing import Any

from searchgrpo.agents.rules import RuleExecutor
from searchgrpo.config import Config
from searchgrpo.data.traces import RoundState, SearchState
from searchgrpo.env.prompts import parse_clues
from searchgrpo.policy.sampling import encode_prompt, generate


class PolicyExecutor:
    """Writes clues with the base policy (see the module docstring)."""

    def __init__(self, cfg: Config, policy: Any | None = None, seed: int = 0) -> None:
        if policy is None:
            from searchgrpo.policy.model import load_policy

            policy = load_policy(cfg)
        self.cfg = cfg
        self.policy = policy
        self.fallbacks = 0
        self._rule = RuleExecutor(seed)

    def clues(self, question_id: str, question: str, state: RoundState, round_no: int) -> list[str]:
        cfg, policy = self.cfg, self.policy
        search_state = SearchState(f"{question_id}/r{round_no:03d}", question_id, question, (), round_no, state, ())
        prompt = encode_prompt(policy.tokenizer, search_state, max_rows=cfg.data.max_table_rows,
                               max_tokens=cfg.grpo.max_prompt_tokens, min_clues=cfg.env.min_clues,
                               max_clues=cfg.env.max_clues)
        with policy.reference_mode():
            completion = generate(policy.model, policy.tokenizer, [prompt], num_samples=1,
                                  max_new_tokens=cfg.grpo.max_new_tokens, greedy=True, device=policy.device)[0][0]
        clues = list(parse_clues(completion.text, cfg.env.max_clues).clues)
        if not clues:
            self.fallbacks += 1
            return self._rule.clues(question_id, question, state, round_no)
        return clues
