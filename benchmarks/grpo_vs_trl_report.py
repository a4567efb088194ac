"""grpo_vs_trl.py's report: each workload's runs summarised per trainer (medians, health), the
ratios of the two trainers, the machine's metadata, the JSON file and the printed table."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_vs_trl_spec import Outcome


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise(outs: list[Outcome]) -> dict[str, Any]:
    ok = [o for o in outs if not o.error and o.step_s]
    steps = [s for o in ok for s in o.step_s]
    tokens = [t / s for o in ok for t, s in zip(o.completion_tokens, o.step_s)]
    row: dict[str, Any] = {
        "runs": len(ok),
        "failed": len(outs) - len(ok),
        "s_per_step": round(med(steps), 3),
        "s_per_step_by_run": [round(med(o.step_s), 3) for o in ok],
        "completion_tokens_per_s": round(med(tokens), 1),
        "completion_tokens_per_step": round(med([t for o in ok for t in o.completion_tokens]), 1),
        "generate_s": round(med([x for o in ok for x in o.generate_s]), 3),
        "score_s": round(med([x for o in ok for x in o.score_s]), 3),
        "loss_s": round(med([x for o in ok for x in o.loss_s]), 3),
        "frac_zero_std": round(med([x for o in ok for x in o.frac_zero_std]), 3)
        if ok and ok[0].frac_zero_std
        else None,
        "peak_gb": max((o.peak_gb for o in ok if o.peak_gb is not None), default=None),
        "prompt_tokens": ok[0].prompt_lengths if ok else None,
        # A time is a measurement only when the run's numbers were finite (trainer_health.py).
        "start_finite": [o.start_finite for o in outs],
        "nonfinite_updates": sum(
            1 for o in outs for h in o.health if h.get("skipped") or h.get("adapter_finite") is False
        ),
    }
    decode = [o.decode for o in ok if o.decode]
    if decode:
        row["decode"] = decode[0]
    if len(ok) < len(outs):
        row["errors"] = [o.error for o in outs if o.error]
        row["diagnoses"] = [o.diagnosis for o in outs if o.diagnosis]
    return row


def write(path: Path, meta: dict[str, Any], results: dict[str, dict[str, list[Outcome]]]) -> list[dict[str, Any]]:
    table = []
    for label, by_trainer in results.items():
        if not by_trainer:
            continue
        row = {"workload": label, **{t: summarise(o) for t, o in by_trainer.items()}}
        if "ours" in row and "trl" in row and row["ours"]["runs"] and row["trl"]["runs"]:
            row["speedup"] = round(row["trl"]["s_per_step"] / row["ours"]["s_per_step"], 2)
            row["tokens_per_s_ratio"] = round(
                row["ours"]["completion_tokens_per_s"] / row["trl"]["completion_tokens_per_s"], 2
            )
        table.append(row)
    path.write_text(json.dumps({"meta": meta, "results": table}, indent=1))
    return table


def metadata(preset: str, rounds: int, loads: list[Any]) -> dict[str, Any]:
    import importlib.metadata

    import torch

    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "preset": preset,
        "rounds": rounds,
        "python": platform.python_version(),
        "torch": torch.__version__,
        # Every package either trainer's numbers depend on: a fresh machine resolves the unpinned ones anew.
        **{name: version(name) for name in ("transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes")},
        "triton": version("triton") or version("pytorch-triton"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": loads,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def print_table(table: list[dict[str, Any]]) -> None:
    """The table `write` returned, one line per workload and trainer, with the ratios and the decode bound."""
    print(
        f"\n{'workload':34s} {'trainer':6s} {'s/step':>8s} {'tok/s':>8s} {'gen s':>7s} {'score s':>8s} "
        f"{'loss s':>7s} {'peak GB':>8s}"
    )
    for row in table:
        for t in ("ours", "trl"):
            if t not in row:
                continue
            r = row[t]
            print(
                f"{row['workload']:34s} {t:6s} {r['s_per_step']:8.3f} {r['completion_tokens_per_s']:8.1f} "
                f"{r['generate_s']:7.3f} {r['score_s']:8.3f} {r['loss_s']:7.3f} {r['peak_gb']!s:>8s}"
            )
        if "speedup" in row:
            print(
                f"{'':34s} ratio: TRL s/step / ours = {row['speedup']}x, tokens/s ours / TRL = "
                f"{row['tokens_per_s_ratio']}x"
            )
        decode = row.get("ours", {}).get("decode")
        if decode and "bound_step_ms" in decode:
            print(
                f"{'':34s} decode: {decode['decode_tokens_per_s']} tok/s, {decode['decode_step_ms']} ms/step, "
                f"bound {decode['bound_step_ms']} ms ({decode['weight_gb']} GB weights + {decode['kv_gb_mean']} GB KV"
                f" at {decode['best_bytes_per_s'] / 1e9:.0f} GB/s): {decode['fraction_of_bound']:.0%} of the bound"
            )
