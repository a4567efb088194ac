"""`searchgrpo merge`: LoRA checkpoints merged into full models that transformers and vLLM load.

For each checkpoint: load the base unquantised on the CPU (never 4-bit: merging into 4-bit weights
is lossy) in the output dtype (16-bit by default) with the adapter applied at run time, and record
the reference: its greedy continuation of a few probe prompts and the scores it gives them. Then
merge (W + scale * B @ A, computed in float32 and rounded once to the output dtype), save
safetensors, config, generation config and tokenizer into a temporary folder, reload that folder,
and check parity (`export/parity.py`: the merged model against the unmerged adapter model in the
same dtype, with tolerances set from measured rounding). Only a folder that passes is renamed to
`{output_dir}/{base_name}-grpo-step{N}/`; a failure deletes it, says why and names the remedy, and
the next checkpoint is merged; the job ends with every folder written and every merge refused.

Each merged folder also holds the prompt its checkpoint was trained with (`prompt_template.jinja`
and `prompt.json`, also under "prompt" in `searchgrpo_merge.json`; see `export.merged_prompt`), so
the model is served with the prompt it learned on.

Before any weight loads, `run_merge` checks the output folder (it must be a folder this process can
write: not a file, not on a read-only file system), removes the temporaries of merges that were
killed (their writer's pid is gone), and checks that each adapter fits the base: every adapted
layer exists in the base with the shapes its LoRA matrices need, read from the safetensors
headers alone (`policy.model_files.adapter_fit`, which eval uses too), and that the checkpoint was
trained on `model.base` (`checkpoint_adapter`): a wrong base is refused there, not by parity.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgrpo.config import Config
from searchgrpo.env.prompt_record import write_prompt_record
from searchgrpo.env.prompt_template import load_template
from searchgrpo.errors import UserError
from searchgrpo.events import MERGE_STAGES, EventSink, LogMessage, MergeFinished, MergeProgress, MergeStarted
from searchgrpo.export.merged_prompt import MergePrompt, merge_prompt
from searchgrpo.export.parity import (
    PROBE_STATES,
    TOLERANCES,
    MergeCancelled,
    ParityError,
    check_stop,
    greedy_continuations,
    parity_figures,
    remedy,
    teacher_forced,
)
from searchgrpo.fileio import OutputKind, atomic_dir, claim_output, remove_stale_temporaries
from searchgrpo.policy.model_files import adapter_fit, load_pretrained_checked
from searchgrpo.train.checkpoints import STATE_FILE, checkpoint_adapter, list_checkpoints

STAGES = MERGE_STAGES
MERGE_INFO = "searchgrpo_merge.json"
"""Written into every merged model folder: how it was merged and its parity figures."""
MERGED_MODEL = OutputKind("merged model folder", "--output-dir", folder=True, ours=lambda p: (p / MERGE_INFO).is_file())
"""A merged model folder: one of ours is replaced only with --overwrite; any other folder never."""
MERGED_MODELS_ROOT = OutputKind(
    "folder for merged models", "--output-dir", folder=True, ours=lambda p: True, reused=True
)
"""The folder the merged models go into (it may hold anything else: only our own folders in it are replaced)."""


class OutputExists(UserError):
    """Merged folders already exist; `paths` names them. Pass overwrite=True to replace them."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        super().__init__(
            f"{self.paths[0]} already exists{' (and ' + str(len(paths) - 1) + ' more)' if len(paths) > 1 else ''}; "
            "pass --overwrite to replace it"
        )


class MergesRefused(ParityError):
    """Some merges failed their parity check (the others were written): `outputs` lists the
    folders written, `refused` each refused merge's checkpoint, output and reason."""

    def __init__(self, outputs: Sequence[str], refused: Sequence[dict[str, Any]], planned: int) -> None:
        self.outputs, self.refused = list(outputs), list(refused)
        first = self.refused[0]["reason"]
        head = f"{len(self.refused)} of {planned} merges refused" if planned > 1 else "merge refused"
        written = f"; {len(self.outputs)} written" if self.outputs else ""
        super().__init__(f"{head}{written}: {first}" + (" (and more above)" if len(self.refused) > 1 else ""))


