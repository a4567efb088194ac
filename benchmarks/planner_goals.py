"""What the rule Planner's decomposition lets an episode find: bridge goals on and off (issue #23).

    python benchmarks/planner_goals.py      # 2Wiki split by gold count, and HotpotQA

The rule Planner answers once every sub-goal is done, one IMPORTANT document per sub-goal, so a
question's planned goals bound what its episode can find. This plays every question of each set
to the end with the rule agents (rule Planner, Executor and EntityManager, the gold checker, BM25
top `env.top_k`, at most 6 rounds), twice: with the Planner's goals as they are (a goal per named
entity, plus a goal per side of a comparison through a bridge, `agents.rules.bridge_relation`)
and without the bridge goals (the decomposition before rules version 4). Per set and arm: evidence
recall after rounds 1, 3 and 6, the share of questions with full evidence, SEARCH rounds and
goals per question. No model, no GPU; a few seconds. Written to benchmarks/results/planner_goals.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchgrpo.agents.checker import GoldChecker  # noqa: E402
from searchgrpo.agents.rules import RuleEntityManager, RuleExecutor, RulePlanner  # noqa: E402
from searchgrpo.config import Config, load_config  # noqa: E402
from searchgrpo.data.corpus import Corpus  # noqa: E402
from searchgrpo.data.labels import Label, QuestionLabels  # noqa: E402
from searchgrpo.data.questions import QuestionRecord, load_questions, pooled_corpus  # noqa: E402
from searchgrpo.episodes import play as episodes  # noqa: E402
from searchgrpo.fileio import atomic_write_json  # noqa: E402
from searchgrpo.retrieval.backends import open_retriever  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
ROUNDS = 6


def question_sets() -> dict[str, list[QuestionRecord]]:
    """2Wiki split by its gold count (2: 408 questions, 4: the 92 bridge comparisons), and HotpotQA."""
    wiki = load_questions(SHARED / "2wikimultihopqa.jsonl")
    return {
        "2wiki_2gold": [r for r in wiki if len(r.gold) == 2],
        "2wiki_4gold": [r for r in wiki if len(r.gold) == 4],
        "hotpotqa": load_questions(SHARED / "hotpotqa.jsonl"),
    }


def play_both(records: list[QuestionRecord], cfg: Config) -> dict[str, list[episodes.Episode]]:
    """Every question played to its end, with the Planner's goals and without the bridge goals (a
    bridge comparison's goals are its two sides, then a bridge per side: the first two are the
    decomposition before rules version 4)."""
    corpus = Corpus(pooled_corpus(records))
    labels = {r.id: QuestionLabels(r.question, dict.fromkeys(r.gold, Label.IMPORTANT)) for r in records}
    retriever, checker = open_retriever(cfg, corpus), GoldChecker(corpus, labels)
    out: dict[str, list[episodes.Episode]] = {}
    for arm, keep in (("bridge goals", None), ("no bridge goals", 2)):
        starts = [
            episodes.EpisodeStart(
                r.id,
                r.question,
                r.answers,
                r.gold,
                episodes.initial_state(r.question, r.sub_goals or episodes.planned_sub_goals(r.question)[:keep]),
            )
            for r in records
        ]
        out[arm] = episodes.play(
            starts,
            planner=RulePlanner(ROUNDS),
            executor=RuleExecutor(0),
            entity_manager=RuleEntityManager(),
            retriever=retriever,
            checker=checker,
            top_k=cfg.env.top_k,
        )
    return out


def figures(done: list[episodes.Episode]) -> dict[str, float]:
    def recall(e: episodes.Episode, r: int) -> float:
        return len(e.discovered_after(r) & e.start.gold) / len(e.start.gold)

    mean = statistics.mean
    return {
        **{f"recall_round_{r}": mean(recall(e, r) for e in done) for r in (1, 3, ROUNDS)},
        "full_evidence": mean(float(e.start.gold <= e.discovered_after(ROUNDS)) for e in done),
        "search_rounds": mean(sum(r.strategy == "SEARCH" for r in e.rounds) for e in done),
        "goals": mean(len(e.start.initial.goals) for e in done),
        "questions": len(done),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "planner_goals.json")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        cfg = load_config(ROOT / "config.yaml", [f"paths.cache_root={cache}"])
        results = {
            name: {arm: figures(done) for arm, done in play_both(records, cfg).items()}
            for name, records in question_sets().items()
        }
    print("| set | Planner | goals | SEARCH rounds | recall r1 | r3 | r6 | full evidence |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, arms in results.items():
        for arm, f in arms.items():
            recalls = " | ".join(f"{f[f'recall_round_{r}']:.3f}" for r in (1, 3, ROUNDS))
            print(
                f"| {name} ({f['questions']}) | {arm} | {f['goals']:.2f} | {f['search_rounds']:.2f} | "
                f"{recalls} | {f['full_evidence']:.3f} |"
            )
    command = "python benchmarks/planner_goals.py"
    atomic_write_json(args.out, {"command": command, "rounds": ROUNDS, "top_k": cfg.env.top_k, "sets": results})
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
