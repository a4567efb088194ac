"""Which prompt a merged model records: the one its checkpoint's run trained with.

A run folder records its prompt (`env.prompt_record`: the template and the sizes it was rendered
with); a merge of one of its checkpoints copies that record into the merged folder, so the model
is served with the prompt it learned on, whatever `prompt.template` says at merge time (a
difference is reported). A checkpoint outside a run folder, or from a run older than recorded
prompts, gets the config's prompt, with a note saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from searchgrpo.config import Config
from searchgrpo.env.prompt_record import PromptSizes, has_prompt_record, read_prompt_record
from searchgrpo.env.prompt_template import PromptTemplate, load_template
from searchgrpo.errors import printable


@dataclass(frozen=True)
class MergePrompt:
    """The prompt a merged folder records, and why it is that one."""

    template: PromptTemplate
    sizes: PromptSizes
    source: str
    """The file the template first came from."""
    note: str = ""
    """A warning for the user ('' when the run's record and the config agree)."""


def checkpoint_run(checkpoint: Path) -> Path:
    """The run folder of a checkpoint `<run>/checkpoints/step-N`."""
    return checkpoint.resolve().parent.parent


def merge_prompt(cfg: Config, checkpoint: Path) -> MergePrompt:
    """The prompt to record with the merge of `checkpoint` (see the module docstring)."""
    configured = load_template(cfg.prompt.template, cfg.prompt.clue_format)
    run = checkpoint_run(checkpoint)
    if not has_prompt_record(run):
        return MergePrompt(
            configured,
            PromptSizes.of(cfg),
            str(configured.path),
            f"{printable(run)} recorded no prompt (a run from before prompts were recorded, or no run folder): "
            f"the merged model records the configured prompt ({configured.version}, {printable(configured.path)})",
        )
    record = read_prompt_record(run)
    note = ""
    if record.template.digest != configured.digest or record.template.clue_format != configured.clue_format:
        note = (
            f"the merged model records the prompt {printable(run)} trained with ({record.template.version}, "
            f"clue format {record.template.clue_format}), not the configured one ({configured.version}, "
            f"clue format {configured.clue_format})"
        )
    return MergePrompt(record.template, record.sizes, str(record.info.get("source", run)), note)
