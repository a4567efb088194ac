"""Does training on a judge's labels find more gold evidence, and how much does the judge's quality matter?

For each judge (an *arm*) this trains the Executor with `benchmarks/efficacy.py` (that judge's
verdicts are the reward; collection and evaluation use gold), audits the judge's agreement with
gold (`searchgrpo audit-checker` on the training question set), and charts each arm's held-out
fixed-budget gain (recall@10 docs of the fine-tuned policy minus the baseline's, paired over
questions, 95% CI) against its audited agreement (three-label accuracy, 95% CI). The oracle (the
gold checker) sits at agreement 1.

    python benchmarks/judge_sweep.py --parallel 5 --minutes 10            # the study on one GPU
    python benchmarks/judge_sweep.py --arms oracle,noise:0.2 --steps 3 --eval-limit 8 ...   # a smoke run
    python benchmarks/judge_sweep.py --report benchmarks/results/judge_sweep/sweep.json     # redraw

Arms (`--arms`, comma-separated): `oracle` (checker.backend gold), `noise:P` (the simulated judge
flipping a share P of gold's labels, so its agreement is 1 - P by construction; the audit measures
it), `bias:length:R` / `bias:overlap:R` (gold plus false IMPORTANT verdicts for long or
question-overlapping documents at rate R), `base` (the in-process judge: the trainer's own base
model, SmolLM2 for the default config). The default is oracle, noise 0.1, 0.2 and 0.3 (agreement
about 0.9, 0.8 and 0.7) and base.

The trainings run as separate processes, `--parallel` at a time (on one GPU they share it; each
gets cores / parallel CPU threads), each logging to `<out>/<arm>.log` (beside its
folder, which efficacy.py claims as its own: new, empty, or one it wrote). The question sets are
collected once before any starts. Every step resumes: an arm whose results.json is complete is
skipped, an interrupted one continues (`efficacy.py --resume`), and an audit whose report is there
is not repeated. `sweep.json`, `judge_sweep.png` and a markdown table are written at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from efficacy_settings import EXPERIMENT, GOLD_JUDGE, SHARED  # noqa: E402

from searchgrpo.config import ConfigError, load_config  # noqa: E402

DEFAULT_ARMS = "oracle,noise:0.1,noise:0.2,noise:0.3,base"
METRIC = "recall_at_10"


@dataclass(frozen=True)
class Arm:
    name: str
    """Folder name and label: oracle, noise-0.2, bias-length-0.5, base."""
    flags: tuple[str, ...]
    """efficacy.py's judge options."""
    overrides: tuple[str, ...]
    """The same judge as config keys (for the audit)."""


def parse_arm(spec: str) -> Arm:
    parts = spec.strip().split(":")
    try:
        if parts == ["oracle"]:
            return Arm("oracle", ("--checker", "gold"), ("checker.backend=gold",))
        if parts == ["base"]:
            return Arm("base", ("--checker", "base"), ("checker.backend=base",))
        if parts[0] == "noise" and len(parts) == 2:
            p = float(parts[1])
            return Arm(
                f"noise-{p:g}",
                ("--checker", "simulated", "--judge-noise", f"{p:g}"),
                ("checker.backend=simulated", f"checker.judge_noise={p:g}"),
            )
        if parts[0] == "bias" and len(parts) == 3 and parts[1] in ("length", "overlap"):
            r = float(parts[2])
            return Arm(
                f"bias-{parts[1]}-{r:g}",
                ("--checker", "simulated", "--judge-bias", parts[1], "--judge-bias-rate", f"{r:g}"),
                ("checker.backend=simulated", f"checker.judge_bias={parts[1]}", f"checker.judge_bias_rate={r:g}"),
            )
    except ValueError:
        pass
    raise SystemExit(f"--arms: {spec!r} is not an arm (oracle, base, noise:P, bias:length:R, bias:overlap:R)")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arms", default=DEFAULT_ARMS, help=f"comma-separated arms (default {DEFAULT_ARMS})")
    p.add_argument("--parallel", type=int, default=1, help="trainings at once (one GPU is shared)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_sweep")
    p.add_argument("--steps", type=int, default=600, help="training steps per arm")
    p.add_argument("--minutes", type=float, default=None, help="training wall-clock budget per arm")
    p.add_argument("--eval-limit", type=int, default=None, help="states scored per held-out set")
    p.add_argument("--train-set", type=Path, default=SHARED / "2wikimultihopqa.jsonl")
    p.add_argument("--heldout", type=Path, action="append", help="a held-out question set (repeatable)")
    p.add_argument("--audit-pairs", type=int, default=500, help="pairs of each judge's audit")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="config override for every arm")
    p.add_argument("--report", type=Path, metavar="SWEEP_JSON", help="only redraw the chart and print the table")
    p.add_argument("--dry-run", action="store_true", help="print each arm's command and stop")
    return p.parse_args()


