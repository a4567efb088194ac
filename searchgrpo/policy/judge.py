"""The `base` DocumentChecker: the trainer's own base model judges in-process (`checker.backend: base`).

The seed's Executor and DocumentChecker share one base model, so the judge needs no server and no
second copy of the weights: it runs the policy's base weights with the adapter skipped
(`base_view.adapter_free_view`, safe while the main thread trains: `train.pipeline: on`), on the
policy's device, in its dtype (a 4-bit base judges as the 4-bit base).

**The prompt** is the `llm` backend's, token for token: `llm_checker.build_messages` through the
tokenizer's chat template with the generation prompt and thinking off (`enable_thinking=False`,
which templates without it ignore), tokenized as `apply_chat_template` does (no special tokens
added). **The verdict** is read, not generated: each label's full token sequence (the label's
tokens, then the template's end-of-turn token, so that no label is a prefix of another) is scored
after the prompt; the three sequence log-probabilities are normalised over the three labels
(`Verdict.probs`, summing to 1) and the label is their argmax. Labels the tokenizer encodes
identically are refused in one line (`label_token_ids`).

**The work**, per state (question and sub-goals) in a `check` batch: the shared prompt start (chat
template, system text, question, sub-goals: everything before "Document title:") is encoded once
and its KV cache reused for all of that state's documents; the documents are prefilled
`checker.base_batch_size` at a time (shortest first, so rows of one batch have similar lengths),
each row holding the document's own prompt tokens and the three label continuations under one
mask (`judge_math.judge_layout`): one forward pass per batch of documents. A model whose attention
takes no custom mask (flash attention) or whose layers are not all full attention is scored with
plain rows instead (the whole prompt and one label per row): the same numbers, more compute.

**Attention kernels.** On CUDA the judge's forward passes leave out cuDNN's attention: it builds an
execution plan for every new shape it meets, and every judge batch has new shapes (each state's
prefix length, each batch's document widths), so the plans cost more than the attention itself
(`benchmarks/judge_profile.py`). Flash (no mask), memory-efficient and math attention need no plan.
PyTorch's kernel choice is process-wide: with `train.pipeline: on`, a training pass that overlaps a
judge pass also runs without cuDNN's attention (another kernel, the same arithmetic).

Verdicts go through the verdict cache (`checker.cache`), keyed as the `llm` backend's plus the
backend and the model's digest (`model_files.model_digest`: config, tokenizer, chat template,
weight files; its dtype and quantisation), so no other model's verdicts are ever read.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from searchgrpo.agents.checker import CheckerDefaults, CheckRequest, Verdict
from searchgrpo.agents.llm_checker import PROMPT_ID, build_messages, shown_text, user_prompt
from searchgrpo.agents.verdict_cache import CachedVerdict, CacheKey, VerdictCache, document_key, question_key
from searchgrpo.config import Config, ConfigError, cache_root
from searchgrpo.data.labels import Label
from searchgrpo.policy.base_view import adapter_free_view
from searchgrpo.policy.decoders import cache_argument, packs_prefix
from searchgrpo.policy.judge_math import (
    common_prefix_length,
    judge_layout,
    label_probabilities,
    label_sources,
    label_targets,
    sequence_logprobs,
)
from searchgrpo.policy.logprobs import make_batch, selective_log_softmax
from searchgrpo.policy.logprobs import sequence_logprobs as completion_logprobs
from searchgrpo.policy.model import Policy

SCORING_VERSION = "label-logprobs-v1"
"""How a verdict is read from the model; part of the cache key with the prompt's own version."""
LABELS = tuple(Label)
PROBE = "LABELPROBE"
"""A reply text used to find the chat template's end-of-turn token."""


def judge_prompt_text(tokenizer: Any, request: CheckRequest, max_doc_chars: int) -> str:
    """The `llm` backend's prompt through the chat template: generation prompt on, thinking off."""
    return tokenizer.apply_chat_template(
        build_messages(request, max_doc_chars), tokenize=False, add_generation_prompt=True, enable_thinking=False
    )