@dataclass(frozen=True)
class MergeRequest:
    """What to merge and where: the one request type of `searchgrpo merge` and the console's Merge tab."""

    checkpoints: list[str] = field(default_factory=list)
    """Checkpoint folders (`runs/<id>/checkpoints/step-N`); empty: every checkpoint of run_dir."""
    output_dir: str = "merged"
    """Where the `{base_name}-grpo-step{N}/` folders go."""
    overwrite: bool = False
    """Replace merged model folders of ours that are already there (never any other folder)."""
    run_dir: str | None = None
    """The run whose checkpoints are discovered when `checkpoints` is empty (default: the newest run)."""
    device: str = "cpu"
    """Where to merge; the CPU avoids running out of GPU memory on large models."""
    dtype: str = "bfloat16"
    """Output dtype: bfloat16 or float16 (16-bit, as vLLM serves), or float32."""


@dataclass(frozen=True)
class MergeJob:
    checkpoint: Path
    step: int
    output: Path


def _step_of(path: Path) -> int:
    state = path / STATE_FILE
    if state.is_file():
        try:
            return int(json.loads(state.read_text())["step"])
        except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: "step": 1e999
            pass
    m = re.search(r"(\d+)$", path.name)
    if not m:
        raise UserError(f"{path}: cannot tell the step of this checkpoint (no trainer_state.json, no step-N name)")
    return int(m.group(1))


def plan(cfg: Config, request: MergeRequest, base_name: str) -> list[MergeJob]:
    """The checkpoints to merge and their output folders; refuses existing outputs unless overwrite."""
    if request.dtype not in TOLERANCES:
        raise UserError(f"--dtype {request.dtype}: expected one of {', '.join(TOLERANCES)}")
    if request.checkpoints:
        paths = [Path(p) for p in request.checkpoints]
    else:
        if not request.run_dir:
            raise UserError("nothing to merge: give --checkpoint or --run-dir")
        run_dir = Path(request.run_dir)
        paths = [c.path for c in list_checkpoints(run_dir)]
        if not paths:
            raise UserError(f"{run_dir}: no complete checkpoints to merge")
    jobs = []
    for p in paths:
        checkpoint_adapter(p, cfg.model.base, flag="merge")
        step = _step_of(p)
        jobs.append(MergeJob(p, step, Path(request.output_dir) / f"{base_name}-grpo-step{step}"))
    for job in jobs:  # what is there and is not a merged model is refused, whatever --overwrite says
        if os.path.lexists(job.output):
            claim_output(job.output, MERGED_MODEL, overwrite=True)
    existing = [str(j.output) for j in jobs if j.output.exists()]
    if existing and not request.overwrite:
        raise OutputExists(existing)
    return jobs


def run_merge(
    cfg: Config, request: MergeRequest, sink: EventSink | None = None, stop: threading.Event | None = None
) -> list[Path]:
    """Merge every planned checkpoint (see the module docstring); returns the output folders.

    A merge that fails its parity check is reported (a `LogMessage` naming its remedy) and the
    next checkpoint is merged; at the end `MergeFinished` lists every folder written and every
    merge refused, and `MergesRefused` is raised if any was. `stop` (the console's `q`, a Ctrl-C
    handler) ends the job between stages and between probe tokens: the folders finished so far
    stay, the one in progress is not written (`MergeCancelled`)."""
    from searchgrpo.policy.model import load_tokenizer, resolve_base

    sink = sink or (lambda e: None)
    output_dir = writable_output(Path(request.output_dir))
    for leftover in remove_stale_temporaries(output_dir, only_dead=True):
        sink(LogMessage("warning", f"removed {leftover}, left by a merge that was killed"))
    base = resolve_base(cfg)
    jobs = plan(cfg, request, base.name)
    for job in jobs:
        adapter_fit(job.checkpoint / "adapter", base.path)
    sink(MergeStarted([str(j.checkpoint) for j in jobs], request.output_dir))
    prompts = {job.checkpoint: merge_prompt(cfg, job.checkpoint) for job in jobs}
    for note in dict.fromkeys(p.note for p in prompts.values() if p.note):
        sink(LogMessage("warning", note))
    tokenizer = load_tokenizer(base.path)
    probe = _probe_prompts(cfg, tokenizer)
    outputs: list[Path] = []
    parity: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for job in jobs:
        check_stop(stop, f"the merge of {job.checkpoint.name} (not started)")
        try:
            figures = merge_one(base.path, tokenizer, job, probe, request, sink, prompts[job.checkpoint], stop)
        except ParityError as exc:
            refused.append({"checkpoint": str(job.checkpoint), "output": str(job.output), "reason": str(exc)})
            sink(MergeProgress(str(job.checkpoint), "refused", len(STAGES), len(STAGES)))
            sink(LogMessage("warning", f"refused: {exc}"))  # the job goes on with the next checkpoint
            continue
        except MergeCancelled as exc:
            kept = ", ".join(str(p) for p in outputs) or "none"
            raise MergeCancelled(f"{exc}; merged folders kept: {kept}") from None
        outputs.append(job.output)
        parity.append({"output": str(job.output), **figures})
        sink(MergeProgress(str(job.checkpoint), "done", len(STAGES), len(STAGES)))
    sink(MergeFinished([str(p) for p in outputs], parity, refused))
    if refused:
        raise MergesRefused([str(p) for p in outputs], refused, len(jobs))
    return outputs


