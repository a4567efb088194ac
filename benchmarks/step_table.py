"""GRPO step time and the checker's share of it, per checker and sampler, on the same work (issue 18 item 5,
issue 22 item 7).

    python benchmarks/step_table.py [--steps 2] [--threads 1] [--only NAME ...] [--set key=value ...]
    python benchmarks/step_table.py --preset h200     # one H200: gold against the in-process judge

Trains SmolLM2-135M (the embedded model) on the demo world, the same states with the same
sampling seeds in every configuration, `--steps` timed steps after one warm-up step each,
configurations run one after another in this process (each a fresh `Trainer`, its servers closed
before the next starts). A pipelined step also samples the next step, so a pipelined configuration
runs one more step, untimed, after its timed ones:

- `gold`: the gold checker (labels from the data), the local sampler (`generate`);
- `llm`: the LLM checker on the embedded llama.cpp server (a fresh verdict cache), local sampler;
- `base`: the in-process judge (`checker.backend=base`: the policy's own base weights, adapter
  skipped, label log-probabilities; verdict cache off, so every verdict is computed);
- `llm+pipeline=V`, `base+pipeline=V`: the same with `train.pipeline=V`, for every value the
  config accepts besides its default; left out when the config has no `train.pipeline`;
- `gold+server`: the server sampler (`grpo.sampler=server`: llama.cpp serving the base GGUF with
  the current adapter, restarted after every update), gold checker; `llm+server` on request.

Per configuration: median seconds per step, of it sampling (`time/generate`, which includes
handing the adapter to the server; pipelined, also the next step's old log-probs), scoring in the
step's own thread (`time/score`: retrieval, checker, reward; pipelined, `time/score_wait`, the wait
for verdicts computed during the previous update) and the loss, the checker's share of the step
(scoring / step), checker calls per step and checker seconds per call (its work differs between
rows: each policy update changes the clues), the documents sent to the checker per step
(`checker/requests`; of them for groups dynamic sampling discarded, and those lazy judging never
sent), and for the server sampler the mean `sampler/kl`, `sampler/abs_logp_diff` and
`sampler/tis_clipped_frac`. Where both `llm` and `base` ran, how often they gave the same label to
the same (state, document) (the quantisations differ: Q4 GGUF on the server, float32 here) and
the step-time ratio (issue 22's goal: the in-process step at least 3x faster on CPU). The 1-minute
load average is recorded around each configuration. Writes --out (JSON) and prints a Markdown table.

`--preset h200` runs, in one process on one GPU, a Qwen3-8B-shaped random model (bf16, made once
from SmolLM2's tokenizer as `grpo_vs_trl.py` makes it; `--model-dir`) on 4 states x K=8 with
prompts of exactly 1024 tokens and 128 new tokens, dynamic sampling off (the same groups whatever
the judge says): `gold`, `base`, and both pipelined; the goal is the in-process step at most 1.3x
the gold step.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.step_table_report import ratios_of, table  # noqa: E402
from searchgrpo.config import TrainConfig, load_config  # noqa: E402
from searchgrpo.events import GroupScored, StepFinished  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402
from searchgrpo.train.trainer import Trainer  # noqa: E402

WORK = [
    "model.base=embedded:smollm2",
    "model.device=cpu",
    "model.dtype=float32",
    "train.states_per_step=2",
    "grpo.num_generations=4",
    "grpo.max_new_tokens=64",
    "grpo.beta=0.04",
    "train.eval_every=0",
    "train.save_every=0",
    "train.seed=7",
]
"""The work every configuration does: the README's CPU preset (2 states x K=4, 64-token completions)."""


def pipeline_values() -> list[Any]:
    """The values `train.pipeline` takes besides its default ([] when the config has no such key)."""
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    if "pipeline" not in fields:
        return []
    field = fields["pipeline"]
    kind = typing.get_type_hints(TrainConfig).get("pipeline")
    if kind is bool:
        values: list[Any] = [True, False]
    elif typing.get_origin(kind) is typing.Literal:
        values = list(typing.get_args(kind))
    else:
        return []
    return [v for v in values if v != field.default]


