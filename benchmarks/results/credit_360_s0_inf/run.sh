#!/usr/bin/env bash
# Two 360-step seed-0 arms with the informative state pool: round credit and episode credit.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=/tmp/duo; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site OMP_NUM_THREADS=8
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
common=(--checker gold --seed 0 --steps 360 --eval-limit 300 --episode-limit 100
        --train-set $DATA/2wikimultihopqa.jsonl --heldout $DATA/hotpotqa.jsonl --resume
        --state-sampler informative --set model.base=$MODEL
        --set train.informative_weight=0.02 --set train.informative_retry=300)
python benchmarks/efficacy.py --credit round --out $OUT/round-inf "${common[@]}" > $OUT/round-inf.log 2>&1 &
python benchmarks/efficacy.py --credit episode --out $OUT/episode-inf "${common[@]}" > $OUT/episode-inf.log 2>&1 &
wait
echo "$(date -u +%T) compare" >> $OUT/progress
python benchmarks/compare_reports.py $OUT/round-inf $OUT/episode-inf --json $OUT/roundinf-vs-episodeinf.json > $OUT/compare.txt 2>&1
echo "$(date -u +%T) done" >> $OUT/progress
