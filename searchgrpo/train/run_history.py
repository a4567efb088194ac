"""What a run ran under: its config history, and the checks that keep `--resume` honest.

Every start of a run (the first and each resume) appends one entry to
`runs/<id>/config_history.jsonl`: the step it started from, the whole config, the data's
fingerprints (`searchgrpo.data.fingerprint`), the keys that changed since the previous entry and
whether `--allow-changes` allowed them. `config.yaml` stays the config of the latest start.

On resume, `check_resume` compares the new config with what the run really ran: the last entry of
its history (`config.yaml` is a copy for people, which a hand edit changes; it is read only for runs
older than the history), and the LoRA rank with the newest checkpoint's own adapter_config.json
(weights of another rank cannot load, so that change is refused whatever --allow-changes says). A change to
anything that alters the optimisation (the model, the LoRA shape, K, the learning rate and
schedule, the reward, the data, the environment, the checker's labels, the step budget) is refused
unless the user passes `--allow-changes`; then it is recorded. Keys in `FREE_KEYS` (where and how
often to evaluate and save, devices and kernels, server addresses and timeouts) may change
freely. Data whose fingerprint differs from the run's last start is refused the same way.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from searchgrpo.config import Config, deep_update, upgrade_keys
from searchgrpo.errors import UserError
from searchgrpo.fileio import atomic_write_text
from searchgrpo.yaml_safe import safe_yaml

HISTORY_FILE = "config_history.jsonl"
FREE_KEYS = (
    "model.device",
    "model.gradient_checkpointing",
    "model.attn_implementation",
    "model.fused_norms",
    "lora.compute",
    "model.cache_dir",
    "paths.",
    "grpo.decoder",
    "train.micro_batch_size",
    "train.eval_every",
    "train.eval_states",
    "train.eval_at_start",
    "train.save_every",
    "train.keep_last",
    "train.output_dir",
    "train.run_name",
    "train.init_adapter",
    "train.report_to",
    "train.tracker_project",
    "train.tracker_timeout_s",
    "train.stop_on_judge_drift",
    "data.strict",
    "env.snippet_chars",
    "env.search_backend",
    "prompt.template",
    "retrieval.url",
    "retrieval.api_key_env",
    "retrieval.timeout_s",
    "retrieval.max_retries",
    "retrieval.retry_deadline_s",
    "retrieval.max_reply_bytes",
    "checker.server",
    "checker.api_key_env",
    "checker.max_concurrency",
    "checker.timeout_s",
    "checker.max_retries",
    "checker.retry_deadline_s",
    "checker.structured_output",
    "checker.cache",
    "checker.cache_path",
    "checker.server_threads",
    "checker.max_reply_bytes",
    "checker.max_unparsable_frac",
    "checker.min_calls_for_unparsable",
    "eval.",
)
"""Keys a resumed run may change without --allow-changes (a trailing dot: the whole section).
They change where and how the run computes, not what it optimises. (`prompt.template` names a file:
what the run optimises is the file's text, whose digest `check_prompt` compares instead.)"""
SHOWN_CHANGES = 4


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"grpo": {"beta": 0}} -> {"grpo.beta": 0}."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def is_free(key: str) -> bool:
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in FREE_KEYS)


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for every leaf that differs; a key missing on one side takes its value as None."""
    a, b = flatten(old), flatten(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def describe_changes(changes: list[tuple[str, Any, Any]]) -> str:
    shown = ", ".join(f"{k} {old!r} -> {new!r}" for k, old, new in changes[:SHOWN_CHANGES])
    more = f" (and {len(changes) - SHOWN_CHANGES} more)" if len(changes) > SHOWN_CHANGES else ""
    return shown + more


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    """The run's history entries, oldest first (unreadable lines are skipped)."""
    path = run_dir / HISTORY_FILE
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def append_history(
    run_dir: Path,
    *,
    step: int,
    config: dict[str, Any],
    data: dict[str, str],
    changes: list[tuple[str, Any, Any]],
    allowed: bool,
    train_questions: list[str] | None = None,
    prompt: dict[str, Any] | None = None,
) -> None:
    """Add one start to the history (the whole file rewritten atomically: never a torn line).
    `train_questions`: the ids of the questions this start trains on (an eval of its checkpoints
    tells from them whether its questions are held out). `prompt`: the prompt it renders states with
    (`prompt_record.prompt_info`; its digest is what `check_prompt` compares on resume)."""
    path = run_dir / HISTORY_FILE
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    entry = {
        "time": time.time(),
        "start_step": step,
        "config": config,
        "data": data,
        "changes": [{"key": k, "old": o, "new": n} for k, o, n in changes],
        "allowed_changes": allowed,
    }
    if train_questions is not None:
        entry["train_questions"] = sorted(train_questions)
    if prompt is not None:
        entry["prompt"] = prompt
    atomic_write_text(path, old + json.dumps(entry, ensure_ascii=False) + "\n")


