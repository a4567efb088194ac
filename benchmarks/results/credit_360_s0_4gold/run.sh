#!/usr/bin/env bash
# Seed-0 pair on the longest chains (issue 23): round credit against episode credit at gamma 0.5,
# trained on the 408 two-gold 2Wiki questions; held out: their eval split, HotpotQA, and the 92
# four-gold 2Wiki questions (bridge_comparison), which never enter training. As run on one H200
# (2026-12-03): the SmolLM2 GGUF at /tmp/smol.gguf, OUT=/tmp/duo, both trainings in parallel.
# SEED=N runs the same pair at another seed (default 0, as run); PREPARE_ONLY=1 stops after the collection.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/duo}; mkdir -p $OUT; SEED=${SEED:-0}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${SITE:-/tmp/site} OMP_NUM_THREADS=${THREADS:-8}
MODEL=${MODEL:-/tmp/smol.gguf}; DATA=${DATA:-/tmp/data}; mkdir -p $DATA
# The split by the number of gold paragraphs (2: 408 questions, 4: 92), each line as it is in the data.
python - ../shared/data "$DATA" <<'PY'
import json, sys
from pathlib import Path
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
lines = (src / "2wikimultihopqa.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
gold = [sum(d["gold"] for d in json.loads(line)["docs"]) for line in lines]
for n in (2, 4):
    (dst / f"2wiki_{n}gold.jsonl").write_text("".join(l for l, g in zip(lines, gold) if g == n), encoding="utf-8")
(dst / "hotpotqa.jsonl").write_text((src / "hotpotqa.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
PY
SETS="2wiki_2gold.jsonl hotpotqa.jsonl 2wiki_4gold.jsonl"
echo "$(date -u +%T) collect" > $OUT/progress
python - "$DATA" "$MODEL" $SETS <<'PY' > $OUT/collect.log 2>&1 || { echo collect failed >> $OUT/progress; exit 1; }
import sys
sys.path[:0] = [".", "benchmarks"]
from pathlib import Path
from efficacy_settings import EXPERIMENT, GOLD_JUDGE
from searchgrpo.config import load_config
from searchgrpo.episodes.collect import collect_question_set
from searchgrpo.policy.model import resolve_base
data, model, *names = sys.argv[1:]
cfg = load_config("config.yaml", [*EXPERIMENT, f"model.base={model}"]).replace(**GOLD_JUDGE)
resolve_base(cfg)
for name in names:
    collect_question_set(cfg, Path(data) / name)
PY
[ -n "${PREPARE_ONLY:-}" ] && exit 0   # the split and the collection alone (../credit_staged_s0/run.sh)
echo "$(date -u +%T) train" >> $OUT/progress
common=(--checker gold --seed $SEED --steps ${STEPS:-360} --eval-limit ${EVAL_LIMIT:-300} --episode-limit ${EPISODE_LIMIT:-100}
        --train-set $DATA/2wiki_2gold.jsonl --heldout $DATA/hotpotqa.jsonl --heldout $DATA/2wiki_4gold.jsonl
        --resume --set model.base=$MODEL)
python benchmarks/efficacy.py --credit round --out $OUT/round-s$SEED "${common[@]}" > $OUT/round-s$SEED.log 2>&1 &
python benchmarks/efficacy.py --credit episode --gamma 0.5 --out $OUT/episode-g05-s$SEED "${common[@]}" > $OUT/episode-g05-s$SEED.log 2>&1 &
wait
echo "$(date -u +%T) compare" >> $OUT/progress
python benchmarks/compare_reports.py $OUT/round-s$SEED $OUT/episode-g05-s$SEED --json $OUT/round-vs-g05.json > $OUT/compare-round-g05.txt 2>&1
echo "$(date -u +%T) done" >> $OUT/progress
