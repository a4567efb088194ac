"""The policy as the multi-agent system's Executor: `collect --executor policy`, `eval --episodes`
and the trainer's replay of training questions with its current adapter.

The clues come from the policy (with its LoRA adapter, or with it disabled: the base model), with
the very prompt training uses (`sampling.encode_prompt`), decoded greedily so that an episode is
deterministic. A round's requests are answered in batches of `batch_size` prompts (all at once for
the trainer's branch continuations, which batch every branch of a sampling round). If no clue can
be read from a completion, the rule-based Executor's clues are used for that round (counted in
`fallbacks`), so the episode can still search.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from searchgrpo.agents.rules import RuleExecutor
from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.prompts import parse_clues
from searchgrpo.policy.sampling import Prompts, generate

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


class PolicyExecutor:
    """Writes clues with the policy (see the module docstring)."""

    def __init__(
        self,
        cfg: Config,
        policy: Policy,
        *,
        use_adapter: bool = True,
        seed: int = 0,
        batch_size: int | None = None,
        decoder: str = "auto",
        dedupe: bool = False,
        stop: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
        self.stop = stop
        """Checked before every decode step (`eval --episodes` in the console): JobCancelled."""
        self.policy = policy
        self.use_adapter = use_adapter
        self.batch_size = batch_size
        """Prompts per generation call; None: `train.micro_batch_size`; 0: a round's requests all at once."""
        self.decoder = decoder
        self.dedupe = dedupe
        """Generate once for requests whose prompts are identical (greedy: the same clues), as the
        branches of one state often are after clue sets that found the same documents."""
        self.generated = 0
        """Prompts actually generated (fewer than `calls` where `dedupe` found identical ones)."""
        self.prompts = Prompts(policy.tokenizer, cfg)
        self.fallbacks = 0
        self.calls = 0
        self._rule = RuleExecutor(seed)

    @classmethod
    def base_model(cls, cfg: Config, seed: int = 0) -> PolicyExecutor:
        """The model training starts from (`model.base`, adapter disabled), loaded here."""
        from searchgrpo.policy.model import load_policy

        return cls(cfg, load_policy(cfg), use_adapter=False, seed=seed)

    def write_clues(self, requests: Sequence[Any]) -> list[list[str]]:
        """Clues for each `ClueRequest` (question_id, question, state, round_no) of a round."""
        cfg, policy = self.cfg, self.policy
        prompts = [
            self.prompts.encode(
                SearchState(
                    f"{r.question_id}/r{r.round_no:03d}", r.question_id, r.question, (), r.round_no, r.state, ()
                )
            )
            for r in requests
        ]
        unique = list(dict.fromkeys(tuple(p) for p in prompts)) if self.dedupe else [tuple(p) for p in prompts]
        generated: list[str] = []
        size = cfg.train.micro_batch_size if self.batch_size is None else self.batch_size or len(unique)
        step = max(size, 1)
        mode = contextlib.nullcontext() if self.use_adapter else policy.reference_mode()
        with mode:
            for at in range(0, len(unique), step):
                groups = generate(
                    policy.model,
                    policy.tokenizer,
                    [list(p) for p in unique[at : at + step]],
                    num_samples=1,
                    max_new_tokens=cfg.grpo.max_new_tokens,
                    greedy=True,
                    device=policy.device,
                    decoder=self.decoder,
                    stop=self.stop,
                )
                generated += [g[0].text for g in groups]
        text_of = dict(zip(unique, generated)) if self.dedupe else None
        texts = [text_of[tuple(p)] for p in prompts] if text_of is not None else generated
        self.calls += len(requests)
        self.generated += len(unique)
        out = []
        for r, text in zip(requests, texts):
            clues = list(parse_clues(text, cfg.env.max_clues, cfg.prompt.clue_format).clues)
            if not clues:
                self.fallbacks += 1
                clues = self._rule.clues(r.question_id, r.question, r.state, r.round_no)
            out.append(clues)
        return out
