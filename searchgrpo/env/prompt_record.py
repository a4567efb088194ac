"""The prompt a model was trained with, recorded beside it: in a run folder and in a merged model folder.

Two files: `prompt_template.jinja` (the template, byte for byte) and `prompt.json` (its SHA-256,
the clue format, and the sizes the prompt was rendered with: table rows, clue counts, prompt
tokens). `read_prompt_record` loads them back, checking the digest, so that a production system
renders its states exactly as training did:

    record = read_prompt_record("merged/Qwen3-8B-grpo-step500")
    messages = record.fitted(state, tokenizer)   # [{"role": "system", ...}, {"role": "user", ...}]
    clues = record.parse(completion_text)        # the clues, read in the format it asked for

(`state` is a `SearchState`; `searchgrpo.data.traces.parse_round` builds its tables from a round
file's JSON.) `fitted` cuts the tables to the recorded token budget as training did, with the
merged folder's tokenizer; `messages` renders them at the recorded table size.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.prompt_template import PromptTemplate, TemplateError, load_template
from searchgrpo.env.prompts import ParsedClues, parse_clues
from searchgrpo.errors import printable
from searchgrpo.fileio import atomic_write_bytes, atomic_write_json

TEMPLATE_FILE = "prompt_template.jinja"
INFO_FILE = "prompt.json"
RECORD_FORMAT = 1


@dataclass(frozen=True)
class PromptSizes:
    """What besides the template shapes a prompt: the config keys it was rendered with."""

    max_rows: int
    """data.max_table_rows"""
    min_clues: int
    """env.min_clues"""
    max_clues: int
    """env.max_clues"""
    max_prompt_tokens: int
    """grpo.max_prompt_tokens (tables are cut until the prompt fits)"""

    @classmethod
    def of(cls, cfg: Config) -> PromptSizes:
        return cls(cfg.data.max_table_rows, cfg.env.min_clues, cfg.env.max_clues, cfg.grpo.max_prompt_tokens)


def prompt_info(template: PromptTemplate, sizes: PromptSizes, source: str | None = None) -> dict[str, Any]:
    """What `prompt.json` holds (also merged into a merged model's `searchgrpo_merge.json`);
    `source`: the file the template first came from (default: where this copy was read)."""
    return {
        "format": RECORD_FORMAT,
        "template": TEMPLATE_FILE,
        "sha256": template.digest,
        "version": template.version,
        "builtin": template.is_default,
        "source": source or str(template.path),
        "clue_format": template.clue_format,
        "max_table_rows": sizes.max_rows,
        "min_clues": sizes.min_clues,
        "max_clues": sizes.max_clues,
        "max_prompt_tokens": sizes.max_prompt_tokens,
    }


def write_prompt_record(
    folder: Path, template: PromptTemplate, sizes: PromptSizes, source: str | None = None
) -> dict[str, Any]:
    """Write the template and `prompt.json` into `folder` (each file atomically); returns the info."""
    info = prompt_info(template, sizes, source)
    atomic_write_bytes(folder / TEMPLATE_FILE, template.text.encode("utf-8"))
    atomic_write_json(folder / INFO_FILE, info)
    return info


@dataclass(frozen=True)
class PromptRecord:
    """A recorded prompt, loaded: render states and read completions as the model was trained to."""

    template: PromptTemplate
    sizes: PromptSizes
    info: dict[str, Any]

    def messages(self, state: SearchState, max_rows: int | None = None) -> list[dict[str, str]]:
        """The chat messages for `state`, tables at the recorded size (or `max_rows`)."""
        s = self.sizes
        return self.template.messages(
            state, max_rows=max_rows or s.max_rows, min_clues=s.min_clues, max_clues=s.max_clues
        )

    def fitted(self, state: SearchState, tokenizer: Any) -> list[dict[str, str]]:
        """The chat messages for `state` as training fed them: tables halved (the most recent rows
        kept) until the chat-templated prompt fits the recorded max_prompt_tokens. (A prompt still
        too long at one row per table was cut in its middle in training; here it is returned whole.)"""
        rows = self.sizes.max_rows
        while True:
            messages = self.messages(state, rows)
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            ids = ids["input_ids"] if hasattr(ids, "keys") else ids
            if len(ids) <= self.sizes.max_prompt_tokens or rows == 1:
                return messages
            rows = max(1, rows // 2)

    def parse(self, completion: str) -> ParsedClues:
        """The clues of a completion, in the recorded clue format."""
        return parse_clues(completion, self.sizes.max_clues, self.template.clue_format)


def has_prompt_record(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / INFO_FILE).is_file()


def read_prompt_record(folder: str | os.PathLike[str]) -> PromptRecord:
    """The prompt recorded in `folder` (a run folder or a merged model folder); TemplateError in one
    line when it is missing, malformed, or the template's bytes no longer match the digest."""
    root = Path(folder)
    info_path, template_path = root / INFO_FILE, root / TEMPLATE_FILE
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TemplateError(
            f"{printable(root)}: no recorded prompt ({INFO_FILE}); it was written before prompts were recorded"
        ) from None
    except (OSError, ValueError) as exc:
        raise TemplateError(f"{printable(info_path)}: unreadable ({type(exc).__name__}: {exc})") from None
    try:
        sizes = PromptSizes(
            int(info["max_table_rows"]), int(info["min_clues"]), int(info["max_clues"]), int(info["max_prompt_tokens"])
        )
        digest, clue_format = str(info["sha256"]), str(info["clue_format"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TemplateError(f"{printable(info_path)}: malformed ({type(exc).__name__}: {exc})") from None
    template = load_template(template_path, clue_format)
    if template.digest != digest:
        raise TemplateError(
            f"{printable(template_path)}: its SHA-256 is {template.digest[:12]}…, but {INFO_FILE} records "
            f"{digest[:12]}…: the template was edited after it was recorded"
        )
    return PromptRecord(template, sizes, info)
