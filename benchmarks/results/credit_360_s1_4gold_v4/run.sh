#!/usr/bin/env bash
# The second seed of ../credit_360_s0_4gold_v4: round credit against episode credit at gamma 0.5,
# seed 1, under the collector's rules version 4. As run on one H200 (2026-12-04): the SmolLM2 GGUF
# at /tmp/smol.gguf, OUT=/tmp/duo.
SEED=1 exec bash "$(dirname "$0")/../credit_360_s0_4gold/run.sh" "$@"
