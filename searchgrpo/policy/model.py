"""Loading the policy: the base model (HF folder, GGUF, hub id, embedded or tiny) plus LoRA.

- `resolve_base` turns `model.base` into a local Hugging Face folder. GGUF files, the embedded
  SmolLM2 among them, are de-quantised once by transformers (through the `gguf` package), copied
  into a fresh model and cached as safetensors under the cache root, so later loads take seconds.
  The cached folder is named by the GGUF's content digest (`gguf_digest`), not its path: every
  clone's .venv holds its own copy of the embedded GGUF, and each stored another 517 MB folder.
- `load_policy` loads that folder in the configured dtype and device (4-bit through bitsandbytes
  on CUDA only), attaches a peft LoRA adapter, and enables gradient checkpointing if asked.
- The reference policy is the same weights with the adapter disabled (`reference_mode`), never a
  second copy.
- `load_frozen_base` loads the base alone, adapter-free: the in-process judge's model where no
  policy is loaded (an audit, a collect, an eval's checker).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.config import Config, LoraConfig, ModelConfig, cache_root
from searchgrpo.embedded import EMBEDDED, EMBEDDED_NAME, embedded_gguf_path
from searchgrpo.errors import UserError
from searchgrpo.fileio import atomic_dir, atomic_write_text, save_model_here, writing_cache

TINY = "tiny"


@dataclass(frozen=True)
class BaseModel:
    """A base model resolved to a local folder."""

    path: Path
    """A Hugging Face model folder (config, safetensors, tokenizer)."""
    name: str
    """A short name for outputs: `{name}-grpo-step{N}`."""
    spec: str
    """`model.base` as configured."""


DIGESTS = "gguf-digests.json"
"""In the models cache: each GGUF's content digest by (path, size, mtime), so a file is read once."""


def _path_key(path: Path) -> str:
    """The converted folder's name before digests (by path): a folder of that name is reused."""
    st = path.stat()
    return hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:10]


def gguf_digest(path: Path, cache: Path) -> str:
    """The first 10 hex digits of the file's SHA-256: the same for every copy of the same model, so
    that clones share one converted folder. Remembered in `cache/DIGESTS` by (path, size, mtime)."""
    st = path.stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    index = cache / DIGESTS
    try:
        known = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    digest = known.get(key)
    if isinstance(digest, str) and len(digest) == 10:
        return digest
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    digest = sha.hexdigest()[:10]
    cache.mkdir(parents=True, exist_ok=True)
    atomic_write_text(index, json.dumps({**known, key: digest}, indent=1))
    return digest


def converted_folder(gguf: Path, cache: Path, name: str) -> Path:
    """Where the converted copy of `gguf` lives: `{name}-{digest}`; a folder converted before digests
    (named by the file's path) is renamed to it rather than converted again."""
    target = cache / f"{name}-{gguf_digest(gguf, cache)}"
    older = cache / f"{name}-{_path_key(gguf)}"
    if not target.exists() and (older / "config.json").is_file():
        with contextlib.suppress(OSError):  # another process renamed it first
            older.rename(target)
    return target


def resolve_base(cfg: Config) -> BaseModel:
    """Map `model.base` to a local Hugging Face folder, converting or building it if needed under
    the cache root's `models/`."""
    spec = cfg.model.base
    cache = cache_root(cfg) / "models"
    if spec == EMBEDDED:
        gguf = embedded_gguf_path()
        with writing_cache(cache, "converted model"):
            folder = convert_gguf(gguf, converted_folder(gguf, cache, EMBEDDED_NAME))
        return BaseModel(folder, EMBEDDED_NAME, spec)
    if spec == TINY:
        from searchgrpo.policy.tiny import ensure_tiny_model

        with writing_cache(cache, "tiny model"):
            return BaseModel(ensure_tiny_model(cache / "tiny-v1"), "tiny", spec)
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise UserError(f"model.base: GGUF file {path} not found")
        with writing_cache(cache, "converted model"):
            folder = convert_gguf(path, converted_folder(path, cache, path.stem))
        return BaseModel(folder, path.stem.split(".")[0], spec)
    if path.exists():
        if not (path / "config.json").is_file():
            raise UserError(f"model.base: {path} is not a Hugging Face model folder (no config.json)")
        return BaseModel(path, path.resolve().name, spec)
    if spec.startswith((".", "/", "~")):
        raise UserError(f"model.base: folder {path} not found")
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(spec)
    except Exception as exc:  # network, auth, unknown repo: all one line for the user
        raise UserError(
            f"model.base: could not fetch hub model {spec!r} ({type(exc).__name__}); "
            "give a local folder or a .gguf file instead"
        ) from None
    return BaseModel(Path(local), spec.split("/")[-1], spec)