def shared_text(full_text: str, request: CheckRequest, max_doc_chars: int) -> str:
    """The start of `full_text` that every document of the request's state shares: everything
    before "Document title:" ('' when the template does not show the user text verbatim)."""
    user = user_prompt(request, max_doc_chars)
    at = full_text.find(user)
    return full_text[: at + user.index("Document title: ")] if at >= 0 else ""


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of rendered chat text, as `apply_chat_template(tokenize=True)` gives them."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The token the chat template closes an assistant turn with (the first special token after a
    reply), else the tokenizer's end-of-sequence token."""
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": PROBE}]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    except Exception:  # a template that refuses this conversation: use the eos token
        text = ""
    at = text.rfind(PROBE)
    if at >= 0:
        tail = encode(tokenizer, text[at + len(PROBE) :])
        if tail and tail[0] in set(tokenizer.all_special_ids):
            return int(tail[0])
    return tokenizer.eos_token_id


def label_token_ids(tokenizer: Any, model_name: str) -> list[list[int]]:
    """Each label's scored sequence (IMPORTANT, RELEVANT, IRRELEVANT): its tokens, then the end of
    the turn. Refused in one line when the tokenizer cannot tell two labels apart."""
    end = end_of_turn_id(tokenizer)
    if end is None:
        raise ConfigError(
            f"model.base {model_name}: its tokenizer has no end-of-turn or eos token, so checker.backend: base "
            "cannot score whole labels; use checker.backend: llm (a server) or gold"
        )
    sequences = [[*encode(tokenizer, label.value), end] for label in LABELS]
    for i in range(len(LABELS)):
        for j in range(i + 1, len(LABELS)):
            if sequences[i] == sequences[j]:
                raise ConfigError(
                    f"model.base {model_name}: its tokenizer encodes the labels {LABELS[i].value} and "
                    f"{LABELS[j].value} as the same tokens, so checker.backend: base cannot tell them apart; "
                    "use checker.backend: llm (a server judging with another model) or gold"
                )
    return sequences


def full_attention_only(model: Any) -> bool:
    """Every layer attends to the whole sequence (no sliding window) and takes a custom mask."""
    layer_types = set(getattr(model.config.get_text_config(), "layer_types", None) or ["full_attention"])
    return layer_types == {"full_attention"} and packs_prefix(model)


@contextlib.contextmanager
def judge_attention(device: torch.device) -> Iterator[None]:
    """Scaled-dot-product attention without cuDNN's kernel on CUDA (see the module docstring)."""
    if device.type != "cuda":
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield


