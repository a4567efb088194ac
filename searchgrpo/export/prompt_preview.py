"""`searchgrpo prompt`: the Executor's prompt for states of the data, as training renders it.

So that a user can check, before training, that the prompt is their production system's: the
configured template (`prompt.template`), or the prompt recorded in a run or merged model folder
(`--from`), rendered for the states picked by id or the first N (states in id order). With the
tokenizer (`tokens=True`) the prompt is the one training feeds the model: the chat template
applied, tables cut until it fits `grpo.max_prompt_tokens`, with its token count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.prompt_record import PromptSizes, read_prompt_record
from searchgrpo.env.prompt_template import PromptTemplate, load_template
from searchgrpo.errors import UserError, printable

SHOWN_IDS = 5


@dataclass(frozen=True)
class PromptPreview:
    """One state's prompt."""

    state_id: str
    messages: list[dict[str, str]]
    """The chat messages at the full table size (data.max_table_rows)."""
    chat_text: str | None = None
    """With the tokenizer: the whole prompt the model sees (chat template applied, tables cut to fit)."""
    tokens: int | None = None
    """With the tokenizer: its length in tokens."""


def prompt_source(cfg: Config, from_folder: str | Path | None) -> tuple[PromptTemplate, PromptSizes]:
    """The configured prompt, or the one recorded in `from_folder` (a run or merged model folder)."""
    if from_folder is None:
        return load_template(cfg.prompt.template, cfg.prompt.clue_format), PromptSizes.of(cfg)
    record = read_prompt_record(from_folder)
    return record.template, record.sizes


def pick_states(states: Sequence[SearchState], state_ids: Sequence[str], first: int) -> list[SearchState]:
    """The states named by id (in the order given), else the first `first` in id order."""
    ordered = sorted(states, key=lambda s: s.state_id)
    if not state_ids:
        return ordered[:first]
    by_id = {s.state_id: s for s in ordered}
    missing = [i for i in state_ids if i not in by_id]
    if missing:
        known = ", ".join(printable(s.state_id) for s in ordered[:SHOWN_IDS])
        raise UserError(
            f"--state {printable(missing[0])}: no such state in the data ({len(ordered)} states; the first: {known})"
        )
    return [by_id[i] for i in state_ids]


def preview(
    cfg: Config,
    *,
    state_ids: Sequence[str] = (),
    first: int = 1,
    from_folder: str | Path | None = None,
    tokens: bool = False,
) -> tuple[PromptTemplate, list[PromptPreview]]:
    """The prompt's template and each picked state's prompt (see the module docstring)."""
    from searchgrpo.world import load_dataset

    template, sizes = prompt_source(cfg, from_folder)
    ds = load_dataset(cfg)
    states = pick_states([*ds.train, *ds.eval], state_ids, first)
    tokenizer = None
    if tokens:
        from searchgrpo.policy.model import load_tokenizer, resolve_base

        tokenizer = load_tokenizer(resolve_base(cfg).path)
    out = []
    for state in states:
        messages = template.messages(
            state, max_rows=sizes.max_rows, min_clues=sizes.min_clues, max_clues=sizes.max_clues
        )
        if tokenizer is None:
            out.append(PromptPreview(state.state_id, messages))
            continue
        from searchgrpo.policy.sampling import encode_prompt

        ids = encode_prompt(
            tokenizer,
            state,
            max_rows=sizes.max_rows,
            max_tokens=sizes.max_prompt_tokens,
            min_clues=sizes.min_clues,
            max_clues=sizes.max_clues,
            template=template,
        )
        out.append(PromptPreview(state.state_id, messages, tokenizer.decode(ids), len(ids)))
    return template, out
