#!/usr/bin/env bash
# The second batch of run.sh's sweep: the two variants that learned earliest there (lr 4e-4, with and
# without clip-higher 0.28) at four more seeds (5-8), eight runs at once, the same settings otherwise.
# As run (2026-12-05, one H100): the SmolLM2 GGUF at /tmp/smol.gguf, OUT=/tmp/sweep2.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/sweep2}; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${SITE:-/tmp/site}
MODEL=${MODEL:-/tmp/smol.gguf}
python - "$MODEL" <<'PY' > $OUT/convert.log 2>&1
import sys
from searchgrpo.config import load_config
from searchgrpo.policy.model import resolve_base
resolve_base(load_config("configs/demo.yaml", [f"model.base={sys.argv[1]}"]))
PY
for seed in 5 6 7 8; do
  python benchmarks/demo_curve.py --threads 2 --set model.base=$MODEL --set train.seed=$seed \
    --set train.lr=4e-4 --out $OUT/lr4-s$seed.json > $OUT/lr4-s$seed.log 2>&1 &
  python benchmarks/demo_curve.py --threads 2 --set model.base=$MODEL --set train.seed=$seed \
    --set train.lr=4e-4 --set grpo.epsilon_high=0.28 --out $OUT/lr4_clip28-s$seed.json > $OUT/lr4_clip28-s$seed.log 2>&1 &
done
wait
echo "$(date -u +%T) all 8 runs done" >> $OUT/progress