class BaseJudge(CheckerDefaults):
    """The in-process judge (see the module docstring)."""

    name = "base"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        device: Any,
        *,
        model_key: str,
        model_name: str = "base",
        max_doc_chars: int = 1200,
        batch_size: int = 16,
        cache: VerdictCache | None = None,
    ) -> None:
        self.view = adapter_free_view(model)
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.model_key = model_key
        self.max_doc_chars = max_doc_chars
        self.batch_size = batch_size
        self.cache = cache
        self.label_ids = label_token_ids(tokenizer, model_name)
        self.packed = full_attention_only(self.view)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.label_ids[0][-1]
        self._cache_arg = cache_argument(self.view)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(("requests", "cache_hits", "calls", "latency_s", "wall_s", "tokens"), 0.0)

    # ------------------------------------------------------------------ the protocol

    def key(self, request: CheckRequest) -> CacheKey:
        return CacheKey(
            question_key(request.question, request.sub_goals),
            request.docid,
            f"base:{self.model_key}",
            f"{PROMPT_ID}+{SCORING_VERSION}",
            document_key(request.title, shown_text(request.text, self.max_doc_chars)),
        )

    def check(self, requests: Sequence[CheckRequest]) -> list[Verdict]:
        with self._lock:
            start = time.monotonic()
            keys = [self.key(r) for r in requests]
            known: dict[CacheKey, Verdict] = {}
            if self.cache is not None:
                rows = self.cache.get_rows(set(keys))
                known = {k: Verdict(Label(row.label), row.reason, row.probs) for k, row in rows.items()}
            todo: dict[CacheKey, CheckRequest] = {}
            for key, request in zip(keys, requests):
                if key not in known:
                    todo.setdefault(key, request)
            fresh = self._judge(todo)
            if self.cache is not None and fresh:
                self.cache.put_rows((k, CachedVerdict(v.label.value, v.reason, v.probs)) for k, v in fresh.items())
            known.update(fresh)
            self._counts["requests"] += len(requests)
            self._counts["cache_hits"] += len(requests) - len(todo)
            self._counts["wall_s"] += time.monotonic() - start
            return [known[k] for k in keys]

    def stats(self) -> dict[str, float]:
        """Running counters: `calls` are verdicts computed (cache misses), `latency_s` the seconds
        spent computing them, `tokens` the tokens prefilled for them. Read without waiting for a
        `check` in progress on another thread (the trainer reads them while a pipelined step's
        verdicts are computed)."""
        return {**dict(self._counts), "failures": 0.0, "unparsable": 0.0}

    def describe(self) -> str:
        return f"in-process judge: the base model ({self.model_key}), label log-probabilities"

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
            self.cache = None

    # ------------------------------------------------------------------ scoring

    def _judge(self, todo: dict[CacheKey, CheckRequest]) -> dict[CacheKey, Verdict]:
        """Verdicts of the requests, one state (question and sub-goals) at a time."""
        by_state: dict[tuple[str, tuple[str, ...]], list[CacheKey]] = {}
        for key, request in todo.items():
            by_state.setdefault((request.question, tuple(request.sub_goals)), []).append(key)
        out: dict[CacheKey, Verdict] = {}
        for keys in by_state.values():
            began = time.monotonic()
            logprobs = self.label_logprobs([todo[k] for k in keys])
            self._counts["latency_s"] += time.monotonic() - began
            self._counts["calls"] += len(keys)
            for key, probs in zip(keys, label_probabilities(logprobs).tolist()):
                label = LABELS[max(range(len(LABELS)), key=lambda i: probs[i])]
                out[key] = Verdict(label, "base model", (probs[0], probs[1], probs[2]))
        return out

    @torch.no_grad()
    def label_logprobs(self, requests: Sequence[CheckRequest]) -> torch.Tensor:
        """[n, 3] log-probabilities of each label's sequence after each request's prompt; the
        requests share one state (question and sub-goals)."""
        texts = [judge_prompt_text(self.tokenizer, r, self.max_doc_chars) for r in requests]
        fulls = [encode(self.tokenizer, t) for t in texts]
        with judge_attention(self.device):
            if not self.packed:
                return self._plain(fulls)
            prefix = encode(self.tokenizer, shared_text(texts[0], requests[0], self.max_doc_chars)) or fulls[0]
            shared = min(min(common_prefix_length(prefix, f), len(f) - 1) for f in fulls)
            if shared < 1:
                return self._plain(fulls)
            return self._packed(fulls[0][:shared], [f[shared:] for f in fulls])

    def _packed(self, prefix: list[int], suffixes: list[list[int]]) -> torch.Tensor:
        """The prefix encoded once; the suffixes and label continuations in batches on its cache."""
        view, device = self.view, self.device
        out = view(input_ids=torch.tensor([prefix], device=device), use_cache=True, logits_to_keep=1)
        prefix_cache = getattr(out, "cache", None) or out.past_key_values
        del out
        targets, real = label_targets(self.label_ids, self.pad_id)
        labels, width = targets.shape
        sources = label_sources(width, labels).reshape(-1).to(device)
        flat_targets, real = targets.reshape(-1).to(device), real.to(device)
        result = torch.empty(len(suffixes), labels, dtype=torch.float64)
        order = sorted(range(len(suffixes)), key=lambda i: len(suffixes[i]))
        self._counts["tokens"] += len(prefix)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            layout = judge_layout(len(prefix), [len(suffixes[i]) for i in rows], [len(t) for t in self.label_ids])
            s = layout.suffix_width
            ids = torch.full((len(rows), s + labels * width), self.pad_id, dtype=torch.long)
            for r, i in enumerate(rows):
                ids[r, s - len(suffixes[i]) : s] = torch.tensor(suffixes[i], dtype=torch.long)
            ids[:, s:] = targets.reshape(1, -1)
            self._counts["tokens"] += sum(len(suffixes[i]) for i in rows) + len(rows) * labels * width
            cache = batched_cache(prefix_cache, len(rows))
            out = view(
                input_ids=ids.to(device),
                attention_mask=self._mask(layout.mask.to(device)),
                position_ids=layout.positions.to(device),
                use_cache=True,
                logits_to_keep=1 + labels * width,
                **{self._cache_arg: cache},
            )
            picked = out.logits[:, sources, :]  # [B, 3M, V]: the logits that predict each label token
            del out, cache
            tokens = selective_log_softmax(picked, flat_targets.expand(len(rows), -1)).view(len(rows), labels, width)
            result[rows] = sequence_logprobs(tokens, real).double().cpu()
        return result

    def _mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The boolean mask as the attention implementation takes it (eager adds a float mask)."""
        if getattr(self.view.config, "_attn_implementation", "sdpa") != "eager":
            return mask
        return torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill(
            ~mask, torch.finfo(torch.float32).min
        )

    def _plain(self, fulls: list[list[int]]) -> torch.Tensor:
        """One row per (document, label): the whole prompt and the label, batched."""
        rows = [(f, ids) for f in fulls for ids in self.label_ids]
        sums: list[torch.Tensor] = []
        per = self.batch_size * len(self.label_ids)
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            self._counts["tokens"] += sum(len(f) + len(ids) for f, ids in chunk)
            batch = make_batch([f for f, _ in chunk], [ids for _, ids in chunk], self.pad_id, self.device)
            logp = completion_logprobs(self.view, batch)
            sums.append((logp * batch.completion_mask).sum(dim=1).double().cpu())
        return torch.cat(sums).view(len(fulls), len(self.label_ids))


def batched_cache(prefix_cache: Any, rows: int) -> Any:
    """A fresh cache holding the prefix's keys and values for `rows` rows. The prefix is not copied
    per row: each layer's tensors are broadcast views (a stride-0 batch), which the first update
    concatenates with the rows' own keys and values (the one copy the forward makes anyway)."""
    cache = copy.deepcopy(prefix_cache)
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        cache.batch_repeat_interleave(rows)  # another cache layout: copy per row
        return cache
    for layer in layers:
        layer.keys = layer.keys.expand(rows, *layer.keys.shape[1:])
        layer.values = layer.values.expand(rows, *layer.values.shape[1:])
    return cache


