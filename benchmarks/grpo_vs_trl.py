"""Benchmark: one searchgrpo GRPO step against TRL's GRPOTrainer on the same work (issue #7, parts 1 and 3).

    python benchmarks/grpo_vs_trl.py --preset cpu     # SmolLM2-135M and the tiny model, beta 0 and 0.04
    python benchmarks/grpo_vs_trl.py --preset h200    # a Qwen3-8B-shaped random model on one GPU
    python benchmarks/grpo_vs_trl.py --preset quick   # the tiny model, a few steps: a smoke test

"The same work" for both trainers: the same base model and LoRA (peft, same rank, alpha, targets);
the same prompts, token for token (real Executor states of the demo world, rendered with our chat
template; TRL receives our prompt ids); the same K (`num_generations`), completion length,
temperature, top-p, `beta` with the same KL estimator (k3), loss aggregation (`grpo`: mean over a
sequence's tokens, then over sequences), group reward scaling, clip range, learning rate, and the
same reward function (`SearchRoundEnv.score_group`: BM25 + checker + reward, wrapped as a TRL
reward function). One step = one optimiser update on `states` states x K completions.

TRL is configured as fast as it allows here (no vLLM on these machines): generation batched over
the whole step (`generation_batch_size` = states x K), one optimiser step per generation, no
completion logging, logging only as TRL needs it, `shuffle_dataset=False`, the reference taken by
disabling the adapter (no second model), the same micro-batch size as ours.

Every run (trainer x model x beta x precision) is a fresh subprocess, so that memory peaks and
failures stay apart; on CPU the two trainers alternate, `--rounds` times, and the table gives
medians. Each run does `--warmup` steps that are not timed, then `--steps` timed steps. Results:
a table, and benchmarks/results/grpo_vs_trl_<preset>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results"

from grpo_vs_trl_presets import presets  # noqa: E402
from grpo_vs_trl_report import load_average, metadata, print_table, write  # noqa: E402
from grpo_vs_trl_spec import Outcome, Spec  # noqa: E402


def run_one(spec: Spec) -> Outcome:
    if spec.threads:
        import torch

        torch.set_num_threads(spec.threads)
    if spec.trainer == "ours":
        from grpo_vs_trl_ours import run_ours

        return run_ours(spec)
    from grpo_vs_trl_trl import run_trl

    return run_trl(spec)


def spawn(spec: Spec, log: Path | None) -> Outcome:
    """Run `spec` in a fresh interpreter; a failure becomes an Outcome with `error`."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        result_path = Path(fh.name)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--run-one",
        json.dumps(asdict(spec)),
        "--result",
        str(result_path),
    ]
    print(
        f"  {spec.trainer:4s} {Path(spec.model).name} beta={spec.beta} 4bit={spec.load_in_4bit}"
        + (f" lora.compute={spec.lora_compute} fused_norms={spec.fused_norms}" if spec.trainer == "ours" else "")
        + " ...",
        end="",
        flush=True,
    )
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log is not None:
        with log.open("a") as fh:
            fh.write(f"\n===== {' '.join(cmd[3:4])}\n{proc.stdout}")
    if proc.returncode != 0 or not result_path.exists() or result_path.stat().st_size == 0:
        tail = proc.stdout.strip().splitlines()[-3:]
        print(f" FAILED ({time.perf_counter() - start:.0f} s): {' | '.join(tail)}", flush=True)
        return Outcome(asdict(spec), error="\n".join(proc.stdout.strip().splitlines()[-30:]))
    out = Outcome(**json.loads(result_path.read_text()))
    result_path.unlink()
    took = time.perf_counter() - start
    if out.error:  # the run ended early but kept what it knew (TRL: its health and a diagnosis)
        print(f" FAILED ({took:.0f} s): {out.error.splitlines()[0][:200]}; diagnosis {out.diagnosis}", flush=True)
        return out
    skipped = [h["step"] for h in out.health if h.get("skipped") or h.get("adapter_finite") is False]
    warn = f"; NON-FINITE updates at steps {skipped}" if skipped else ""
    print(f" {statistics.median(out.step_s):.2f} s/step ({took:.0f} s){warn}", flush=True)
    return out


