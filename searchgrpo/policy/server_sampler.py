"""The server sampler (`grpo.sampler: server`): llama.cpp, in this process, serves the base GGUF
with the policy's current LoRA adapter, and GRPO's samples come from it.

After each optimiser update the adapter changes. Before sampling, `ServerSampler.sample` writes
the current adapter as a GGUF adapter file (`gguf_lora.write_gguf_lora`, well under a second for
SmolLM2-135M) and restarts the embedded server with it: llama.cpp reads an adapter file only when
the server starts (its /lora-adapters endpoint changes the scales of adapters loaded then, not
their weights), and a restart takes about a second for SmolLM2-135M. The two adapter files
alternate, so the file a running server was started from is never overwritten.

Per prompt, two requests to llama.cpp's native /completion endpoint, the prompt as token ids (no
re-tokenisation): one with n_predict 0 that evaluates the prompt into a slot, then one with
n_cmpl = K whose K slots copy that prompt's cache (the prompt is evaluated once, not K times).
Every prompt's requests run concurrently, so the server decodes all of a step's completions in
one batch. Each sampled token comes with its log-prob under the distribution it was drawn from:
llama.cpp's `logprob` (log-softmax of the raw logits) at temperature 1 without truncation, else
the log of its post-sampling `prob` (temperature applied, renormalised over the top-p nucleus);
NaN for the few tokens llama.cpp reports no probability for (`aligned_logprobs`).

The sampler's numbers are not the trainer's: llama.cpp computes with the quantised GGUF weights
and its own kernels. The trainer recomputes the log-probs and corrects for the difference
(`grpo.tis_cap`). vLLM serves the same role on GPUs: docs/performance.md has the commands.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from searchgrpo.agents.server import EmbeddedServer, default_threads
from searchgrpo.config import Config, ModelConfig
from searchgrpo.embedded import EMBEDDED, embedded_gguf_path
from searchgrpo.errors import UserError
from searchgrpo.policy.gguf_lora import BaseInfo, write_gguf_lora
from searchgrpo.policy.sampling import Completion, stop_token_ids

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy

NEUTRAL = {
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "top_n_sigma": -1.0,
    "xtc_probability": 0.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
}
"""llama.cpp's other samplers, all off: only temperature and top-p shape the distribution, as in `generate`."""


def base_gguf(mc: ModelConfig) -> Path:
    """The GGUF file the server serves: the one `model.base` names (the trainer de-quantises the same file)."""
    if mc.base == EMBEDDED:
        return embedded_gguf_path()
    path = Path(mc.base).expanduser()
    if path.suffix != ".gguf":
        raise UserError(
            f"grpo.sampler = server serves a GGUF model with llama.cpp; model.base = {mc.base!r} "
            "is not one (use embedded:smollm2 or a .gguf file; for vLLM see docs/performance.md)"
        )
    return path


def aligned_logprobs(ids: Sequence[int], probs: Sequence[dict[str, Any]], post: bool) -> list[float]:
    """One log-prob per sampled token id: llama.cpp's `completion_probabilities` leave out some
    tokens of a multi-byte character (seen with SmolLM2), so entries are matched to the ids in
    order and a token without one gets NaN (the trainer then leaves it uncorrected)."""
    out, j = [], 0
    for token in ids:
        if j < len(probs) and int(probs[j]["id"]) == token:
            p = probs[j]
            out.append((math.log(p["prob"]) if p["prob"] > 0 else -math.inf) if post else float(p["logprob"]))
            j += 1
        else:
            out.append(math.nan)
    if j != len(probs):
        raise RuntimeError(f"llama.cpp's completion_probabilities do not follow its tokens {list(ids)}")
    return out