def judge_model_key(policy: Policy, load_in_4bit: bool) -> str:
    """The model's identity in the verdict cache: its folder's digest, dtype and quantisation."""
    from searchgrpo.policy.model_files import model_digest

    dtype = str(policy.dtype).replace("torch.", "")
    return f"{model_digest(policy.base.path)}:{dtype}:{'nf4' if load_in_4bit else 'full'}"


def open_base_judge(cfg: Config, policy: Policy | None = None, root: Path | None = None) -> BaseJudge:
    """The `base` checker on `policy`'s base weights; with no policy, the base model is loaded once,
    adapter-free (`model.load_frozen_base`), for the judge alone. Its verdict cache is
    `checker.cache_path`, else `{cache root}`/verdicts.sqlite."""
    from searchgrpo.policy.model import load_frozen_base

    cc = cfg.checker
    policy = policy or load_frozen_base(cfg)
    cache = None
    if cc.cache:
        cache = VerdictCache(
            Path(cc.cache_path).expanduser() if cc.cache_path else (root or cache_root(cfg)) / "verdicts.sqlite"
        )
    return BaseJudge(
        policy.model,
        policy.tokenizer,
        policy.device,
        model_key=judge_model_key(policy, cfg.model.load_in_4bit),
        model_name=policy.base.name,
        max_doc_chars=cc.max_doc_chars,
        batch_size=cc.base_batch_size,
        cache=cache,
    )
