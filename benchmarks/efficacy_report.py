"""efficacy.py's report: what results.json keeps of each eval report, the goals of issue #14 met or
not, and the Markdown tables for docs/efficacy.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from searchgrpo.evaluate.report import label

GOALS = (
    # (name, metric, kind, threshold): kind "diff>=" needs the paired difference >= threshold with CI above 0.
    ("recall@10 docs +15 points, CI above 0", "recall_at_10", "diff>=", 0.15),
    ("documents per state at most 1.25x the baseline's", "docs_mean", "ratio<=", 1.25),
    ("episode evidence recall after round 3 +10 points, CI above 0", "recall_round_3", "diff>=", 0.10),
    ("median rounds to full evidence below the baseline's", "median_rounds_to_full", "diff<", 0.0),
    ("checker documents per IMPORTANT not above the baseline's", "checker_docs_per_important", "diff<=", 0.0),
    ("no clue prefix shared by more than 10% of clue sets", "top_prefix_share", "clue<=", 0.10),
    ("at most 5% of clues cut at the token limit", "cut_clue_share", "clue<=", 0.05),
    ("near-copied clues (no new document) in at most 10% of clue sets", "redundant_clues_per_set", "clue<=", 0.10),
    ("at most 5% of clues carry a copied table row", "table_copy_share", "clue<=", 0.05),
    ("at most 5% of clues copy the Planner's sub-goal wording", "goal_copy_share", "clue<=", 0.05),
)


def summarise(path: Path) -> dict[str, Any]:
    """What results.json keeps of an eval report (the report itself stays beside it)."""
    data = json.loads(path.read_text())
    out = {
        k: data[k]
        for k in (
            "format",
            "mode",
            "headline",
            "questions",
            "checker",
            "aggregate",
            "paired",
            "clue_checks",
            "executor",
        )
        if k in data
    }
    out["report"] = path.name
    if data["mode"] == "rounds":
        out["states"] = data["states"]
        out["examples"] = [
            {
                "question": st["question"],
                "round": st["round"],
                **{p: st["results"][p]["samples"][0]["clues"] for p in st["results"]},
            }
            for st in data["per_state"][:8]
        ]
    else:
        out["rounds"], out["curve"] = data["rounds"], data["curve"]
    return out


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of issue #14 on each held-out set, met or not, with the figure it was judged on."""
    rows = []
    for name, sets in results["heldout"].items():
        for goal, metric, kind, threshold in GOALS:
            part = (
                sets.get("episodes")
                if metric in ("recall_round_3", "median_rounds_to_full", "checker_docs_per_important")
                else sets["rounds"]
            )
            if part is None:
                rows.append({"set": name, "goal": goal, "value": "not measured (--rounds-only)", "met": None})
                continue
            tuned = next(p for p in part["aggregate"] if p != "baseline")
            if kind == "clue<=":
                if metric not in part["clue_checks"][tuned]:
                    rows.append({"set": name, "goal": goal, "value": "not measured by this run", "met": None})
                    continue
                value = part["clue_checks"][tuned][metric]
                met = value <= threshold
                shown = f"{value:.3f}"
            elif kind == "ratio<=":
                new, base = part["aggregate"][tuned][metric], part["aggregate"]["baseline"][metric]
                met = new <= threshold * base
                shown = f"{new:.2f} vs {base:.2f} ({new / base:.2f}x)" if base else f"{new:.2f} vs {base:.2f}"
            else:
                d = part["paired"][tuned][metric]
                value, lo, hi = d["diff"], *d["ci"]
                met = {
                    "diff>=": value >= threshold and lo > 0,
                    "diff<": value < threshold,
                    "diff<=": value <= threshold,
                }[kind]
                shown = f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            rows.append({"set": name, "goal": goal, "value": shown, "met": bool(met)})
    return rows


