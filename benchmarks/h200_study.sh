#!/usr/bin/env bash
# The judge study (issue #22) and the credit study (issue #23) side by side on one GPU, in one go.
#
#   MODEL=/tmp/smol.gguf DATA=/tmp/data OUT=/tmp/study STEPS=150 MINUTES=9 bash benchmarks/h200_study.sh
#
# Six trainings share the GPU (each with cores/6 CPU threads); every evaluation is scored with the
# gold checker, whatever judge trained the policy:
#   oracle          the gold checker, round credit                 (also the credit study's `round` arm)
#   credit-episode  the gold checker, episode credit (H=2, gamma 0.8), same seed and steps as oracle
#   noise-0.1/0.2/0.3  simulated judges flipping that share of gold's labels (agreement ~0.9/0.8/0.7)
#   base            the in-process judge: the trainer's own base model (SmolLM2 for MODEL above)
# oracle and credit-episode run exactly STEPS steps and are evaluated per round and per episode
# (benchmarks/compare_reports.py pairs them); the judge arms stop at STEPS or MINUTES, whichever
# comes first, and are evaluated per round. Then judge_sweep.py audits every judge on the training
# set and charts the gains against agreement (it skips the finished trainings). Everything resumes:
# run the same command again after an interruption.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${MODEL:?a base model: MODEL=/path/smol.gguf, or tiny for a dry run}"
: "${DATA:?the folder holding 2wikimultihopqa.jsonl and hotpotqa.jsonl}"
OUT=${OUT:-benchmarks/results/study}
STEPS=${STEPS:-150}
MINUTES=${MINUTES:-9}
EVAL_LIMIT=${EVAL_LIMIT:-400}
EPISODE_LIMIT=${EPISODE_LIMIT:-120}
SEED=${SEED:-0}
PARALLEL=6
EXTRA=${EXTRA:-}  # more `--set key=value` for every arm (a dry run's sizes)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=$(( $(nproc) / PARALLEL > 0 ? $(nproc) / PARALLEL : 1 ))
sets=(--set "model.base=$MODEL" $EXTRA)
common=(--train-set "$DATA/2wikimultihopqa.jsonl" --heldout "$DATA/hotpotqa.jsonl" --seed "$SEED" --resume
        --eval-limit "$EVAL_LIMIT")
sweep=(python benchmarks/judge_sweep.py --out "$OUT" --steps "$STEPS" --minutes "$MINUTES" --eval-limit "$EVAL_LIMIT"
       --train-set "$DATA/2wikimultihopqa.jsonl" --heldout "$DATA/hotpotqa.jsonl" "${sets[@]}")

echo "$(date -u +%T) converting the model and collecting the question sets, once"
python - "$DATA" "$MODEL" $EXTRA <<'EOF' || exit 1
import sys
sys.path[:0] = [".", "benchmarks"]
from pathlib import Path

from efficacy_settings import EXPERIMENT, GOLD_JUDGE
from searchgrpo.config import load_config
from searchgrpo.episodes.collect import collect_question_set
from searchgrpo.policy.model import resolve_base
data, model, extra = sys.argv[1], sys.argv[2], [a for a in sys.argv[3:] if a != "--set"]
cfg = load_config("config.yaml", [*EXPERIMENT, f"model.base={model}", *extra]).replace(**GOLD_JUDGE)
resolve_base(cfg)  # a GGUF converted once here, not by six trainings at once
for name in ("2wikimultihopqa.jsonl", "hotpotqa.jsonl"):
    collect_question_set(cfg, Path(data) / name)
EOF

echo "$(date -u +%T) training: oracle and credit-episode ($STEPS steps), four judge arms (<= $MINUTES min)"
python benchmarks/efficacy.py --checker gold --credit round --steps "$STEPS" --out "$OUT/oracle" \
    --episode-limit "$EPISODE_LIMIT" "${common[@]}" "${sets[@]}" >>"$OUT/oracle.log" 2>&1 &
python benchmarks/efficacy.py --checker gold --credit episode --steps "$STEPS" --out "$OUT/credit-episode" \
    --episode-limit "$EPISODE_LIMIT" "${common[@]}" "${sets[@]}" >>"$OUT/credit-episode.log" 2>&1 &
"${sweep[@]}" --arms noise:0.1,noise:0.2,noise:0.3,base --parallel 4 >>"$OUT/sweep-train.log" 2>&1 &
wait
echo "$(date -u +%T) audits, chart and the credit comparison"
"${sweep[@]}" --arms oracle,noise:0.1,noise:0.2,noise:0.3,base --parallel 1 >>"$OUT/sweep.log" 2>&1
python benchmarks/compare_reports.py "$OUT/oracle" "$OUT/credit-episode" >"$OUT/credit_compare.txt" 2>&1
echo "$(date -u +%T) done"
