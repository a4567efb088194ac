#!/usr/bin/env bash
# Issue 23's staged run, seed 0: does episode credit help once round credit has taught the clues?
# The data and collection of ../credit_360_s0_4gold (rules version 4: trained on the two-gold 2Wiki
# questions; held out: their eval split, HotpotQA and the four-gold 2Wiki questions). One
# round-credit run trains END steps (default 300). From its step-STAGE checkpoint (default 200) two
# runs start with a fresh optimiser (train.init_adapter) and train END - STAGE steps: one with
# episode credit at gamma 0.5, one with round credit (the control for the restart: a new
# optimiser, and states collected from the untrained policy again instead of the refreshed ones).
# All three are evaluated with the gold checker on the same held-out questions, then paired.
# As run on one H100 (2026-12-06): OUT=/tmp/staged (seed 0, the files here) and SEED=1
# OUT=/tmp/staged1 (../credit_staged_s1); docs/efficacy.md has the results.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/staged}; mkdir -p $OUT; SEED=${SEED:-0}
MODEL=${MODEL:-/tmp/smol.gguf}; DATA=${DATA:-/tmp/data}
STAGE=${STAGE:-200}; END=${END:-300}
OUT=$OUT MODEL=$MODEL DATA=$DATA PREPARE_ONLY=1 bash benchmarks/results/credit_360_s0_4gold/run.sh || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:${SITE:-/tmp/site} OMP_NUM_THREADS=${THREADS:-5}
common=(--checker gold --seed $SEED --eval-limit ${EVAL_LIMIT:-300} --episode-limit ${EPISODE_LIMIT:-100} --resume
        --train-set $DATA/2wiki_2gold.jsonl --heldout $DATA/hotpotqa.jsonl --heldout $DATA/2wiki_4gold.jsonl
        --set model.base=$MODEL ${EXTRA:-})  # EXTRA: a dry run's smaller settings
echo "$(date -u +%T) round to $END" >> $OUT/progress
python benchmarks/efficacy.py --credit round --steps $END --out $OUT/round "${common[@]}" > $OUT/round.log 2>&1 &
round=$!
start=$OUT/round/run/checkpoints/$(printf step-%06d $STAGE)   # renamed into place only when complete
until [ -d $start ]; do
  sleep 5; kill -0 $round 2>/dev/null || { echo "round ended before step $STAGE" >> $OUT/progress; exit 1; }
done
cp -r $start $OUT/start-$STAGE   # the round run deletes old checkpoints as it goes
echo "$(date -u +%T) staged arms from step $STAGE" >> $OUT/progress
more=$((END - STAGE))
python benchmarks/efficacy.py --credit episode --gamma 0.5 --steps $more --out $OUT/staged-episode "${common[@]}" \
    --set train.init_adapter=$OUT/start-$STAGE > $OUT/staged-episode.log 2>&1 &
python benchmarks/efficacy.py --credit round --steps $more --out $OUT/staged-round "${common[@]}" \
    --set train.init_adapter=$OUT/start-$STAGE > $OUT/staged-round.log 2>&1 &
wait
echo "$(date -u +%T) compare" >> $OUT/progress
for pair in "staged-round staged-episode" "round staged-episode" "round staged-round"; do
  set -- $pair
  python benchmarks/compare_reports.py $OUT/$1 $OUT/$2 --json $OUT/$1-vs-$2.json > $OUT/compare-$1-vs-$2.txt 2>&1
done
echo "$(date -u +%T) done" >> $OUT/progress
