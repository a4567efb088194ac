#!/usr/bin/env bash
# Issue 26.4: which demo settings keep SmolLM2 writing more than one clue in every seed? The demo
# (configs/demo.yaml, 90 steps, evals every 15 on 32 held-out states) on one H200, seeds 0-4, with
# the shipped settings and three variants aimed at the collapse to one clue (89% of completions cut
# at 32 tokens; cut and empty clues cost more than the first finds pay). A GPU proxy for the CPU
# demo: same config, CUDA instead of CPU, so seeds' curves differ from the CPU's in detail.
# As run (2026-12-04): the SmolLM2 GGUF at /tmp/smol.gguf, OUT=/tmp/sweep, four runs at a time. Three
# seed-0 runs stopped at once on the demo world's build race (fixed since) and were started again by
# hand with --threads 2 beside the shipped seed-0 run.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/sweep}; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${SITE:-/tmp/site}
MODEL=${MODEL:-/tmp/smol.gguf}
python - "$MODEL" <<'PY' > $OUT/convert.log 2>&1  # convert the GGUF once, before the parallel runs
import sys
from searchgrpo.config import load_config
from searchgrpo.policy.model import resolve_base
resolve_base(load_config("configs/demo.yaml", [f"model.base={sys.argv[1]}"]))
PY
declare -A VARIANTS=(
  [shipped]=""
  [tok48]="--set grpo.max_new_tokens=48"
  [nocut]="--set reward.cut_clue=0"
  [tok48_nocut]="--set grpo.max_new_tokens=48 --set reward.cut_clue=0"
)
for seed in 0 1 2 3 4; do
  for v in shipped tok48 nocut tok48_nocut; do
    python benchmarks/demo_curve.py --threads 3 --set model.base=$MODEL --set train.seed=$seed \
      ${VARIANTS[$v]} --out $OUT/$v-s$seed.json > $OUT/$v-s$seed.log 2>&1 &
  done
  wait
  echo "$(date -u +%T) seed $seed done" >> $OUT/progress
done