def ours_settings(spec: Spec, args: argparse.Namespace) -> Spec:
    """`spec` with ours' lora.compute and model.fused_norms from the command line."""
    if spec.trainer != "ours":
        return spec
    return dataclasses.replace(spec, lora_compute=args.lora_compute, fused_norms=args.fused_norms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu", help="cpu | quick | h200 | h200-quick")
    parser.add_argument("--rounds", type=int, default=None, help="alternations of the two trainers (cpu: 3)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on CPU")
    parser.add_argument("--device", default=None, help="h200 presets: run them on this device instead (a dry run)")
    parser.add_argument("--betas", type=float, nargs="+", default=[0.04, 0.0])
    parser.add_argument("--trainers", nargs="+", default=["ours", "trl"], help="run only these trainers")
    parser.add_argument("--four-bit", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--trl-four-bit", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--dynamic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="h200: also time our decode on transformers' dynamic cache",
    )
    parser.add_argument(
        "--lora-compute", default="base", choices=["base", "float32"], help="ours' lora.compute (default base)"
    )
    parser.add_argument(
        "--fused-norms", action=argparse.BooleanOptionalAction, default=True, help="ours' model.fused_norms"
    )
    parser.add_argument("--model-dir", default=tempfile.gettempdir(), help="where the random model is saved")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder for the random model (default: SmolLM2's)")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/grpo_vs_trl_<preset>.json)")
    parser.add_argument("--log", default=None, help="append every run's output to this file")
    parser.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.run_one:
        out = run_one(Spec(**json.loads(args.run_one)))
        Path(args.result).write_text(json.dumps(asdict(out)))
        return

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.tokenizer is None and args.preset.startswith("h200"):
        from searchgrpo.config import load_config
        from searchgrpo.policy.model import resolve_base

        args.tokenizer = str(resolve_base(load_config(None, [])).path)
    from searchgrpo.config import load_config
    from searchgrpo.world import load_dataset

    load_dataset(load_config(None, []))  # build the demo world once, before the runs share it
    rounds = args.rounds or (3 if args.preset == "cpu" else 1)
    groups = [
        (label, [ours_settings(s, args) for s in specs if s.trainer in args.trainers])
        for label, specs in presets(args.preset, args)
    ]
    groups = [(label, specs) for label, specs in groups if specs]
    log = Path(args.log) if args.log else None
    results: dict[str, dict[str, list[Outcome]]] = {label: {} for label, _ in groups}
    loads = [load_average()]
    meta = metadata(args.preset, rounds, loads)
    path = Path(args.out) if args.out else RESULTS / f"grpo_vs_trl_{args.preset}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    for r in range(rounds):
        print(f"round {r + 1}/{rounds} (load average {load_average()})", flush=True)
        for label, specs in groups:
            print(f" {label}", flush=True)
            for spec in specs:
                outcome = spawn(spec, log)
                # On CUDA, should a decoder fail (a graph capture, say), fall back to the next one.
                fallbacks = ["static", "dynamic"] if spec.trainer == "ours" and spec.decoder == "auto" else []
                while outcome.error and fallbacks and spec.device.startswith("cuda"):
                    spec = dataclasses.replace(spec, decoder=fallbacks.pop(0))
                    retry = spawn(spec, log)
                    retry.spec["fallback_from"] = outcome.error[-500:]
                    outcome = retry
                results[label].setdefault(spec.trainer, []).append(outcome)
                write(path, meta, results)  # what has run so far survives an interruption
        loads.append(load_average())
    table = write(path, meta, results)
    print_table(table)
    print(f"\nload average: {loads}\nwritten to {path}")


if __name__ == "__main__":
    main()
