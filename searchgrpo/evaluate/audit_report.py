"""Reading a checker audit report back: its tables for the terminal and the console, and its plot.

`load_audit_report` reads a `searchgrpo-checker-audit-v1` file; the `*_rows` functions turn it into
rows of plain strings (the same in `audit-checker`'s terminal tables and the console's Audit tab),
`audit_tables` into rich tables, and `plot_audit` draws the PNG (matplotlib, imported only there).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.errors import UserError

FORMATS = ("searchgrpo-checker-audit-v1",)


@dataclass(frozen=True)
class AuditReport:
    path: str
    data: dict[str, Any]

    @property
    def checker(self) -> str:
        return str(self.data["checker"]["description"])

    @property
    def pairs(self) -> int:
        return int(self.data["three_label"]["pairs"])


def load_audit_report(path: str | Path) -> AuditReport:
    """Parse a report; one clear line (UserError) when the file is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the audit report ({exc})") from None
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        found = data.get("format") if isinstance(data, dict) else None
        raise UserError(f"{path}: not a searchgrpo checker audit report (format {found!r})")
    return AuditReport(str(path), data)


def fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}f}"


def with_ci(entry: dict[str, Any] | None, digits: int = 3, signed: bool = False) -> str:
    if not entry:
        return "–"
    value, (lo, hi) = entry.get("value"), entry.get("ci", [None, None])
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    form = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    if lo is None or hi is None:
        return form.format(value)
    return f"{form.format(value)} [{form.format(lo)}, {form.format(hi)}]"


def headline_rows(report: AuditReport) -> list[list[str]]:
    """Agreement, kappa, IMPORTANT precision/recall/rates and speed: (figure, value) rows."""
    d = report.data
    three, imp, speed = d["three_label"], d["important_vs_rest"], d.get("speed", {})
    rows = [
        ["agreement (3 labels)", with_ci(three["accuracy"])],
        ["Cohen's kappa (3 labels)", with_ci(three["kappa"])],
        ["agreement (IMPORTANT vs rest)", with_ci(imp["accuracy"])],
        ["Cohen's kappa (IMPORTANT vs rest)", with_ci(imp["kappa"])],
        ["IMPORTANT precision", with_ci(imp["precision"]["IMPORTANT"])],
        ["IMPORTANT recall", with_ci(imp["recall"]["IMPORTANT"])],
        ["IMPORTANT rate: judge / gold", f"{fmt(imp['judge_rate'])} / {fmt(imp['gold_rate'])}"],
        ["verdicts per second", fmt(speed.get("verdicts_per_second"), 2)],
        ["seconds per verdict", fmt(speed.get("seconds_per_verdict"), 4)],
    ]
    if speed.get("cache_hits"):
        rows.append(["verdicts from the cache", f"{int(speed['cache_hits'])} (the rate counts them)"])
    calibration = d.get("calibration")
    if calibration:
        rows.append(["ECE of P(IMPORTANT)", fmt(calibration["important"]["ece"])])
        rows.append(["ECE of the verdict's probability", fmt(calibration["verdict"]["ece"])])
    else:
        rows.append(["calibration", "no probabilities from this checker"])
    return rows


def confusion_rows(report: AuditReport) -> list[list[str]]:
    """Gold label, then the count of each checker label, then that label's recall."""
    three = report.data["three_label"]
    return [
        [f"gold {name}", *(str(c) for c in row), with_ci(three["recall"][name])]
        for name, row in zip(three["labels"], three["confusion"])
    ] + [["precision", *(with_ci(three["precision"][n]) for n in three["labels"]), ""]]


def strata_rows(report: AuditReport) -> list[list[str]]:
    return [
        [name, str(s["pairs"]), fmt(s["agreement"]), fmt(s["judge_important_rate"]), fmt(s["gold_important_rate"])]
        for name, s in report.data["strata"].items()
    ]


def bias_rows(report: AuditReport, probe: str) -> list[list[str]]:
    """One probe's bins: bin, pairs, judge IMPORTANT rate, gold rate, judge - gold (each with its CI)."""
    return [
        [
            b["bin"],
            str(b["pairs"]),
            with_ci(b.get("judge_rate")),
            with_ci(b.get("gold_rate")),
            with_ci(b.get("excess"), signed=True),
        ]
        for b in report.data["bias"][probe]["bins"]
    ]


def calibration_rows(report: AuditReport) -> list[list[str]]:
    """P(IMPORTANT) bins: range, pairs, mean probability, observed gold IMPORTANT share."""
    calibration = report.data.get("calibration")
    if not calibration:
        return []
    return [
        [f"[{r['low']:.1f}, {r['high']:.1f})", str(r["count"]), fmt(r["mean_probability"]), fmt(r["observed"])]
        for r in calibration["important"]["table"]
    ]


