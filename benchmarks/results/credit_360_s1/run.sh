#!/usr/bin/env bash
# Seed-1 trio, epoch sampler: round credit, episode credit gamma 0.8, episode credit gamma 0.5.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=/tmp/duo; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site OMP_NUM_THREADS=5
MODEL=/tmp/smol.gguf; DATA=/tmp/data
echo "$(date -u +%T) collect" > $OUT/progress
python - "$DATA" "$MODEL" <<'PY' > $OUT/collect.log 2>&1 || { echo collect failed >> $OUT/progress; exit 1; }
import sys
sys.path[:0] = [".", "benchmarks"]
from pathlib import Path
from efficacy_settings import EXPERIMENT, GOLD_JUDGE
from searchgrpo.config import load_config
from searchgrpo.episodes.collect import collect_question_set
from searchgrpo.policy.model import resolve_base
data, model = sys.argv[1], sys.argv[2]
cfg = load_config("config.yaml", [*EXPERIMENT, f"model.base={model}"]).replace(**GOLD_JUDGE)
resolve_base(cfg)
for name in ("2wikimultihopqa.jsonl", "hotpotqa.jsonl"):
    collect_question_set(cfg, Path(data) / name)
PY
echo "$(date -u +%T) train" >> $OUT/progress
common=(--checker gold --seed 1 --steps 360 --eval-limit 300 --episode-limit 100
        --train-set $DATA/2wikimultihopqa.jsonl --heldout $DATA/hotpotqa.jsonl --resume
        --set model.base=$MODEL)
python benchmarks/efficacy.py --credit round --out $OUT/round-s1 "${common[@]}" > $OUT/round-s1.log 2>&1 &
python benchmarks/efficacy.py --credit episode --out $OUT/episode-s1 "${common[@]}" > $OUT/episode-s1.log 2>&1 &
python benchmarks/efficacy.py --credit episode --out $OUT/episode-g05-s1 "${common[@]}" --set grpo.credit_gamma=0.5 > $OUT/episode-g05-s1.log 2>&1 &
wait
echo "$(date -u +%T) compare" >> $OUT/progress
python benchmarks/compare_reports.py $OUT/round-s1 $OUT/episode-s1 --json $OUT/round-vs-episode.json > $OUT/compare-round-episode.txt 2>&1
python benchmarks/compare_reports.py $OUT/episode-s1 $OUT/episode-g05-s1 --json $OUT/g08-vs-g05.json > $OUT/compare-g08-g05.txt 2>&1
python benchmarks/compare_reports.py $OUT/round-s1 $OUT/episode-g05-s1 --json $OUT/round-vs-g05.json > $OUT/compare-round-g05.txt 2>&1
echo "$(date -u +%T) done" >> $OUT/progress
