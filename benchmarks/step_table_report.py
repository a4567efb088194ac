"""step_table.py's report: the Markdown table of its rows and the ratios between rows (local against
server sampling, sequential against pipelined steps, one judge against another)."""

from __future__ import annotations

import math
from typing import Any


def calls(r: dict[str, Any]) -> str:
    """Checker calls per step and seconds of checker time per call ('| ' cells when gold)."""
    if math.isnan(r.get("checker/calls", float("nan"))) or not r["checker/calls"]:
        return " |"
    return f"{r['checker/calls']:.0f} | {r['checker_s_per_call']:.2f}"


def requests(r: dict[str, Any]) -> str:
    """Documents sent to the checker per step, of them for discarded groups, and never sent."""
    values = [
        r.get(k, float("nan")) for k in ("checker/requests", "checker/requests_discarded", "checker/requests_skipped")
    ]
    return " | ".join("" if math.isnan(v) else f"{v:.0f}" for v in values)


def agreement(a: dict[str, str], b: dict[str, str]) -> dict[str, Any]:
    """How often two judges gave the same label to the same (state, document)."""
    both = sorted(set(a) & set(b))
    same = sum(a[k] == b[k] for k in both)
    return {"pairs": len(both), "same_label": same / len(both) if both else float("nan")}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| configuration | s/step | sampling | scoring | loss | checker share | checker calls | checker s/call "
        "| docs judged | of them discarded | not judged | sampler/kl | |logp diff| | TIS clipped |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        server = "grpo.sampler=server" in r["overrides"]
        extra = (
            f"{r['sampler/kl']:+.4f} | {r['sampler/abs_logp_diff']:.3f} | {r['sampler/tis_clipped_frac']:.3f}"
            if server
            else "| |"
        )
        sampling = r["time/generate"] + (0.0 if math.isnan(r["time/old_logprobs"]) else r["time/old_logprobs"])
        lines.append(
            f"| {r['name']} | {r['time/step']:.2f} | {sampling:.2f} | {r['time/score']:.2f} | "
            f"{r['time/loss']:.2f} | {r['checker_share']:.0%} | {calls(r)} | {requests(r)} | {extra} |"
        )
    return "\n".join(lines)


def ratios_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The ratios between step_table.py's rows, by name: for issue 22's goals, among others."""
    by = {r["name"]: r for r in rows}
    ratios: dict[str, Any] = {}
    for checker in ("gold", "llm"):
        if checker in by and f"{checker}+server" in by:
            local, server = by[checker], by[f"{checker}+server"]
            ratios[checker] = {
                "sampling_local_over_server": local["time/generate"] / server["time/generate"],
                "step_local_over_server": local["time/step"] / server["time/step"],
            }
    for name, row in by.items():
        checker = name.split("+")[0]
        if "+pipeline" in name and checker in by:
            ratios[name] = {"step_sequential_over_pipelined": by[checker]["time/step"] / row["time/step"]}
            if checker == "llm":
                ratios[name]["checker_s_per_call_pipelined_over_sequential"] = (
                    row["checker_s_per_call"] / by["llm"]["checker_s_per_call"]
                )
    judges = {}
    for suffix in ("", *sorted({n[n.index("+pipeline") :] for n in by if "+pipeline" in n})):
        llm, base, gold = by.get(f"llm{suffix}"), by.get(f"base{suffix}"), by.get(f"gold{suffix}")
        if llm and base:  # issue 22: the in-process step at least 3x faster than the server's (CPU)
            judges[f"llm{suffix}_over_base{suffix}"] = {
                "step": llm["time/step"] / base["time/step"],
                "scoring": llm["time/score"] / base["time/score"] if base["time/score"] else float("nan"),
                "labels": agreement(llm["labels"], base["labels"]),
            }
        if gold and base:  # issue 22: the in-process step at most 1.3x the gold step (one H200)
            judges[f"base{suffix}_over_gold{suffix}"] = {"step": base["time/step"] / gold["time/step"]}
    ratios["judges"] = judges
    return ratios