def arm_config(arm: Arm, args: argparse.Namespace) -> Any:
    """The arm's training config (what its efficacy run and its audit use); one line if invalid."""
    try:
        return load_config(ROOT / "config.yaml", [*EXPERIMENT, *args.overrides, *arm.overrides])
    except ConfigError as exc:
        raise SystemExit(f"arm {arm.name}: {exc}") from None


def efficacy_command(arm: Arm, args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "efficacy.py"), *arm.flags, "--out", str(args.out / arm.name)]
    cmd += ["--steps", str(args.steps), "--rounds-only", "--resume", "--train-set", str(args.train_set)]
    if args.minutes:
        cmd += ["--minutes", str(args.minutes)]
    if args.eval_limit:
        cmd += ["--eval-limit", str(args.eval_limit)]
    for held in args.heldout:
        cmd += ["--heldout", str(held)]
    for o in args.overrides:
        cmd += ["--set", o]
    return cmd


def finished(arm: Arm, args: argparse.Namespace) -> bool:
    path = args.out / arm.name / "results.json"
    try:
        return bool(json.loads(path.read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def collect_once(args: argparse.Namespace) -> None:
    """Every question set collected before the trainings start (they would collect it at once)."""
    from searchgrpo.episodes.collect import collect_question_set

    cfg = load_config(ROOT / "config.yaml", [*EXPERIMENT, *args.overrides]).replace(**GOLD_JUDGE)
    for questions in (args.train_set, *args.heldout):
        collect_question_set(cfg, questions)


def train_all(arms: list[Arm], args: argparse.Namespace) -> dict[str, int]:
    """Run the arms' efficacy runs, `--parallel` at a time; returns each one's exit code."""
    todo = [a for a in arms if not finished(a, args)]
    for a in arms:
        if a not in todo:
            print(f"{a.name}: finished before, skipped")
    threads = max(1, (os.cpu_count() or 1) // max(args.parallel, 1))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    running: dict[str, tuple[subprocess.Popen, Any, float]] = {}
    codes: dict[str, int] = {}
    last_note = time.monotonic()
    while todo or running:
        while todo and len(running) < args.parallel:
            arm = todo.pop(0)
            args.out.mkdir(parents=True, exist_ok=True)
            log = (args.out / f"{arm.name}.log").open("a")
            cmd = efficacy_command(arm, args)
            log.write(f"$ {shlex.join(cmd)}\n")
            log.flush()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
            running[arm.name] = (proc, log, time.monotonic())
            print(f"{arm.name}: started (log {args.out / f'{arm.name}.log'})", flush=True)
        for name, (proc, log, began) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                codes[name] = proc.returncode
                del running[name]
                verdict = "finished" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}; see its log)"
                print(f"{name}: {verdict} after {(time.monotonic() - began) / 60:.1f} min", flush=True)
        if running and time.monotonic() - last_note > 60:
            last_note = time.monotonic()
            print(f"running: {', '.join(running)}; waiting: {', '.join(a.name for a in todo) or 'none'}", flush=True)
        time.sleep(2)
    return codes


def audit(arm: Arm, args: argparse.Namespace) -> dict[str, Any]:
    """The arm's judge audited on the training question set (the report kept in its folder)."""
    from searchgrpo.evaluate.checker_audit import AuditRequest, is_audit_report, run_audit

    path = args.out / arm.name / "audit.json"
    if not is_audit_report(path):
        request = AuditRequest(questions=str(args.train_set), pairs=args.audit_pairs, output=str(path), plot=False)
        run_audit(arm_config(arm, args), request)
    return json.loads(path.read_text())


def arm_row(arm: Arm, args: argparse.Namespace, report: dict[str, Any]) -> dict[str, Any]:
    results = json.loads((args.out / arm.name / "results.json").read_text())
    three, imp = report["three_label"], report["important_vs_rest"]
    row: dict[str, Any] = {
        "arm": arm.name,
        "judge": results.get("judge"),
        "eval_checker": results.get("eval_checker"),
        "steps": results["steps"],
        "train_minutes": results["train_minutes"],
        "agreement": three["accuracy"],
        "kappa": three["kappa"],
        "important_precision": imp["precision"]["IMPORTANT"],
        "important_recall": imp["recall"]["IMPORTANT"],
        "judge_important_rate": imp["judge_rate"],
        "verdicts_per_second": report["speed"]["verdicts_per_second"],
        "gain": {},
    }
    for name, sets in results["heldout"].items():
        rounds = sets["rounds"]
        tuned = next(p for p in rounds["aggregate"] if p != "baseline")
        row["gain"][name] = {
            "diff": rounds["paired"][tuned][METRIC]["diff"],
            "ci": rounds["paired"][tuned][METRIC]["ci"],
            "baseline": rounds["aggregate"]["baseline"][METRIC],
            "tuned": rounds["aggregate"][tuned][METRIC],
            "states": rounds.get("states"),
        }
    return row


def share_of_oracle(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each arm's gain over the oracle's, per held-out set (the goal: at least 2/3 at agreement 0.8)."""
    oracle = next((r for r in rows if r["arm"] == "oracle"), None)
    if oracle is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        out[r["arm"]] = {}
        for name, g in r["gain"].items():
            base = oracle["gain"].get(name, {}).get("diff")
            out[r["arm"]][name] = g["diff"] / base if base else float("nan")
    return out


def plot(sweep: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sweep["arms"]
    sets = sorted({s for r in rows for s in r["gain"]})
    fig, ax = plt.subplots(figsize=(7.5, 5))
    markers, colours = "osD^v", ("#3182bd", "#e6550d", "#31a354", "#756bb1")
    for j, name in enumerate(sets):
        pts = [r for r in rows if name in r["gain"]]
        xs = [r["agreement"]["value"] for r in pts]
        ys = [r["gain"][name]["diff"] for r in pts]
        xerr = [
            [x - r["agreement"]["ci"][0] for x, r in zip(xs, pts)],
            [r["agreement"]["ci"][1] - x for x, r in zip(xs, pts)],
        ]
        yerr = [
            [y - r["gain"][name]["ci"][0] for y, r in zip(ys, pts)],
            [r["gain"][name]["ci"][1] - y for y, r in zip(ys, pts)],
        ]
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, fmt=markers[j % 5], color=colours[j % 4], capsize=3, label=name)
        for x, y, r in zip(xs, ys, pts):
            ax.annotate(r["arm"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
        oracle = next((r for r in pts if r["arm"] == "oracle"), None)
        if oracle:
            ax.axhline(oracle["gain"][name]["diff"] * 2 / 3, color=colours[j % 4], ls=":", lw=0.8)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlim(right=1.03)  # the oracle sits at 1
    ax.set_xlabel("judge's audited agreement with gold (3 labels, 95% CI)")
    ax.set_ylabel("held-out recall@10 docs gain over the baseline (95% CI)")
    ax.set_title("training on a judge's labels, measured on gold (dotted: 2/3 of the oracle's gain)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def markdown(sweep: dict[str, Any]) -> str:
    def ci(entry: dict[str, Any], signed: bool = False) -> str:
        f = "{:+.3f}" if signed else "{:.3f}"
        value = entry["value"] if "value" in entry else entry["diff"]
        return f"{f.format(value)} [{f.format(entry['ci'][0])}, {f.format(entry['ci'][1])}]"

    rows, shares = sweep["arms"], sweep["share_of_oracle"]
    lines = [
        "| arm | steps | audited agreement (95% CI) | kappa | IMPORTANT precision / recall | held-out set "
        "| recall@10 docs gain (95% CI) | share of the oracle's gain |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]

    def num(figure: dict[str, Any], digits: int) -> str:
        """A figure's value, or a dash where it is undefined (kappa of a judge with one label)."""
        value = figure.get("value")
        return "–" if value is None else f"{value:.{digits}f}"

    for r in rows:
        first = True
        for name, g in r["gain"].items():
            head = (
                f"| {r['arm']} | {r['steps']} | {ci(r['agreement'])} | {num(r['kappa'], 3)} | "
                f"{num(r['important_precision'], 2)} / {num(r['important_recall'], 2)} "
                if first
                else "| | | | | "
            )
            share = shares.get(r["arm"], {}).get(name)
            shown = f"{share:.2f}" if isinstance(share, float) and share == share else "–"
            lines.append(f"{head}| {name} | {ci(g, signed=True)} | {shown} |")
            first = False
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args.report:
        sweep = json.loads(args.report.read_text())
        plot(sweep, args.report.with_name("judge_sweep.png"))
        print(markdown(sweep))
        return
    args.heldout = args.heldout or [SHARED / "hotpotqa.jsonl"]
    arms = [parse_arm(spec) for spec in args.arms.split(",") if spec.strip()]
    if len({a.name for a in arms}) != len(arms):
        raise SystemExit("--arms: an arm is named twice")
    for arm in arms:
        arm_config(arm, args)  # every arm's config checked before anything runs
    if args.dry_run:
        for arm in arms:
            print(shlex.join(efficacy_command(arm, args)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    collect_once(args)
    codes = train_all(arms, args)
    rows = []
    for arm in arms:
        if codes.get(arm.name, 0) != 0 or not finished(arm, args):
            print(f"{arm.name}: no complete results; left out of the chart")
            continue
        rows.append(arm_row(arm, args, audit(arm, args)))
    sweep = {
        "command": "python " + shlex.join(sys.argv),
        "minutes": (time.time() - started) / 60,
        "metric": METRIC,
        "arms": rows,
        "share_of_oracle": share_of_oracle(rows),
    }
    (args.out / "sweep.json").write_text(json.dumps(sweep, indent=2))
    if rows:
        plot(sweep, args.out / "judge_sweep.png")
        print(markdown(sweep))
    print(f"sweep: {args.out / 'sweep.json'} ({sweep['minutes']:.1f} min)")


if __name__ == "__main__":
    main()
