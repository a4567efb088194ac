"""efficacy.py's plot (efficacy.png): the training curve, the per-round recall with its CIs, and the
whole-episode evidence recall by round."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from searchgrpo.evaluate.report import label


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4.6))
    steps = [c for c in results["curve"] if "reward/mean" in c]
    xs = [c["step"] for c in steps]
    window = max(1, len(steps) // 20)

    def smooth(ys: list[float]) -> list[float]:
        return [statistics.fmean(ys[max(0, i - window + 1) : i + 1]) for i in range(len(ys))]

    ys = [c["reward/mean"] for c in steps]
    ax1.plot(xs, ys, color="#9ecae1", lw=0.8)
    ax1.plot(xs, smooth(ys), color="#08519c", lw=2, label=f"reward (moving average, {window} steps)")
    ax1.set_xlabel("step")
    ax1.set_ylabel("reward")
    twin = ax1.twinx()
    for key, colour, name in (
        ("dynamic/frac_zero_std_sampled", "#fdae6b", "zero-variance share, sampled"),
        ("reward/frac_zero_std", "#d94801", "zero-variance share, trained batch"),
        ("dynamic/frac_same_finds_sampled", "#74c476", "same-finds share, sampled"),
        ("credit/reordered_groups", "#756bb1", "groups reordered by the later rounds (episode credit)"),
    ):
        if not any(key in c for c in steps):
            continue  # logged only by runs newer than the metric
        zs = [c.get(key, 0.0) for c in steps]
        twin.plot(xs, smooth(zs), color=colour, lw=1.5, label=name)
    twin.set_ylim(0, 1)
    twin.set_ylabel("share of groups")
    lines = ax1.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax1.legend(lines, [h.get_label() for h in lines], loc="lower right", fontsize=8)
    ax1.set_title("GRPO training: reward and zero-variance groups")

    sets = list(results["heldout"])
    metrics = ["recall_at_5", "recall_at_10", "recall_at_k"]
    width = 0.8 / (2 * len(metrics))
    for j, name in enumerate(sets):
        agg = results["heldout"][name]["rounds"]["aggregate"]
        tuned = next(p for p in agg if p != "baseline")
        for m, key in enumerate(metrics):
            for k, pol in enumerate(("baseline", tuned)):
                value = agg[pol][key]
                lo, hi = agg[pol]["ci"][key]
                x = j + (2 * m + k - len(metrics)) * width + width / 2
                ax2.bar(
                    x,
                    value,
                    width,
                    color=("#bdbdbd", "#3182bd")[k],
                    edgecolor="black",
                    lw=0.4,
                    label=("baseline", "fine-tuned")[k] if j == 0 and m == 0 else None,
                )
                ax2.errorbar(x, value, yerr=[[value - lo], [hi - value]], color="black", capsize=2, lw=0.8)
                if k == 0:
                    ax2.text(
                        x + width / 2,
                        -0.02,
                        label(key).replace(" docs", "").replace(" (union)", ""),
                        ha="center",
                        va="top",
                        fontsize=7,
                    )
    ax2.set_xticks(range(len(sets)))
    ax2.set_xticklabels([f"\n\n{s}" for s in sets])
    ax2.set_ylim(0, 1)
    ax2.set_title("per round: IMPORTANT recall at 5 / 10 documents and of the union (95% CI)")
    ax2.legend(loc="upper left", fontsize=8)

    styles = ("-", "--", ":", "-.")
    for j, name in enumerate(sets):
        if "episodes" not in results["heldout"][name]:
            continue
        curve = results["heldout"][name]["episodes"]["curve"]
        for k, (pol, ys) in enumerate(curve.items()):
            ax3.plot(
                range(1, len(ys) + 1),
                ys,
                styles[j % 4],
                marker="o",
                ms=3,
                color=("#737373", "#3182bd")[int(k != 0)],
                label=f"{name}: {pol}",
            )
    ax3.set_xlabel("round")
    ax3.set_ylabel("evidence recall")
    ax3.set_ylim(0, 1)
    ax3.set_title("whole episodes: gold documents found by each round")
    ax3.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
