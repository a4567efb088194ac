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
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from efficacy_plot import plot  # noqa: E402
from efficacy_report import goals, markdown, summarise  # noqa: E402
from efficacy_settings import EXPERIMENT, GOLD_JUDGE, SHARED, credit_overrides, judge_overrides  # noqa: E402
from efficacy_train import train, trained_elsewhere  # noqa: E402

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.episodes.collect import collect_question_set  # noqa: E402
from searchgrpo.evaluate import run_eval  # noqa: E402
from searchgrpo.evaluate.inputs import EvalRequest  # noqa: E402
from searchgrpo.evaluate.report import load_report  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402


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
