"""Model and adapter folders checked against what they claim, before and while their weights load.

- `safetensors_problem` / `check_safetensors`: a safetensors file is whole when its header reads
  and its tensors' data ends within the file; a truncated copy is one line naming the file.
- `load_pretrained_checked`: `AutoModelForCausalLM.from_pretrained` with transformers' loading
  info (`output_loading_info=True`): a folder whose config.json and weights disagree (a layer more
  in config.json, a tensor deleted, a tensor left over) is refused in one line instead of being
  used with random weights where its own are missing.
- `adapter_fit`: a LoRA adapter against its own adapter_config.json (rank, adapted modules) and
  against the base (every adapted layer exists with the shapes its matrices need), from the
  safetensors headers alone, so that eval and merge refuse an adapter of another model before
  any weight loads.
- `check_adapter_lora`: an adapter's rank, alpha and targets against the `lora` section, for
  `train.init_adapter` (peft would load it with its own).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgrpo.errors import UserError, one_line

if TYPE_CHECKING:
    from searchgrpo.config import LoraConfig

MAX_HEADER_BYTES = 100 * 1024 * 1024
"""The largest safetensors header the library itself reads."""
SHOWN_KEYS = 3


def safetensors_problem(path: Path) -> str:
    """Why `path` is not a whole safetensors file, or '' when it is (only its header is read)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than a safetensors header"
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES or 8 + length > size:
                return (
                    f"its header announces {length:,} bytes but the file holds {size:,}: truncated or not safetensors"
                )
            header = json.loads(fh.read(length))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except (ValueError, UnicodeDecodeError):
        return "its header is not valid JSON: damaged or not safetensors"
    if not isinstance(header, dict):
        return "its header is not a table of tensors"
    ends = [
        entry["data_offsets"][1]
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict) and isinstance(entry.get("data_offsets"), list)
    ]
    needed = 8 + length + max(ends, default=0)
    if needed > size:
        return f"truncated: its tensors end at byte {needed:,}, the file holds {size:,}"
    return ""


def check_safetensors(folder: Path, what: str) -> None:
    """One line (UserError) naming the first safetensors file of `folder` that is not whole."""
    for path in sorted(folder.glob("*.safetensors")):
        problem = safetensors_problem(path)
        if problem:
            raise UserError(f"{what}: {path}: {problem}; copy or write it again")


def loading_problems(info: dict[str, Any]) -> str:
    """transformers' loading info in words ('' when every weight was found and used)."""
    parts = []
    for key, words in (
        ("missing_keys", "missing (they would be random)"),
        ("unexpected_keys", "unexpected (in the files, not in config.json)"),
        ("mismatched_keys", "of another shape"),
    ):
        names = sorted(str(k[0] if isinstance(k, tuple) else k) for k in info.get(key) or ())
        if names:
            shown = ", ".join(repr(n) for n in names[:SHOWN_KEYS]) + (", ..." if len(names) > SHOWN_KEYS else "")
            parts.append(f"{len(names)} weights {words}: {shown}")
    return "; ".join(parts)


def load_pretrained_checked(path: Path, what: str, **kwargs: Any) -> Any:
    """`AutoModelForCausalLM.from_pretrained(path, **kwargs)`, refused in one line naming `what`
    (the setting that names the folder) when its files are damaged or disagree with config.json."""
    from transformers import AutoModelForCausalLM

    check_safetensors(path, what)
    try:
        # (model, info): transformers types from_pretrained as returning the model alone, which it
        # does without output_loading_info.
        loaded: Any = AutoModelForCausalLM.from_pretrained(str(path), output_loading_info=True, **kwargs)
        model, info = loaded
    except (OSError, ValueError, RuntimeError) as exc:
        raise UserError(f"{what}: {path} could not be loaded ({one_line(exc, 300)})") from None
    problems = loading_problems(info)
    if problems:
        raise UserError(
            f"{what}: {path}: its weights do not match its config.json ({problems}); was the folder edited "
            "after it was written, or is a file missing?"
        )
    return model


def _shapes(folder: Path) -> dict[str, list[int]]:
    """Tensor name -> shape of every safetensors file in `folder`, from their headers alone."""
    from safetensors import safe_open

    shapes: dict[str, list[int]] = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():  # noqa: SIM118 (safe_open has keys() but is not iterable)
                shapes[key] = list(st.get_slice(key).get_shape())
    return shapes


def adapter_config(adapter: Path) -> dict[str, Any]:
    """The adapter's adapter_config.json, or one clear line naming it when it cannot be read."""
    try:
        config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{adapter / 'adapter_config.json'}: cannot be read ({one_line(exc, 120)})") from None
    return config if isinstance(config, dict) else {}