class ServerSampler:
    """Samples from llama.cpp serving `gguf` with `policy`'s current adapter (see the module docstring)."""

    def __init__(self, policy: Policy, gguf: str | Path, *, parallel: int, slot_context: int, threads: int = 0) -> None:
        self.policy = policy
        self.gguf = Path(gguf)
        self.base = BaseInfo(self.gguf)
        self.parallel = parallel
        self.slot_context = slot_context
        # As many threads as torch uses: sampling and training take turns on the same cores, and
        # llama.cpp's threads spin at barriers when they outnumber the free cores (on 2 shared
        # cores, 2 threads sampled 3-4x slower than 1 while other work ran).
        self.threads = threads or min(torch.get_num_threads(), default_threads())
        self.stops = set(stop_token_ids(policy.model, policy.tokenizer))
        self.work_dir = Path(tempfile.mkdtemp(prefix="searchgrpo-sampler-"))
        self.server: EmbeddedServer | None = None
        self.published: str | None = None
        self.publish_s = 0.0
        """Seconds the last `sample` call spent publishing (write the file, restart the server); 0
        when the server already had the adapter."""
        self._publish_total_s = 0.0
        self._flip = 0

    @classmethod
    def for_config(cls, cfg: Config, policy: Policy) -> ServerSampler:
        g = cfg.grpo
        return cls(
            policy,
            base_gguf(cfg.model),
            parallel=cfg.train.states_per_step * g.num_generations,
            slot_context=g.max_prompt_tokens + g.max_new_tokens + 16,
        )

    # ------------------------------------------------------------------ the adapter

    def fingerprint(self) -> str:
        """A digest of the adapter's weights: a new one after every optimiser update."""
        digest = hashlib.blake2b(digest_size=16)
        for name, param in self.policy.model.named_parameters():
            if "lora_" in name:
                digest.update(param.detach().float().cpu().numpy().tobytes())
        return digest.hexdigest()

    def publish(self) -> None:
        """Serve the policy's current adapter, unless the server already does."""
        key = self.fingerprint()
        if key == self.published and self.server is not None:
            self.publish_s = 0.0
            return
        start = time.perf_counter()
        path = write_gguf_lora(self.policy.model, self.base, self.work_dir / f"adapter-{self._flip}.gguf")
        self._flip ^= 1
        if self.server is not None:
            self.server.stop()
        self.server = EmbeddedServer(
            self.gguf,
            parallel=self.parallel,
            threads=self.threads,
            lora=path,
            slot_context=self.slot_context,
            alias="policy",
        ).start()
        self.published = key
        self.publish_s = time.perf_counter() - start
        self._publish_total_s += self.publish_s

    def take_publish_s(self) -> float:
        """Seconds spent publishing since the last call: a step's share, over every `sample` call
        of the step (dynamic sampling's later rounds find the adapter published and add 0)."""
        spent, self._publish_total_s = self._publish_total_s, 0.0
        return spent

    # ------------------------------------------------------------------ sampling

    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        num_samples: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seeds: Sequence[int],
    ) -> list[list[Completion]]:
        """`num_samples` completions per prompt, as [prompt][sample], with the sampler's log-probs.

        As many prompts at a time as the server has slots for (dynamic sampling's extra rounds can
        ask for more than a step's states)."""
        self.publish()
        at_once = max(1, self.parallel // num_samples)
        with ThreadPoolExecutor(max_workers=max(1, min(len(prompts), at_once))) as pool:
            out: list[list[Completion]] = []
            for start in range(0, len(prompts), at_once):
                jobs = [
                    pool.submit(self._group, list(p), num_samples, max_new_tokens, temperature, top_p, int(s))
                    for p, s in zip(prompts[start : start + at_once], seeds[start : start + at_once])
                ]
                out.extend(job.result() for job in jobs)
            return out

    def request(
        self, prompt: list[int], k: int, max_new_tokens: int, temperature: float, top_p: float, seed: int
    ) -> dict[str, Any]:
        """The /completion request for k samples of `prompt` (the i-th sample uses seed + i)."""
        return {
            "prompt": prompt,
            "n_predict": max_new_tokens,
            "n_cmpl": k,
            "seed": seed,
            "temperature": temperature,
            "top_p": top_p,
            **NEUTRAL,
            "n_probs": 1,
            "post_sampling_probs": temperature != 1.0 or top_p < 1.0,
            "return_tokens": True,
            "cache_prompt": True,
            "stream": False,
        }

    def _group(
        self, prompt: list[int], k: int, max_new_tokens: int, temperature: float, top_p: float, seed: int
    ) -> list[Completion]:
        if k > 1:  # evaluate the prompt once; the k slots below copy its cache
            self._post({"prompt": prompt, "n_predict": 0, "cache_prompt": True})
        body = self.request(prompt, k, max_new_tokens, temperature, top_p, seed)
        answer = self._post(body)
        results = sorted(answer if isinstance(answer, list) else [answer], key=lambda r: r.get("index", 0))
        if len(results) != k:
            raise RuntimeError(f"llama.cpp returned {len(results)} completions, asked for {k}")
        return [self._completion(r, body["post_sampling_probs"]) for r in results]

    def _completion(self, result: dict[str, Any], post: bool) -> Completion:
        ids = [int(t) for t in result["tokens"]]
        logprobs = aligned_logprobs(ids, result["completion_probabilities"], post)
        cut = next((i for i, t in enumerate(ids) if t in self.stops), None)
        keep = len(ids) if cut is None else cut + 1
        text = self.policy.tokenizer.decode(ids[:keep], skip_special_tokens=True)
        return Completion(ids[:keep], text, cut is None, tuple(logprobs[:keep]))

    def _post(self, body: dict[str, Any]) -> Any:
        assert self.server is not None
        url = self.server.base_url.removesuffix("/v1") + "/completion"
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"llama.cpp /completion: HTTP {exc.code}: {exc.read().decode()[:300]}") from None

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        shutil.rmtree(self.work_dir, ignore_errors=True)