def configurations(preset: str = "cpu") -> dict[str, list[str]]:
    base = ["checker.backend=base", "checker.cache=false"]
    if preset == "h200":
        out = {"gold": ["checker.backend=gold"], "base": base}
        for value in pipeline_values():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out[f"gold+pipeline={text}"] = ["checker.backend=gold", f"train.pipeline={text}"]
            out[f"base+pipeline={text}"] = [*base, f"train.pipeline={text}"]
        return out
    out = {"gold": ["checker.backend=gold"], "llm": ["checker.backend=llm"], "base": base}
    for value in pipeline_values():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out[f"llm+pipeline={text}"] = ["checker.backend=llm", f"train.pipeline={text}"]
        out[f"base+pipeline={text}"] = [*base, f"train.pipeline={text}"]
    out["gold+server"] = ["checker.backend=gold", "grpo.sampler=server"]
    out["llm+server"] = ["checker.backend=llm", "grpo.sampler=server"]  # not run by default (--only)
    return out


DEFAULT = ("gold", "llm", "base", "llm+pipeline", "base+pipeline", "gold+server")
"""Run unless --only names others: every `X+pipeline=V` row counts as `X+pipeline`."""

H200_WORK = [
    "model.device=cuda",
    "model.dtype=bfloat16",
    "model.gradient_checkpointing=true",
    "train.states_per_step=4",
    "grpo.num_generations=8",
    "grpo.max_new_tokens=128",
    "grpo.max_prompt_tokens=1024",
    "train.micro_batch_size=8",
    "grpo.beta=0.04",
    "grpo.dynamic_sampling=false",
    "train.eval_every=0",
    "train.save_every=0",
    "train.seed=7",
]
"""One H200, as `grpo_vs_trl.py --preset h200` (4 states x K=8, 128 new tokens; prompts: PROMPT_TOKENS)."""
PROMPT_TOKENS = 1024


class LongPrompts:
    """Every state's prompt at exactly PROMPT_TOKENS tokens (`long_prompt.long_prompt`: its tables
    extended with other states' rows, then cut as `encode_prompt` cuts), made once per state."""

    def __init__(self, tokenizer: Any, states: list[Any], cfg: Any) -> None:
        from benchmarks.long_prompt import long_prompt

        self.make = lambda state: long_prompt(tokenizer, state, states[:60], PROMPT_TOKENS, cfg)
        self.cache: dict[str, list[int]] = {}

    def __call__(self, state: Any) -> list[int]:
        if state.state_id not in self.cache:
            self.cache[state.state_id] = self.make(state)
        return self.cache[state.state_id]

    def forget(self, states: Any) -> None:
        return None