def _over_defaults(data: object) -> dict[str, Any]:
    """A recorded config over today's defaults (renamed keys under their new names), so that keys
    added since read as their defaults, not as changes."""
    return deep_update(Config().to_dict(), upgrade_keys(data) if isinstance(data, dict) else {})


def config_file(run_dir: Path) -> dict[str, Any] | None:
    """The run's config.yaml over today's defaults; None when it has none."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        return None
    try:
        data = safe_yaml(path.read_text(encoding="utf-8"))
    except Exception:
        raise UserError(f"{path}: not valid YAML; the run's config cannot be compared with the new one") from None
    return _over_defaults(data)


def run_config(run_dir: Path) -> dict[str, Any] | None:
    """The config the run really last ran under: its history's last entry (config.yaml is only a
    copy, which a hand edit changes), or config.yaml for a run older than the history; None when
    it has neither."""
    history = read_history(run_dir)
    if history and isinstance(history[-1].get("config"), dict):
        return _over_defaults(history[-1]["config"])
    return config_file(run_dir)


def adapter_shape_changes(run_dir: Path, cfg: Config) -> list[tuple[str, Any, Any]]:
    """(key, the checkpoint's, the new) for each LoRA shape key the new config changes from what
    the run's newest checkpoint holds (its own adapter_config.json): weights of another shape
    cannot load, whatever --allow-changes says."""
    from searchgrpo.train.checkpoints import newest_usable

    newest = newest_usable(run_dir)
    if newest is None:
        return []
    try:
        recorded = json.loads((newest.adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(recorded, dict) or not isinstance(recorded.get("r"), int):
        return []
    return [("lora.r", recorded["r"], cfg.lora.r)] if recorded["r"] != cfg.lora.r else []


def check_resume(
    run_dir: Path, cfg: Config, data: dict[str, str], *, allow_changes: bool
) -> tuple[list[tuple[str, Any, Any]], list[str]]:
    """(every changed key, warnings) of resuming `run_dir` under `cfg` on data fingerprinted `data`.

    Raises a one-line UserError when something that alters the optimisation changed (a config key
    outside FREE_KEYS, or the data) and `allow_changes` is false.
    """
    shape = adapter_shape_changes(run_dir, cfg)
    if shape:
        key, before, after = shape[0]
        raise UserError(
            f"{run_dir}: {key} changed ({before} -> {after}): the run's checkpoints hold adapter weights of "
            f"rank {before}, which cannot be loaded at rank {after}; resume with --set {key}={before}, or "
            "start a new run"
        )
    old = run_config(run_dir)
    changes = changed_keys(old, cfg.to_dict()) if old is not None else []
    guarded = [c for c in changes if not is_free(c[0])]
    warnings: list[str] = []
    if guarded:
        what = describe_changes(guarded)
        edited = config_file(run_dir)
        note = (
            f" ({run_dir / 'config.yaml'} was edited after the run last started: the run ran what "
            f"{HISTORY_FILE} records)"
            if edited is not None and old is not None and any(not is_free(k) for k, _, _ in changed_keys(old, edited))
            else ""
        )
        if not allow_changes:
            raise UserError(
                f"{run_dir}: --resume would change what the run optimises: {what}{note}; resume without "
                "those changes, or pass --allow-changes to go on under the new config (recorded in "
                f"{HISTORY_FILE})"
            )
        warnings.append(f"resuming under a changed config (--allow-changes, recorded): {what}")
    history = read_history(run_dir)
    before = history[-1].get("data") if history else None
    if isinstance(before, dict) and before != data:
        which = " and ".join(k for k in data if before.get(k) != data[k]) or "data"
        where = (
            f"data.corpus = {cfg.data.corpus}, data.traces = {cfg.data.traces}" if cfg.data.corpus else "the demo world"
        )
        if not allow_changes:
            raise UserError(
                f"{run_dir}: the {which} changed since the run last started ({where}); resume on the "
                "same data, or pass --allow-changes to go on with the new data (recorded)"
            )
        warnings.append(
            f"resuming on changed data: the {which} changed since the run last started (--allow-changes, recorded)"
        )
    return changes, warnings


def check_prompt(run_dir: Path, digest: str, source: str, *, allow_changes: bool) -> list[str]:
    """Warnings of resuming `run_dir` with the prompt template whose SHA-256 is `digest` (read from
    `source`); a one-line UserError when the run last started with another template text and
    `allow_changes` is false. Runs older than recorded prompts are not compared."""
    history = read_history(run_dir)
    recorded = history[-1].get("prompt") if history else None
    before = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not isinstance(before, str) or before == digest:
        return []
    what = f"the prompt template changed ({before[:12]}… -> {digest[:12]}…, {source})"
    if not allow_changes:
        raise UserError(
            f"{run_dir}: {what} since the run last started; resume with the template the run recorded "
            f"({run_dir / 'prompt_template.jinja'}), or pass --allow-changes to go on with the new one (recorded)"
        )
    return [f"resuming with a changed prompt: {what} (--allow-changes, recorded)"]
