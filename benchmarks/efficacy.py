"""Does GRPO make the Executor find the evidence for questions it never saw, at a fixed cost?

One command, end to end:

    python benchmarks/efficacy.py                       # the full experiment (600 steps)
    python benchmarks/efficacy.py --quick               # a short variant (60 steps, smaller evaluations)
    python benchmarks/efficacy.py --report benchmarks/results/efficacy/results.json   # tables and plot again

1. collects traces from a training question set with the baseline multi-agent pass
   (default ../shared/data/2wikimultihopqa.jsonl);
2. trains SmolLM2-135M-Instruct with GRPO + LoRA (config.yaml plus the EXPERIMENT settings below:
   the per-document cost, dynamic sampling, on-policy state refresh), for --steps steps or
   --minutes of wall clock, whichever ends first;
3. evaluates the baseline (no adapter) and the final checkpoint, greedy, on held-out questions (the
   eval split of the training set, never trained on, and every --heldout set, default
   ../shared/data/hotpotqa.jsonl): per round (recall at 5 and 10 documents of the fused list, the
   headline; recall of the whole union; documents per state; clue-text checks) and per episode
   (evidence recall after each round, rounds to full evidence, checker documents per IMPORTANT
   document found), each difference with its paired bootstrap 95% CI;
4. writes results.json (every figure, the exact command, the training curve, the goals of issue
   #14 and whether each was met), the eval reports, and efficacy.png.

The reward's judge during training is `checker.backend` (gold by default): `--checker base` trains
with the in-process judge, `--checker simulated --judge-noise p` / `--judge-bias length|overlap`
with a simulated one (docs/checker.md). Whatever the training judge, the traces are collected and
every evaluation is scored with the gold checker, so runs with different judges are measured
alike. `--rounds-only` skips the episode evaluations; `--resume` continues an interrupted run in
`--out` (a finished training is not repeated, nor an evaluation whose report is there).
`benchmarks/judge_sweep.py` runs this for several judges at once.

Credit (issue 23): `--credit episode` trains with episode credit (`--horizon`, `--gamma`: the
grpo.credit_* keys), `--state-sampler informative` with the informative state pool, `--per-clue`
with per-clue advantages, `--seed` sets train.seed; results.json records them under `credit`, and
the curve holds the `credit/*` metrics. Round against episode credit, at the same seeds and steps,
then paired (every headline figure of every held-out set, B - A):

    python benchmarks/efficacy.py --credit round --seed 0 --steps 360 --out runs/eff-round-s0
    python benchmarks/efficacy.py --credit episode --seed 0 --steps 360 --out runs/eff-episode-s0
    python benchmarks/compare_reports.py runs/eff-round-s0 runs/eff-episode-s0 --json runs/round-vs-episode-s0.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.episodes.collect import collect_question_set  # noqa: E402
from searchgrpo.evaluate import run_eval  # noqa: E402
from searchgrpo.evaluate.inputs import EvalRequest  # noqa: E402
from searchgrpo.evaluate.report import label, load_report  # noqa: E402
from searchgrpo.events import EvalFinished, StepFinished  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402
from searchgrpo.sinks import JsonlSink, fanout  # noqa: E402
from searchgrpo.terminal import ConsoleSink  # noqa: E402
from searchgrpo.train.checkpoints import latest_checkpoint  # noqa: E402
from searchgrpo.train.trainer import Trainer, TrainerControl  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"

# The experiment's settings on top of config.yaml (each can be overridden with --set). config.yaml
# already carries the reward of issue #14: reward.retrieved_doc (a cost per document retrieved),
# the guards found by reading clues (redundant_clue, invented_number, cut_clue, table_copy,
# goal_copy), with the irrelevant/already-discovered penalties off.
EXPERIMENT = (
    "grpo.num_generations=8",
    "grpo.max_new_tokens=32",
    "grpo.max_prompt_tokens=640",
    "data.max_table_rows=6",
    "grpo.temperature=1.0",
    "grpo.beta=0.0",
    "grpo.dynamic_sampling=true",
    "grpo.dynamic_filter=finds",
    "grpo.dynamic_max_retries=2",
    "train.states_per_step=2",
    "train.micro_batch_size=16",
    "train.lr=2e-4",
    "train.epochs=50",
    "train.eval_every=0",
    "train.save_every=50",
    "train.refresh_states_every=100",
    "train.refresh_questions=64",
    "train.refresh_mix=0.5",
    "data.eval_fraction=0.2",
    # bf16 matrix products run about twice as fast as float32 on CPUs with AVX512-BF16, and are the
    # native dtype on GPUs (peft keeps the LoRA weights in float32).
    "model.dtype=bfloat16",
)

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


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-set", type=Path, default=SHARED / "2wikimultihopqa.jsonl")
    p.add_argument("--heldout", type=Path, action="append", help="a held-out question set (repeatable)")
    p.add_argument("--steps", type=int, default=600, help="training steps")
    p.add_argument("--minutes", type=float, default=None, help="training wall-clock budget (stops sooner)")
    p.add_argument("--quick", action="store_true", help="60 steps, smaller evaluations")
    p.add_argument("--eval-limit", type=int, default=None, help="states scored per held-out set")
    p.add_argument("--episode-limit", type=int, default=None, help="questions played per held-out set")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "efficacy")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    p.add_argument(
        "--checker",
        choices=("gold", "llm", "base", "simulated"),
        help="the judge whose verdicts train the policy (default: checker.backend); evaluation is always gold",
    )
    p.add_argument("--judge-noise", type=float, help="simulated judge: share of verdicts flipped (checker.judge_noise)")
    p.add_argument("--judge-bias", choices=("none", "length", "overlap"), help="simulated judge: what it over-rates")
    p.add_argument(
        "--judge-bias-rate", type=float, help="simulated judge: share of over-rated documents made IMPORTANT"
    )
    p.add_argument("--judge-seed", type=int, help="simulated judge: the seed of its draws")
    p.add_argument(
        "--credit",
        choices=("round", "episode"),
        help="what a clue set is paid for (grpo.credit; default: config.yaml's, round)",
    )
    p.add_argument("--horizon", type=int, help="episode credit: rounds played on after the sampled one")
    p.add_argument("--gamma", type=float, help="episode credit: discount per later round")
    p.add_argument(
        "--state-sampler", choices=("epoch", "informative"), help="how steps pick their states (train.state_sampler)"
    )
    p.add_argument("--per-clue", action="store_true", help="scale each clue's advantage by its share (reward.per_clue)")
    p.add_argument("--seed", type=int, help="train.seed (sampling, data order, adapter init)")
    p.add_argument("--rounds-only", action="store_true", help="evaluate per round only (no whole episodes)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.add_argument(
        "--report",
        type=Path,
        metavar="RESULTS_JSON",
        help="only redraw the plot and print the tables of an earlier run's results.json",
    )
    p.add_argument(
        "--train-only",
        action="store_true",
        help="stop after training (results.json then holds the curve and the checkpoint)",
    )
    p.add_argument(
        "--run-dir",
        type=Path,
        help="skip training: evaluate the newest checkpoint of this run (trained with --train-only, "
        "e.g. on a GPU machine), with its curve from the run's events.jsonl or curve.json",
    )
    return p.parse_args()


def judge_overrides(args: argparse.Namespace) -> list[str]:
    """The training judge's config keys from --checker and --judge-*."""
    out = [f"checker.backend={args.checker}"] if args.checker else []
    for flag, key in (
        ("judge_noise", "judge_noise"),
        ("judge_bias", "judge_bias"),
        ("judge_bias_rate", "judge_bias_rate"),
        ("judge_seed", "judge_seed"),
    ):
        if getattr(args, flag) is not None:
            out.append(f"checker.{key}={getattr(args, flag)}")
    return out


