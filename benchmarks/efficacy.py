"""Does GRPO make the Executor find more IMPORTANT documents on questions it never saw?

One command, end to end, on this machine's CPUs:

    python benchmarks/efficacy.py                 # the full experiment (60-minute training budget)
    python benchmarks/efficacy.py --quick         # a 10-minute variant
    python benchmarks/efficacy.py --report benchmarks/results/efficacy/results.json   # tables and plot again

1. builds checkpoints from a training question set with the baseline multi-agent pass
   (default ../shared/data/2wikimultihopqa.jsonl);
2. trains SmolLM2-135M-Instruct with GRPO + LoRA within a wall-clock budget;
3. evaluates the baseline (no adapter) and the final checkpoint, greedy, on held-out questions:
   the eval split of the training set (questions never trained on) and every question set given
   with --heldout (default ../shared/data/hotpotqa.jsonl);
4. writes results.json (every figure with its bootstrap 95% CI, the exact command, the training
   curve, and checks of the clue text for reward hacking) and efficacy.png.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.episodes.collect import collect_question_set  # noqa: E402
from searchgrpo.evaluate.round_eval import EvalRequest, run_eval  # noqa: E402
from searchgrpo.events import EvalFinished, StepFinished  # noqa: E402
from searchgrpo.retrieval.search import tokenize  # noqa: E402
from searchgrpo.runs import quiet_libraries  # noqa: E402
from searchgrpo.sinks import JsonlSink, fanout
from searchgrpo.terminal import ConsoleSink  # noqa: E402
from searchgrpo.train.checkpoints import latest_checkpoint  # noqa: E402
from searchgrpo.train.trainer import Trainer, TrainerControl  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"

# The experiment's settings on top of config.yaml (each can be overridden with --set).
EXPERIMENT = (
    "grpo.num_generations=8",
    "grpo.max_new_tokens=32",
    "grpo.max_prompt_tokens=640",
    "data.max_table_rows=6",
    "grpo.temperature=1.0",
    "grpo.beta=0.0",
    "train.states_per_step=2",
    "train.micro_batch_size=16",
    "train.lr=2e-4",
    "train.epochs=50",
    "train.eval_every=0",
    "train.save_every=25",
    "data.eval_fraction=0.2",
    # Run 1 taught us why: with small penalties for IRRELEVANT and already-found documents, a clue that
    # retrieves nothing scored 0 and beat every real search. The penalties are off here; config.yaml's
    # reward.empty_clue keeps empty searches from paying.
    "reward.irrelevant=0",
    "reward.already_discovered=0",
    # bf16 matrix products run about twice as fast as float32 on CPUs with AVX512-BF16 (peft keeps the
    # LoRA weights in float32).
    "model.dtype=bfloat16",
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-set", type=Path, default=SHARED / "2wikimultihopqa.jsonl")
    p.add_argument("--heldout", type=Path, action="append", help="a held-out question set (repeatable)")
    p.add_argument("--minutes", type=float, default=60.0, help="training budget (wall clock)")
    p.add_argument("--quick", action="store_true", help="10 minutes of training, smaller evaluations")
    p.add_argument("--eval-limit", type=int, default=None, help="states scored per held-out set")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "efficacy")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    p.add_argument("--report", type=Path, metavar="RESULTS_JSON",
                   help="only redraw the plot and print the tables of an earlier run's results.json")
    return p.parse_args()


def train_within_budget(cfg: Any, out: Path, minutes: float) -> tuple[Path, list[dict[str, float]]]:
    control = TrainerControl()
    trainer = Trainer(cfg, control=control, run_dir=out / "run")
    curve: list[dict[str, float]] = []

    def record(event: Any) -> None:
        if isinstance(event, StepFinished):
            curve.append({"step": event.step, **event.metrics})
        elif isinstance(event, EvalFinished):
            curve.append({"step": event.step, **event.metrics})

    jsonl = JsonlSink(trainer.run_dir / "events.jsonl")
    trainer.sink = fanout(ConsoleSink(every=10), jsonl, record)
    timer = threading.Timer(minutes * 60, control.stop.set)  # the trainer saves and stops after the step
    timer.start()
    try:
        trainer.train()
    finally:
        timer.cancel()
        jsonl.close()
    ckpt = latest_checkpoint(trainer.run_dir)
    assert ckpt is not None
    return ckpt.path, curve


def clue_text_checks(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Signs of reward hacking in the clues themselves, per policy."""
    out = {}
    for policy in (p["name"] for p in report["policies"]):
        clues = [c for st in report["per_state"] for s in st["results"][policy]["samples"] for c in s["clues"]]
        words = [len(c.split()) for c in clues]
        tokens = [t for c in clues for t in tokenize(c)]
        counts = [s["counts"] for st in report["per_state"] for s in st["results"][policy]["samples"]]
        top = Counter(tokens).most_common(1)
        out[policy] = {
            "clues": float(len(clues)),
            "words_per_clue": statistics.mean(words) if words else 0.0,
            "distinct_token_ratio": len(set(tokens)) / len(tokens) if tokens else 0.0,
            "most_common_token_share": top[0][1] / len(tokens) if top else 0.0,
            "question_copies_per_state": statistics.mean(c["question_copy"] for c in counts) if counts else 0.0,
            "long_clues_per_state": statistics.mean(c["long_clue"] for c in counts) if counts else 0.0,
            "duplicate_clues_per_state": statistics.mean(c["duplicate_clue"] for c in counts) if counts else 0.0,
            "unparsable_share": statistics.mean(c["unparsable"] for c in counts) if counts else 0.0,
        }
    return out


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "states": report["states"],
        "questions": report["questions"],
        "aggregate": report["aggregate"],
        "paired": report["paired"],
        "clue_checks": clue_text_checks(report),
        "examples": [
            {"question": st["question"], "round": st["round"],
             **{p: st["results"][p]["samples"][0]["clues"] for p in st["results"]}}
            for st in report["per_state"][:8]
        ],
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    steps = [c for c in results["curve"] if "reward/mean" in c]
    xs = [c["step"] for c in steps]
    ys = [c["reward/mean"] for c in steps]
    window = max(1, len(ys) // 20)
    smooth = [statistics.mean(ys[max(0, i - window + 1):i + 1]) for i in range(len(ys))]
    ax1.plot(xs, ys, color="#9ecae1", lw=0.8, label="reward (mean of the step's samples)")
    ax1.plot(xs, smooth, color="#08519c", lw=2, label=f"moving average ({window} steps)")
    ax1.set_xlabel("step")
    ax1.set_ylabel("reward")
    ax1.set_title("GRPO training reward")
    ax1.legend(loc="lower right")

    sets = list(results["heldout"])
    metrics = [("recall_at_k", "recall@k"), ("important_discovery", "discovery"), ("ndcg_at_k", "nDCG@k")]
    width = 0.8 / (2 * len(metrics))
    for j, name in enumerate(sets):
        agg = results["heldout"][name]["aggregate"]
        for m, (key, label) in enumerate(metrics):
            for k, policy in enumerate(("baseline", "fine-tuned")):
                pol = "baseline" if policy == "baseline" else next(p for p in agg if p != "baseline")
                value = agg[pol][key]
                lo, hi = agg[pol]["ci"][key]
                x = j + (2 * m + k - len(metrics)) * width + width / 2
                ax2.bar(x, value, width, color=("#bdbdbd", "#3182bd")[k], edgecolor="black", lw=0.4,
                        label=f"{policy}" if j == 0 and m == 0 else None)
                ax2.errorbar(x, value, yerr=[[value - lo], [hi - value]], color="black", capsize=2, lw=0.8)
                if k == 0:
                    ax2.text(x + width / 2, -0.02, label, ha="center", va="top", fontsize=8)
    ax2.set_xticks(range(len(sets)))
    ax2.set_xticklabels([f"\n\n{s}" for s in sets])
    ax2.set_ylim(0, 1)
    ax2.set_title("held-out questions (IMPORTANT documents; 95% bootstrap CI)")
    ax2.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


METRICS = (("recall_at_k", "IMPORTANT recall@k"), ("important_discovery", "discovery rate"),
           ("ndcg_at_k", "nDCG@k"), ("reward_mean", "mean reward"))


def markdown_tables(results: dict[str, Any]) -> str:
    """The README's results table: each held-out set and metric, baseline vs fine-tuned, with CIs."""

    def ci(lo: float, hi: float, sign: str = "") -> str:
        return f"[{lo:{sign}.3f}, {hi:{sign}.3f}]"

    lines = ["| held-out set | metric | baseline (95% CI) | fine-tuned (95% CI) | difference (95% CI) |",
             "| --- | --- | ---: | ---: | ---: |"]
    for name, r in results["heldout"].items():
        agg, tuned = r["aggregate"], next(p for p in r["aggregate"] if p != "baseline")
        label = f"{name}: {r['states']} states, {r['questions']} questions"
        for key, metric in METRICS:
            base, new, d = agg["baseline"], agg[tuned], r["paired"][tuned][key]
            lines.append(f"| {label} | {metric} | {base[key]:.3f} {ci(*base['ci'][key])} | "
                         f"{new[key]:.3f} {ci(*new['ci'][key])} | **{d['diff']:+.3f}** {ci(*d['ci'], '+')} |")
            label = ""
    lines += ["", "| held-out set | policy | words per clue | distinct-token ratio | top token share | "
              "question copies / state | long clues / state | duplicate clues / state | unparsable |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in results["heldout"].items():
        for policy, c in r["clue_checks"].items():
            lines.append(f"| {name} | {policy} | {c['words_per_clue']:.1f} | {c['distinct_token_ratio']:.2f} | "
                         f"{c['most_common_token_share']:.3f} | {c['question_copies_per_state']:.2f} | "
                         f"{c['long_clues_per_state']:.2f} | {c['duplicate_clues_per_state']:.2f} | "
                         f"{c['unparsable_share']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    if args.report:
        results = json.loads(args.report.read_text())
        plot(results, args.report.with_name("efficacy.png"))
        print(markdown_tables(results))
        return
    quiet_libraries()
    minutes = 10.0 if args.quick else args.minutes
    eval_limit = args.eval_limit or (120 if args.quick else 400)
    heldout = args.heldout or [SHARED / "hotpotqa.jsonl"]
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    cfg = load_config(ROOT / "config.yaml", [*EXPERIMENT, *args.overrides])

    collected = collect_question_set(cfg, args.train_set)
    cfg = cfg.replace(**{"data.traces": str(collected.traces), "data.corpus": str(collected.corpus)})
    started = time.time()
    checkpoint, curve = train_within_budget(cfg, args.out, minutes)
    train_seconds = time.time() - started

    results: dict[str, Any] = {
        "command": command,
        "train_set": str(args.train_set),
        "train_minutes": train_seconds / 60,
        "steps": max((c["step"] for c in curve), default=0),
        "checkpoint": str(checkpoint),
        "config": cfg.to_dict(),
        "curve": curve,
        "heldout": {},
    }
    request = dict(baseline=True, checkpoints=[str(checkpoint)], limit=eval_limit, seed=0)
    split = run_eval(cfg, EvalRequest(**request, output=str(args.out / "eval-split.json")))
    results["heldout"][f"{args.train_set.stem} (eval split)"] = summarise(json.loads(split.read_text()))
    for qs in heldout:
        path = run_eval(cfg, EvalRequest(**request, questions=str(qs), output=str(args.out / f"eval-{qs.stem}.json")))
        results["heldout"][qs.stem] = summarise(json.loads(path.read_text()))
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "efficacy.png")
    print(markdown_tables(results))
    for name, r in results["heldout"].items():
        base = r["aggregate"]["baseline"]["recall_at_k"]
        tuned_name = next(p for p in r["aggregate"] if p != "baseline")
        d = r["paired"][tuned_name]["recall_at_k"]
        print(f"{name}: recall@k baseline {base:.3f} -> {r['aggregate'][tuned_name]['recall_at_k']:.3f} "
              f"(diff {d['diff']:+.3f}, 95% CI [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}])")
    print(f"results: {args.out / 'results.json'}, plot: {args.out / 'efficacy.png'}")


if __name__ == "__main__":
    main()
