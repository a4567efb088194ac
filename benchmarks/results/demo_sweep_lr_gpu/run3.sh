#!/usr/bin/env bash
# The third batch: the shipped demo and lr 3e-4 at seeds 5-8 (run2.sh's seeds), so that lr 4e-4 is
# compared with the shipped lr at the same nine seeds. As run (2026-12-05, one H100, the machine of
# run2.sh): the SmolLM2 GGUF at /tmp/smol.gguf, OUT=/tmp/sweep3.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/sweep3}; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${SITE:-/tmp/site}
MODEL=${MODEL:-/tmp/smol.gguf}
for seed in 5 6 7 8; do
  python benchmarks/demo_curve.py --threads 2 --set model.base=$MODEL --set train.seed=$seed \
    --out $OUT/shipped-s$seed.json > $OUT/shipped-s$seed.log 2>&1 &
  python benchmarks/demo_curve.py --threads 2 --set model.base=$MODEL --set train.seed=$seed \
    --set train.lr=3e-4 --out $OUT/lr3-s$seed.json > $OUT/lr3-s$seed.log 2>&1 &
done
wait