def credit_overrides(args: argparse.Namespace) -> list[str]:
    """The config keys of --credit, --horizon, --gamma, --state-sampler, --per-clue and --seed."""
    out = []
    for flag, key in (
        ("credit", "grpo.credit"),
        ("horizon", "grpo.credit_horizon"),
        ("gamma", "grpo.credit_gamma"),
        ("state_sampler", "train.state_sampler"),
        ("seed", "train.seed"),
    ):
        if getattr(args, flag, None) is not None:
            out.append(f"{key}={getattr(args, flag)}")
    if getattr(args, "per_clue", False):
        out.append("reward.per_clue=true")
    return out


GOLD_JUDGE = {
    "checker.backend": "gold",
    "checker.judge_noise": 0.0,
    "checker.judge_bias": "none",
    "reward.soft_labels": False,  # gold verdicts have no probabilities
}
"""What collection and evaluation use, whatever judge trains the policy."""


def events_curve(run_dir: Path) -> tuple[list[dict[str, float]], float]:
    """The curve of a run's events.jsonl (the last record of a step repeated after a resume wins)
    and its wall-clock seconds."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    points: dict[tuple[str, int], dict[str, float]] = {}
    for e in events:
        if e.get("type") in ("StepFinished", "EvalFinished"):
            points[(e["type"], e["step"])] = {"step": e["step"], **e["metrics"]}
    times = [e["time"] for e in events if "time" in e]
    curve = [points[k] for k in sorted(points, key=lambda k: (k[1], k[0] != "StepFinished"))]
    return curve, (max(times) - min(times)) if times else 0.0


def train(
    cfg: Any, out: Path, minutes: float | None, resume: bool = False
) -> tuple[Path, list[dict[str, float]], float]:
    run_dir = out / "run"
    done = run_dir / "trained.json"
    if resume and done.is_file():  # trained to its end (steps or minutes) before: not again
        ckpt = latest_checkpoint(run_dir)
        assert ckpt is not None
        return ckpt.path, *events_curve(run_dir)
    resume = resume and (run_dir / "config.yaml").is_file()
    control = TrainerControl()
    trainer = Trainer(cfg, control=control, run_dir=run_dir, resume=resume)
    curve: list[dict[str, float]] = []

    def record(event: Any) -> None:
        if isinstance(event, (StepFinished, EvalFinished)):
            curve.append({"step": event.step, **event.metrics})

    jsonl = JsonlSink(trainer.run_dir / "events.jsonl")
    trainer.sink = fanout(ConsoleSink(every=10), jsonl, record)
    timer = threading.Timer(minutes * 60, control.stop.set) if minutes else None  # saves and stops after the step
    started = time.time()
    if timer:
        timer.start()
    try:
        trainer.train()
    finally:
        if timer:
            timer.cancel()
        jsonl.close()
    ckpt = latest_checkpoint(trainer.run_dir)
    assert ckpt is not None
    seconds = time.time() - started
    if resume:
        curve, seconds = events_curve(trainer.run_dir)
    # Ended by its steps or its minutes (a killed run never gets here, and --resume continues it).
    done.write_text(json.dumps({"checkpoint": str(ckpt.path), "seconds": seconds}))
    return ckpt.path, curve, seconds


def trained_elsewhere(run_dir: Path) -> tuple[Path, list[dict[str, float]], float]:
    """(newest checkpoint, curve, training seconds) of a run trained by an earlier --train-only. The
    checkpoint needs only its adapter and trainer_state.json (what eval loads)."""
    found = sorted(p for p in (run_dir / "checkpoints").glob("step-*") if (p / "adapter").is_dir())
    if not found:
        raise SystemExit(f"{run_dir}: no checkpoint with an adapter")
    saved = run_dir / "curve.json"
    if saved.is_file():
        data = json.loads(saved.read_text())
        return found[-1], data["curve"], data.get("train_seconds", 0.0)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    curve = [{"step": e["step"], **e["metrics"]} for e in events if e.get("type") in ("StepFinished", "EvalFinished")]
    times = [e["time"] for e in events if "time" in e]
    return found[-1], curve, (max(times) - min(times)) if times else 0.0


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
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args.report:
        results = json.loads(args.report.read_text())
        results["goals"] = goals(results)
        plot(results, args.report.with_name("efficacy.png"))
        print(markdown(results))
        return
    quiet_libraries()
    steps = 60 if args.quick else args.steps
    eval_limit = args.eval_limit or (120 if args.quick else None)
    episode_limit = args.episode_limit or (40 if args.quick else None)
    heldout = args.heldout or [SHARED / "hotpotqa.jsonl"]
    from searchgrpo.fileio import OutputKind, claim_output

    # The results, reports and plot go into a new or empty folder, or one this benchmark wrote.
    results_folder = OutputKind(
        "efficacy results folder", "--out", folder=True, ours=lambda p: (p / "results.json").is_file(), reused=True
    )
    claim_output(args.out, results_folder)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    cfg = load_config(
        ROOT / "config.yaml",
        [*EXPERIMENT, f"train.max_steps={steps}", *credit_overrides(args), *args.overrides, *judge_overrides(args)],
    )
    gold_cfg = cfg.replace(**GOLD_JUDGE)  # collection and evaluation, whatever the training judge
    collected = collect_question_set(gold_cfg, args.train_set)
    data = {"data.traces": str(collected.traces), "data.corpus": str(collected.corpus)}
    cfg, gold_cfg = cfg.replace(**data), gold_cfg.replace(**data)
    if args.run_dir:
        checkpoint, curve, seconds = trained_elsewhere(args.run_dir)
    else:
        checkpoint, curve, seconds = train(cfg, args.out, args.minutes, args.resume)
    results: dict[str, Any] = {
        "command": command,
        "train_set": str(args.train_set),
        "train_minutes": seconds / 60,
        "steps": max((c["step"] for c in curve), default=0),
        "checkpoint": str(checkpoint),
        "config": cfg.to_dict(),
        "judge": {k: v for k, v in cfg.to_dict()["checker"].items() if k == "backend" or k.startswith("judge_")},
        "credit": {
            "credit": cfg.grpo.credit,
            "horizon": cfg.grpo.credit_horizon,
            "gamma": cfg.grpo.credit_gamma,
            "state_sampler": cfg.train.state_sampler,
            "per_clue": cfg.reward.per_clue,
            "seed": cfg.train.seed,
        },
        "eval_checker": gold_cfg.checker.backend,
        "curve": curve,
        "heldout": {},
    }
    if args.train_only:
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
        print(f"trained: {checkpoint}; results: {args.out / 'results.json'}")
        return
    sets: list[tuple[str, str | None]] = [(f"{args.train_set.stem} (eval split)", None)]
    sets += [(qs.stem, str(qs)) for qs in heldout]
    for name, questions in sets:
        stem = "split" if questions is None else Path(questions).stem
        common = dict(baseline=True, checkpoints=[str(checkpoint)], seed=0, questions=questions)
        rounds_path, episodes_path = args.out / f"eval-{stem}.json", args.out / f"episodes-{stem}.json"
        if not (args.resume and rounds_path.is_file()):  # reports are written whole, so one there is complete
            run_eval(gold_cfg, EvalRequest(**common, limit=eval_limit, output=str(rounds_path)))
        results["heldout"][name] = {"rounds": summarise(rounds_path)}
        if not args.rounds_only:
            if not (args.resume and episodes_path.is_file()):
                run_eval(gold_cfg, EvalRequest(**common, limit=episode_limit, episodes=True, output=str(episodes_path)))
            results["heldout"][name]["episodes"] = summarise(episodes_path)
        (args.out / "results.json").write_text(json.dumps(results, indent=2))  # kept as each set finishes
        print(f"{name}: {load_report(rounds_path).headline}" + ("" if args.rounds_only else " and episodes written"))
    results["goals"] = goals(results)
    results["complete"] = True
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "efficacy.png")
    print(markdown(results))
    print(f"results: {args.out / 'results.json'}, plot: {args.out / 'efficacy.png'}")


if __name__ == "__main__":
    main()
