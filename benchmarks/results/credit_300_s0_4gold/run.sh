#!/usr/bin/env bash
# Issue 23: the seed-0 pair of ../credit_360_s0_4gold (round credit against episode credit at gamma
# 0.5, rules version 4, gold checker, the same data, collection and held-out sets) re-run under the
# code of 2026-12-06 (lora.compute: base, fused RMS norms, the state pool's history counts) at 300
# steps, the step count of ../credit_staged_s0. As run on one H100 (2026-12-06, 04:26-04:40 UTC):
# the SmolLM2 GGUF at /tmp/smol.gguf, the wheels of docs/efficacy.md under /tmp/site, OUT=/tmp/duo.
set -euo pipefail
cd "$(dirname "$0")/../../.."
STEPS=${STEPS:-300} OUT=${OUT:-/tmp/duo} bash benchmarks/results/credit_360_s0_4gold/run.sh