def audit_tables(report: AuditReport) -> list[Any]:
    """rich tables of the report for the terminal."""
    from rich.table import Table
    from rich.text import Text

    def table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
        t = Table(title=Text(title), title_justify="left")
        for i, c in enumerate(columns):
            t.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
        for row in rows:
            t.add_row(*(Text(cell) for cell in row))
        return t

    labels = report.data["three_label"]["labels"]
    out = [
        table(
            f"checker audit: {report.checker}, {report.pairs} pairs (95% CI over questions)",
            ["figure", "value"],
            headline_rows(report),
        ),
        table("confusion (rows gold, columns checker)", ["", *labels, "recall"], confusion_rows(report)),
        table(
            "by stratum", ["stratum", "pairs", "agreement", "judge IMPORTANT", "gold IMPORTANT"], strata_rows(report)
        ),
    ]
    for probe, title in (
        ("length", "by document length (tokens, quartiles)"),
        ("overlap", "by word overlap with the question"),
    ):
        out.append(
            table(
                f"IMPORTANT rate {title}", ["bin", "pairs", "judge", "gold", "judge − gold"], bias_rows(report, probe)
            )
        )
    if report.data.get("calibration"):
        out.append(
            table(
                "reliability of P(IMPORTANT)",
                ["P(IMPORTANT)", "pairs", "mean P", "gold IMPORTANT"],
                calibration_rows(report),
            )
        )
    return out


def plot_audit(report: AuditReport, path: Path) -> None:
    """Confusion matrix, both bias probes and (with probabilities) the reliability diagram, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from searchgrpo.fileio import atomic_write_with

    d = report.data
    calibration = d.get("calibration")
    panels = 4 if calibration else 3
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.4))
    three = d["three_label"]
    ax = axes[0]
    ax.imshow(three["confusion"], cmap="Blues")
    top = max((c for row in three["confusion"] for c in row), default=0)
    for g, row in enumerate(three["confusion"]):
        for p, count in enumerate(row):
            colour = "white" if count > top / 2 else "black"
            ax.text(p, g, str(count), ha="center", va="center", fontsize=9, color=colour)
    short = [n[:5] for n in three["labels"]]
    ax.set_xticks(range(len(short)), short)
    ax.set_yticks(range(len(short)), short)
    ax.set_xlabel("checker")
    ax.set_ylabel("gold")
    ax.set_title(f"agreement {fmt(three['accuracy']['value'])}, kappa {fmt(three['kappa']['value'])}")
    for ax, probe, name in (
        (axes[1], "length", "document length (tokens)"),
        (axes[2], "overlap", "overlap with the question"),
    ):
        bins = [b for b in d["bias"][probe]["bins"] if b["pairs"]]
        xs = range(len(bins))
        for offset, key, colour, label in (
            (-0.2, "judge_rate", "#3182bd", "checker"),
            (0.2, "gold_rate", "#bdbdbd", "gold"),
        ):
            values = [b[key]["value"] for b in bins]
            errors = [
                [v - b[key]["ci"][0] for v, b in zip(values, bins)],
                [b[key]["ci"][1] - v for v, b in zip(values, bins)],
            ]
            ax.bar([x + offset for x in xs], values, 0.4, color=colour, edgecolor="black", lw=0.4, label=label)
            ax.errorbar([x + offset for x in xs], values, yerr=errors, fmt="none", color="black", capsize=2, lw=0.8)
        ax.set_xticks(list(xs), [b["bin"] for b in bins], fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_xlabel(name)
        ax.set_ylabel("IMPORTANT rate (95% CI)")
        ax.legend(fontsize=8)
    if calibration:
        ax = axes[3]
        rows = [r for r in calibration["important"]["table"] if r["count"]]
        ax.plot([0, 1], [0, 1], ":", color="grey")
        ax.plot([r["mean_probability"] for r in rows], [r["observed"] for r in rows], "o-", color="#3182bd")
        ax.set_xlabel("P(IMPORTANT)")
        ax.set_ylabel("gold IMPORTANT share")
        ax.set_title(f"reliability, ECE {fmt(calibration['important']['ece'])}")
    fig.suptitle(f"{report.checker}: {report.pairs} pairs", fontsize=10)
    fig.tight_layout()
    atomic_write_with(path, lambda fh: fig.savefig(fh, format="png", dpi=110))
    plt.close(fig)