def adapter_fit(adapter: Path, base: Path) -> None:
    """Raise a one-line UserError unless the LoRA adapter in `adapter` agrees with its own
    adapter_config.json (each lora_A has `r` rows; each adapted module is a target) and every LoRA
    pair fits a layer of the base model in `base`: the layer exists, lora_A is [r, in] and lora_B
    is [out, r] of its [out, in]."""
    where = adapter.parent if adapter.name == "adapter" else adapter
    for path in sorted(adapter.glob("*.safetensors")):
        problem = safetensors_problem(path)
        if problem:
            raise UserError(f"{where}: {path.name}: {problem}")
    check_safetensors(base, "model.base")
    try:
        lora, weights = _shapes(adapter), _shapes(base)
    except Exception as exc:  # a damaged header
        raise UserError(
            f"{where}: cannot read the adapter or base model's tensor headers ({one_line(exc, 160)})"
        ) from None
    config = adapter_config(adapter)
    rank = config.get("r")
    patterns = config.get("rank_pattern") or {}
    targets = config.get("target_modules")
    for key, shape in sorted(lora.items()):
        m = re.fullmatch(r"(?:base_model\.model\.)?(.+)\.lora_([AB])\.weight", key)
        if not m:
            continue
        layer, which = m.group(1), m.group(2)
        if isinstance(rank, int) and not patterns and len(shape) == 2:
            got = shape[0] if which == "A" else shape[1]
            if got != rank:
                raise UserError(
                    f"{where}: adapter_config.json says r = {rank}, but its weights have rank {got} "
                    f"({layer}.lora_{which} is {shape}); the config and the weights are of different adapters"
                )
        if isinstance(targets, list) and targets and not any(layer == t or layer.endswith(f".{t}") for t in targets):
            raise UserError(
                f"{where}: the weights adapt {layer}, which adapter_config.json's target_modules {targets} do not "
                "name; the config and the weights are of different adapters"
            )
        if not weights:
            continue
        base_shape = weights.get(f"{layer}.weight")
        if base_shape is None or len(base_shape) != 2 or len(shape) != 2:
            raise UserError(
                f"{where}: the adapter adapts {layer}, which the base model ({base}) does not "
                "have; was it trained on another model?"
            )
        out_features, in_features = base_shape
        ok = shape[1] == in_features if which == "A" else shape[0] == out_features
        if not ok:
            raise UserError(
                f"{where}: the adapter's {layer}.lora_{which} is {shape}, which does not fit the "
                f"base model's {layer} of shape {base_shape}; was it trained on another model?"
            )


DIGEST_TEXT_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
)
"""Files of a model folder whose whole content identifies it (architecture, tokenizer, chat template)."""
DIGEST_EDGE_BYTES = 1 << 20
"""Bytes read from each end of a weight file for its digest (with its size: the whole file would
take a minute for an 8B model; a different checkpoint differs in its header and first tensors)."""


def model_digest(folder: Path) -> str:
    """A short digest identifying a model folder's judge: its config, tokenizer and chat template
    (whole), and each weight file's name, size and first and last megabyte. The `base` checker's
    verdict cache keys on it, so another model (or a re-converted one) never reads its verdicts."""
    import hashlib

    h = hashlib.sha256()
    for name in DIGEST_TEXT_FILES:
        path = folder / name
        if path.is_file():
            h.update(f"{name}\0".encode())
            h.update(path.read_bytes())
    for path in sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()):
        size = path.stat().st_size
        h.update(f"{path.name}\0{size}\0".encode())
        with path.open("rb") as fh:
            h.update(fh.read(DIGEST_EDGE_BYTES))
            fh.seek(max(size - DIGEST_EDGE_BYTES, 0))
            h.update(fh.read(DIGEST_EDGE_BYTES))
    return h.hexdigest()[:16]


def check_adapter_lora(adapter: Path, lora: LoraConfig, what: str) -> None:
    """Raise a one-line UserError, naming `what`, unless the adapter in `adapter` has the `lora`
    section's rank, alpha and (where the section names them) targets: peft loads an adapter with
    its own, which would silently win over the config."""
    saved = adapter_config(adapter)
    pairs: list[tuple[str, Any, Any]] = [
        ("lora.r", lora.r, saved.get("r")),
        ("lora.alpha", lora.alpha, saved.get("lora_alpha")),
    ]
    saved_targets = saved.get("target_modules")
    if lora.target_modules != ["all-linear"] and isinstance(saved_targets, list):  # peft saves all-linear resolved
        pairs.append(("lora.target_modules", sorted(lora.target_modules), sorted(saved_targets)))
    for key, ours, theirs in pairs:
        if ours != theirs:
            raise UserError(
                f"{what}: its adapter has {key} = {theirs}, but this config has {ours}; "
                f"set {key} to match, or start from a fresh adapter"
            )