def convert_gguf(gguf: Path, target: Path) -> Path:
    """De-quantise a GGUF model once into a cached Hugging Face folder (safetensors)."""
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_dir(target, first_wins=True) as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # A model loaded from GGUF cannot save_pretrained as it is (its quantization_config
        # marks it as GGUF-quantised): copy into a fresh one, made from its config without
        # that mark rather than from another read of the file (each read parses the whole
        # vocabulary, seconds for SmolLM2).
        config = copy.deepcopy(loaded.config)
        del config.quantization_config
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        fresh.load_state_dict(loaded.state_dict())
        fresh.generation_config = loaded.generation_config
        save_model_here(fresh, tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "searchgrpo_source.json").write_text(json.dumps({"gguf": str(gguf)}))
    return target


def resolve_device(mc: ModelConfig) -> Any:
    import torch

    if mc.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if mc.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"model.device = {mc.device!r} but CUDA is not available here; use cpu or auto")
    return torch.device(mc.device)


BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
"""CPU flags (Linux's /proc/cpuinfo names) of native bfloat16 matrix instructions: AMX tiles (Intel
Sapphire Rapids and later) or AVX512-BF16 (Cooper Lake, AMD Zen 4 and later)."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's flags in /proc/cpuinfo; empty where it cannot be read (not Linux)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_dtype(flags: frozenset[str]) -> str:
    """`model.dtype: auto` on CPU: bfloat16 where the CPU multiplies bfloat16 matrices natively, else
    float32. Without those instructions bfloat16 is emulated and slower: on this project's 2-core AMD
    EPYC (AVX2 only), a [512 x 576] x [576 x 1536] product took 8.2x the float32 CPU time
    (docs/performance.md "The demo in minutes")."""
    return "bfloat16" if flags & BF16_CPU_FLAGS else "float32"


def resolve_dtype(mc: ModelConfig, device: Any, flags: frozenset[str] | None = None) -> Any:
    """The weights' dtype: `model.dtype`, or for `auto` bfloat16 on CUDA where supported (else
    float16), and on CPU `cpu_dtype` of the CPU's flags (`flags`, default: read from /proc/cpuinfo).
    The LoRA weights stay float32 whatever this is (peft's autocast_adapter_dtype)."""
    import torch

    if mc.dtype != "auto":
        return getattr(torch, mc.dtype)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return getattr(torch, cpu_dtype(cpu_flags() if flags is None else flags))


@dataclass
class Policy:
    """The trainable policy: base + LoRA, its tokenizer and where it runs."""

    model: Any
    tokenizer: Any
    base: BaseModel
    device: Any
    dtype: Any

    @contextlib.contextmanager
    def reference_mode(self) -> Iterator[None]:
        """The frozen reference: the same weights with the LoRA adapter switched off."""
        with self.model.disable_adapter():
            yield

    def trainable_parameters(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if not tokenizer.chat_template:
        raise UserError(f"model.base: the tokenizer in {path} has no chat template; use an instruct model")
    return tokenizer


def load_base_model(mc: ModelConfig, base: BaseModel, device: Any, dtype: Any) -> Any:
    """The frozen base model on `device`, in `dtype` (or 4-bit); refused in one line when its files
    are damaged or do not match its config.json (`model_files.load_pretrained_checked`)."""
    from searchgrpo.policy.model_files import load_pretrained_checked

    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": mc.attn_implementation}
    if mc.load_in_4bit:
        if device.type != "cuda":
            raise UserError("model.load_in_4bit = true needs a CUDA device; set it to false on CPU")
        if importlib.util.find_spec("bitsandbytes") is None:
            raise UserError("model.load_in_4bit = true needs bitsandbytes: pip install 'searchgrpo[gpu]'")
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype, bnb_4bit_use_double_quant=True
        )
        kwargs["device_map"] = {"": device.index or 0}
    model = load_pretrained_checked(base.path, "model.base", **kwargs)
    if not mc.load_in_4bit:
        model.to(device)
    if mc.fused_norms and device.type == "cuda":
        from searchgrpo.policy.fused_norms import use_fused_norms

        use_fused_norms(model)
    return model


def attach_lora(lc: LoraConfig, model: Any, gradient_checkpointing: bool = False) -> Any:
    """`model` with a new LoRA adapter of the `lora` section (peft), gradient checkpointing on if asked."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    # A 4-bit base is not passed through peft's prepare_model_for_kbit_training: that upcasts every
    # weight left unquantised (embeddings, output head, norms) to float32, about 5 GB more for an
    # 8B model with a 152k vocabulary, and float32 activations. The base stays frozen in its
    # compute dtype; gradient checkpointing is enabled below as for a 16-bit base.
    targets: Any = lc.target_modules
    if targets == ["all-linear"]:
        targets = "all-linear"
    lora = PeftLoraConfig(
        r=lc.r,
        lora_alpha=lc.alpha,  # type: ignore[arg-type]  # peft annotates it int but only divides by it: a float works
        lora_dropout=lc.dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
        bias="none",
    )
    try:
        model = get_peft_model(model, lora)
    except ValueError as exc:
        raise UserError(f"lora.target_modules = {lc.target_modules}: {str(exc).splitlines()[0]}") from None
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model


def load_policy(cfg: Config, adapter: Path | None = None, device: Any = None) -> Policy:
    """Base + a new LoRA adapter (seeded by train.seed), or the adapter saved in `adapter`.

    `device` overrides model.device (a data-parallel rank passes its own GPU)."""
    base = resolve_base(cfg)
    device = device or resolve_device(cfg.model)
    dtype = resolve_dtype(cfg.model, device)
    tokenizer = load_tokenizer(base.path)
    model = with_adapter(cfg, load_base_model(cfg.model, base, device, dtype), adapter)
    return Policy(model, tokenizer, base, device, dtype)


def with_adapter(cfg: Config, model: Any, adapter: Path | None) -> Any:
    """`model` (a base) with a new LoRA adapter (seeded by train.seed), or the one saved in `adapter`."""
    import torch

    if adapter is None:
        torch.manual_seed(cfg.train.seed)
        model = attach_lora(cfg.lora, model, cfg.model.gradient_checkpointing)
    else:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
        if cfg.model.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.enable_input_require_grads()
    # peft keeps adapter weights in float32 on a 16-bit base (autocast_adapter_dtype).
    if cfg.lora.compute == "base":
        from searchgrpo.policy.lora_compute import use_base_dtype_products

        use_base_dtype_products(model)
    model.config.use_cache = False
    return model


@contextlib.contextmanager
def policy_on(cfg: Config, adapter: Path | None, base: Policy | None = None) -> Iterator[Policy]:
    """A policy for one evaluation: `load_policy`'s; or, given an already loaded base
    (`load_frozen_base`, which the in-process judge also uses), that base with the adapter attached
    for the duration and removed afterwards, leaving it as it was: one copy of the weights."""
    if base is None:
        yield load_policy(cfg, adapter=adapter)
        return
    model = with_adapter(cfg, base.model, adapter)
    try:
        yield Policy(model, base.tokenizer, base.base, base.device, base.dtype)
    finally:
        model.unload()


def load_frozen_base(cfg: Config, device: Any = None) -> Policy:
    """The base model alone, no adapter, frozen and in eval mode, as a `Policy` (the in-process
    judge's model where no policy is loaded; `policy/judge.py`)."""
    base = resolve_base(cfg)
    device = device or resolve_device(cfg.model)
    dtype = resolve_dtype(cfg.model, device)
    tokenizer = load_tokenizer(base.path)
    model = load_base_model(cfg.model, base, device, dtype)
    model.requires_grad_(False)
    model.eval()
    return Policy(model, tokenizer, base, device, dtype)