def train_with_long_prompts(cfg: Any, on_event: Any) -> None:
    """`Trainer.train()` with every prompt PROMPT_TOKENS long (the h200 preset)."""
    trainer = Trainer(cfg, sink=on_event)
    try:
        trainer.setup()
        prompts = LongPrompts(trainer.policy.tokenizer, list(trainer.dataset.train), cfg)
        trainer.prompts = trainer.runner.prompt_of = prompts  # type: ignore[assignment]
        trainer._loop()
    finally:
        trainer.close()


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(name: str, overrides: list[str], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    pipelined = any(
        o.startswith("train.pipeline=") and o.split("=", 1)[1].lower() in ("true", "on", "1") for o in overrides
    )
    # Pipelined, a step also samples the next one, except the last: that step is run but not timed.
    total = args.steps + 1 + (1 if pipelined else 0)
    h200 = args.preset == "h200"
    cfg = load_config(
        None,
        [
            *([*H200_WORK, f"model.base={args.model_folder}"] if h200 else WORK),
            f"train.max_steps={total}",
            f"train.output_dir={work / name}",
            f"checker.cache_path={work / (name + '-verdicts.sqlite')}",
            *overrides,
            *args.overrides,
        ],
    )
    steps: list[dict[str, float]] = []
    labels: dict[str, str] = {}

    def on_event(event: object) -> None:
        if isinstance(event, GroupScored):  # every verdict, for the agreement between judges
            for sample in event.samples:
                for doc in sample.docs:
                    if doc.label:
                        labels.setdefault(f"{event.state_id}\t{doc.docid}", doc.label)
        if isinstance(event, StepFinished):
            steps.append(event.metrics)
            m = event.metrics
            print(
                f"  {name} step {event.step}: {m['time/step']:.2f} s (generate {m.get('time/generate', 0):.2f}, "
                f"score {scoring(m):.2f}, loss {m['time/loss']:.2f})",
                flush=True,
            )

    before = load1()
    start = time.perf_counter()
    if h200:
        train_with_long_prompts(cfg, on_event)
    else:
        Trainer(cfg, sink=on_event).train()
    timed = steps[1 : args.steps + 1]  # the first step is the warm-up

    def median(key: str) -> float:
        values = [m[key] for m in timed if key in m]
        return statistics.median(values) if values else float("nan")

    row = {
        "name": name,
        "overrides": overrides,
        "steps": timed,
        "wall_s": time.perf_counter() - start,
        "load1_before": before,
        "load1_after": load1(),
        "labels": labels,
    }
    for key in (
        "time/step",
        "time/generate",
        "time/loss",
        "time/old_logprobs",
        "sampler/kl",
        "sampler/abs_logp_diff",
        "sampler/tis_clipped_frac",
        "sampler/publish_s",
        "tokens/completion",
        "checker/calls",
        "checker/time_s",
        "checker/requests",
        "checker/requests_discarded",
        "checker/requests_skipped",
    ):
        row[key] = median(key)
    row["time/score"] = statistics.median(scoring(m) for m in timed)
    row["checker_share"] = statistics.median(scoring(m) / m["time/step"] for m in timed)
    calls = sum(m.get("checker/calls", 0.0) for m in timed)
    row["checker_s_per_call"] = sum(m.get("checker/time_s", 0.0) for m in timed) / calls if calls else float("nan")
    return row


def scoring(m: dict[str, float]) -> float:
    """The step's time spent scoring in its own thread: scoring in line, and (pipelined) waiting
    for the verdicts that a scoring thread computed while the previous update ran."""
    return m.get("time/score", 0.0) + m.get("time/score_wait", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per configuration (after 1 warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the server sampler uses as many)")
    parser.add_argument("--only", nargs="*", help="configurations to run (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "step_table.json")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--preset", choices=("cpu", "h200"), default="cpu")
    parser.add_argument("--model-dir", default=tempfile.gettempdir(), help="h200: where the random model is saved")
    parser.add_argument(
        "--shape",
        default="qwen3-8b",
        help="h200: the random model's shape (qwen3-tiny with --set model.device=cpu: a dry run)",
    )
    parser.add_argument(
        "--tokenizer", default=None, help="h200: tokenizer folder for the random model (default: SmolLM2's)"
    )
    parser.add_argument(
        "--no-cudnn-attention",
        action="store_true",
        help="CUDA: leave cuDNN's attention kernel out of the whole process (the judge always does)",
    )
    args = parser.parse_args()
    quiet_libraries()
    torch.set_num_threads(args.threads)
    if args.no_cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)
    if args.preset == "h200":
        from benchmarks.random_model import make_random_model
        from searchgrpo.policy.model import resolve_base

        tokenizer = Path(args.tokenizer) if args.tokenizer else resolve_base(load_config(None, [])).path
        args.model_folder = make_random_model(Path(args.model_dir) / args.shape, tokenizer, args.shape)
        if args.out == parser.get_default("out"):
            args.out = ROOT / "benchmarks" / "results" / "step_table_h200.json"
    default = DEFAULT if args.preset == "cpu" else tuple(configurations("h200"))
    chosen = {
        k: v
        for k, v in configurations(args.preset).items()
        if (k in args.only if args.only else k in default or k.split("=")[0] in default)
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in chosen.items():
            print(f"{name}: {' '.join(overrides)} (load {load1():.2f})", flush=True)
            rows.append(run(name, overrides, args, Path(tmp)))
    ratios = ratios_of(rows)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    report = {
        "command": "python " + " ".join(sys.argv),
        "preset": args.preset,
        "work": [*H200_WORK, f"prompts of {PROMPT_TOKENS} tokens"] if args.preset == "h200" else WORK,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "threads": args.threads,
        "cudnn_attention": torch.backends.cuda.cudnn_sdp_enabled(),
        "pipeline_values": [str(v) for v in pipeline_values()],
        "uptime_end": uptime,
        "rows": rows,
        "ratios": ratios,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(table(rows))
    print(json.dumps(ratios, indent=1))
    if not pipeline_values():
        print("train.pipeline: not in this config; no `+ pipeline` row")


if __name__ == "__main__":
    main()