def markdown(results: dict[str, Any]) -> str:
    """The tables for docs/efficacy.md and the README: per round, per episode, clue checks, goals."""

    def cell(agg: dict[str, Any], key: str) -> str:
        lo, hi = agg["ci"].get(key, [None, None])
        return f"{agg[key]:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")

    def diff(d: dict[str, Any]) -> str:
        return f"**{d['diff']:+.3f}** [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"

    lines = [
        "| held-out set | metric | baseline (95% CI) | fine-tuned (95% CI) | difference (95% CI) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, r in results["heldout"].items():
        for part, keys in (
            ("rounds", ("recall_at_10", "recall_at_5", "recall_at_k", "docs_mean", "clues_mean")),
            (
                "episodes",
                (
                    "recall_round_3",
                    "recall_round_6",
                    "full_coverage",
                    "median_rounds_to_full",
                    "checker_docs_per_important",
                ),
            ),
        ):
            if part not in r:
                continue
            res = r[part]
            tuned = next(p for p in res["aggregate"] if p != "baseline")
            unit = f"{res.get('states', res['questions'])} {'states' if part == 'rounds' else 'questions'}"
            first = True
            for key in keys:
                if key not in res["aggregate"]["baseline"]:
                    continue
                base, new = res["aggregate"]["baseline"], res["aggregate"][tuned]
                where = f"{name} ({part}, {unit})" if first else ""
                d = res["paired"][tuned].get(key)
                shown_base = cell(base, key) if key in base.get("ci", {}) else f"{base[key]:.3f}"
                shown_new = cell(new, key) if key in new.get("ci", {}) else f"{new[key]:.3f}"
                lines.append(f"| {where} | {label(key)} | {shown_base} | {shown_new} | {diff(d) if d else ''} |")
                first = False
    lines += [
        "",
        "| held-out set | policy | clues / set | top prefix (share) | top template share | "
        "cut at token limit | invented numbers | copied table rows | copied sub-goal wording | redundant clues / set | "
        "top token share |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["heldout"].items():
        for policy, c in r["rounds"]["clue_checks"].items():
            lines.append(
                f"| {name} | {policy} | {c['clues_per_set']:.2f} | `{c['top_prefix']}` "
                f"({c['top_prefix_share']:.2f}) | {c['top_template_share']:.2f} | {c['cut_clue_share']:.3f} | "
                f"{c['invented_number_share']:.3f} | {c.get('table_copy_share', float('nan')):.3f} | "
                f"{c.get('goal_copy_share', float('nan')):.3f} | "
                f"{c.get('redundant_clues_per_set', float('nan')):.2f} | "
                f"{c['most_common_token_share']:.3f} |"
            )
    lines += ["", "| held-out set | goal (issue #14) | measured | met |", "| --- | --- | ---: | :---: |"]
    for g in results["goals"]:
        met = "n/a" if g["met"] is None else "yes" if g["met"] else "**no**"
        lines.append(f"| {g['set']} | {g['goal']} | {g['value']} | {met} |")
    return "\n".join([*lines, "", *sampling(results)])


WINDOW = 60
"""Steps in each of the sampling table's windows: the first and the last of the run (one window, the
whole run, when it is no longer)."""


def sampling(results: dict[str, Any]) -> list[str]:
    """Dynamic sampling early and late in training: groups sampled per step for the batch's
    `train.states_per_step`, the sampled groups that taught nothing, and how often a state's group
    taught by what its previous group taught (`StatePool.observe`'s counts, summed over the window;
    issue 23 item 3: the room for a sampler that draws by history)."""
    steps = [c for c in results["curve"] if "dynamic/sampled_groups" in c]
    if not steps:
        return []
    trained = results["config"]["train"]["states_per_step"]

    def mean(window: list[dict[str, float]], key: str) -> float:
        return sum(c.get(key, 0.0) for c in window) / len(window)

    def share(window: list[dict[str, float]], kind: str) -> str:
        groups = sum(c.get(f"dynamic/groups_{kind}", 0.0) for c in window)
        taught = sum(c.get(f"dynamic/informative_{kind}", 0.0) for c in window)
        return f"{taught / groups:.2f} ({groups:.0f})" if groups else "n/a"

    lines = [
        f"| steps | sampled groups per step ({trained} trained) | zero variance / same finds | "
        "informative: first draw | after an informative group | after an uninformative one |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for window in (steps[:WINDOW], steps[-WINDOW:]) if len(steps) > WINDOW else (steps,):
        zero, same = (mean(window, f"dynamic/frac_{k}_sampled") for k in ("zero_std", "same_finds"))
        lines.append(
            f"| {window[0]['step']}-{window[-1]['step']} | {mean(window, 'dynamic/sampled_groups'):.1f} | "
            f"{zero:.2f} / {same:.2f} | "
            + " | ".join(share(window, kind) for kind in ("first", "after_informative", "after_uninformative"))
            + " |"
        )
    return lines
