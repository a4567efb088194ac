"""Benchmark: how far a healthy merge is from the unmerged adapter model in 16 bits, and how far a
broken one is (the numbers behind `searchgrpo.export.parity.TOLERANCES`).

    # SmolLM2-135M (embedded, CPU): the checkpoints of a short demo run
    searchgrpo train --headless --set train.max_steps=15 --set train.save_every=3 --set train.eval_every=0
    python benchmarks/merge_parity.py --run-dir runs/<id> --out benchmarks/results/merge_parity_smollm2.json
    # the tiny random model, trained here with a learning rate that moves the adapter
    python benchmarks/merge_parity.py --tiny --steps 6 --out benchmarks/results/merge_parity_tiny.json

For every checkpoint of the run and every dtype it loads base + adapter as `searchgrpo merge` does
(`merge.load_adapter_model`), takes its greedy continuations of the probe prompts and their
teacher-forced scores (the reference), and scores the same tokens under:

- `healthy`: the merged model (`merge_and_unload`: W + scale * B @ A in float32, rounded once);
- `float32_compute`: what the old check compared, base + adapter and the merged weights both run
  in float32 (it measures the rounding of every weight, which refused healthy bf16 merges);
- `adapter_dropped`: the base alone in the dtype (a merge that lost the adapter);
- `adapter_halved`: the adapter merged at half its scale (a merge with the wrong scaling);
- `corrupted`: the adapter file with its tensor bytes overwritten by random bytes (bit rot).

Each row is `parity.parity_figures` (max and mean |delta log-prob|, top-1 agreement, flips outside
near ties) with the verdict under the current tolerances. Writes --out (JSON) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def corrupt_copy(adapter: Path, into: Path, seed: int = 0) -> Path:
    """A copy of the adapter folder whose safetensors tensor bytes (not its header) are random."""
    import random
    import struct

    shutil.copytree(adapter, into)
    path = into / "adapter_model.safetensors"
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack("<Q", data[:8])
    rng = random.Random(seed)
    for i in range(8 + length, len(data)):
        data[i] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return into


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def figures_for(cfg: Any, checkpoint: Path, dtype_name: str, probe: list[list[int]], tokenizer: Any) -> dict:
    import torch

    from searchgrpo.export.merge import load_adapter_model
    from searchgrpo.export.parity import greedy_continuations, parity_figures, teacher_forced
    from searchgrpo.policy.model import resolve_base
    from searchgrpo.policy.sampling import stop_token_ids

    base = resolve_base(cfg).path
    dtype = getattr(torch, dtype_name)
    out: dict[str, Any] = {}
    began = time.perf_counter()
    model = load_adapter_model(base, checkpoint / "adapter", dtype, "cpu")
    continuations = greedy_continuations(model, probe, set(stop_token_ids(model, tokenizer)))
    reference = teacher_forced(model, probe, continuations)
    with model.disable_adapter():
        out["adapter_dropped"] = parity_figures(reference, teacher_forced(model, probe, continuations), dtype_name)
    scaled = [m for m in model.modules() if isinstance(getattr(m, "scaling", None), dict) and "default" in m.scaling]
    for module in scaled:
        module.scaling["default"] *= 0.5
    halved = teacher_forced(model, probe, continuations)  # unmerged at half scale: what a half-scaled merge gives
    for module in scaled:
        module.scaling["default"] *= 2.0
    out["adapter_halved"] = parity_figures(reference, halved, dtype_name)
    merged = model.merge_and_unload()
    out["healthy"] = parity_figures(reference, teacher_forced(merged, probe, continuations), dtype_name)
    out["seconds_healthy_path"] = time.perf_counter() - began
    del merged, model
    if dtype_name != "float32":  # the old check: both run in float32
        ref32 = load_adapter_model(base, checkpoint / "adapter", dtype, "cpu").float()
        reference32 = teacher_forced(ref32, probe, continuations)
        merged32 = ref32.merge_and_unload().to(dtype).float()
        out["float32_compute"] = parity_figures(reference32, teacher_forced(merged32, probe, continuations), "float32")
        del ref32, merged32
    with tempfile.TemporaryDirectory() as tmp:
        broken = corrupt_copy(checkpoint / "adapter", Path(tmp) / "adapter")
        bad = load_adapter_model(base, broken, dtype, "cpu")
        bad_reference = teacher_forced(bad, probe, continuations)
        bad_merged = teacher_forced(bad.merge_and_unload(), probe, continuations)
        out["corrupted"] = parity_figures(bad_reference, bad_merged, dtype_name)
    return out


def train_tiny(steps: int, lr: float, where: Path) -> tuple[Any, Path]:
    from searchgrpo.config import load_config
    from searchgrpo.train.trainer import Trainer
    from tests.helpers.tiny import TINY_OVERRIDES

    cfg = load_config(
        None,
        [
            *TINY_OVERRIDES,
            f"train.output_dir={where}",
            f"train.max_steps={steps}",
            "train.save_every=2",
            "train.run_name=tiny",
            f"train.lr={lr}",
        ],
    )
    return cfg, Trainer(cfg).train().run_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, help="a run whose checkpoints are measured (its config.yaml is used)")
    parser.add_argument("--tiny", action="store_true", help="train the tiny model here first")
    parser.add_argument("--steps", type=int, default=6, help="--tiny: training steps (a checkpoint every 2)")
    parser.add_argument("--lr", type=float, default=0.05, help="--tiny: learning rate")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from searchgrpo.config import load_config
    from searchgrpo.export.merge import _probe_prompts
    from searchgrpo.policy.model import load_tokenizer, resolve_base
    from searchgrpo.runs import quiet_libraries
    from searchgrpo.train.checkpoints import list_checkpoints

    quiet_libraries()
    scratch = Path(tempfile.mkdtemp(prefix="merge-parity-"))
    if args.tiny:
        os.environ.setdefault("SEARCHGRPO_HOME", str(scratch / "home"))
        cfg, run_dir = train_tiny(args.steps, args.lr, scratch / "runs")
    else:
        if args.run_dir is None:
            parser.error("give --run-dir or --tiny")
        run_dir = args.run_dir
        cfg = load_config(run_dir / "config.yaml")
    tokenizer = load_tokenizer(resolve_base(cfg).path)
    probe = _probe_prompts(cfg, tokenizer)
    rows = []
    for info in list_checkpoints(run_dir):
        for dtype in args.dtypes:
            figures = figures_for(cfg, info.path, dtype, probe, tokenizer)
            rows.append({"checkpoint": info.path.name, "step": info.step, "dtype": dtype, **figures})
            for case in ("healthy", "float32_compute", "adapter_dropped", "adapter_halved", "corrupted"):
                f = figures.get(case)
                if f is None:
                    continue
                print(
                    f"{info.path.name} {dtype:9} {case:16} max {f['max_abs_logprob_delta']:.4f} "
                    f"mean {f['mean_abs_logprob_delta']:.5f} agree {f['top1_agreement']:.3f} "
                    f"flips {f['flips']:2d}/{f['tokens']} ties {f['near_ties']:2d} "
                    f"margins {[round(m, 3) for m in f['disagreement_margins'][:3]]} "
                    f"{'PASS' if f['passed'] else 'FAIL'} {f['reason'][:80]}",
                    flush=True,
                )
    meta = {
        "base": cfg.model.base,
        "run_dir": str(run_dir),
        "probe_prompts": len(probe),
        "prompt_tokens": [len(p) for p in probe],
        "torch_threads": torch_threads(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(meta, indent=1))
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