def writable_output(folder: Path) -> Path:
    """`folder`, created if missing, once a probe shows this process can write into it; else one
    line naming it and why (a file in the way, a read-only file system, no permission)."""
    claim_output(folder, MERGED_MODELS_ROOT)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tempfile.mkdtemp(prefix=".write-probe-", dir=folder))
    except OSError as exc:
        raise UserError(
            f"--output-dir {folder}: cannot write there ({exc.strerror or exc}); give a writable folder"
        ) from None
    return folder


def _probe_prompts(cfg: Config, tokenizer: Any) -> list[list[int]]:
    """A few real Executor prompts from the data (the parity probe)."""
    from searchgrpo.policy.sampling import encode_prompt
    from searchgrpo.world import load_dataset

    ds = load_dataset(cfg)
    states = (ds.eval or ds.train)[:PROBE_STATES]
    template = load_template(cfg.prompt.template, cfg.prompt.clue_format)
    return [
        encode_prompt(
            tokenizer,
            s,
            max_rows=min(cfg.data.max_table_rows, 6),
            max_tokens=512,
            min_clues=cfg.env.min_clues,
            max_clues=cfg.env.max_clues,
            template=template,
        )
        for s in states
    ]


def merge_one(
    base_path: Path,
    tokenizer: Any,
    job: MergeJob,
    probe: list[list[int]],
    request: MergeRequest,
    sink: EventSink,
    prompt: MergePrompt | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Merge one checkpoint into `job.output` if it passes the parity check; returns its figures."""
    import torch

    from searchgrpo.policy.sampling import stop_token_ids

    name = str(job.checkpoint)

    def progress(stage: str) -> None:
        check_stop(stop, f"the merge of {job.checkpoint.name} ({stage})")
        sink(MergeProgress(name, stage, STAGES.index(stage), len(STAGES)))

    dtype = getattr(torch, request.dtype)
    progress("load")
    model = load_adapter_model(base_path, job.checkpoint / "adapter", dtype, request.device)
    progress("reference")
    continuations = greedy_continuations(model, probe, set(stop_token_ids(model, tokenizer)), stop)
    reference = teacher_forced(model, probe, continuations, stop)
    progress("merge")
    merged = model.merge_and_unload().to("cpu")  # W + scale * B @ A in float32, rounded once to dtype
    with atomic_dir(job.output, overwrite=request.overwrite) as tmp:
        progress("save")
        merged.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        # The prompt the checkpoint was trained with, so the model is served with it (`merged_prompt`).
        prompt_json = write_prompt_record(tmp, prompt.template, prompt.sizes, prompt.source) if prompt else None
        del merged, model
        progress("parity")
        reloaded = load_pretrained_checked(tmp, "the merged model", dtype=dtype).to(request.device)
        reloaded.eval()
        figures = parity_figures(reference, teacher_forced(reloaded, probe, continuations, stop), request.dtype)
        (tmp / MERGE_INFO).write_text(
            json.dumps(
                {
                    "checkpoint": str(job.checkpoint),
                    "step": job.step,
                    "base": str(base_path),
                    "dtype": request.dtype,
                    "parity": figures,
                    "prompt": prompt_json,
                },
                indent=2,
            )
        )
        if not figures["passed"]:
            raise ParityError(
                f"{job.output}: parity check failed against base + adapter in {request.dtype} "
                f"({figures['reason']}); nothing was written. Remedy: {remedy(figures)}"
            )
    return figures


def load_adapter_model(base_path: Path, adapter: Path, dtype: Any, device: str) -> Any:
    """The unmerged adapter model as it runs in `dtype`: the base's weights in `dtype` (never 4-bit)
    with the adapter applied at run time by PEFT (its matrices kept in float32, so that merging
    computes W + scale * B @ A in float32 and rounds it once)."""
    from peft import PeftModel

    model = load_pretrained_checked(base_path, "model.base", dtype=dtype).to(device)
    model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    return model
