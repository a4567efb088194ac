#!/usr/bin/env bash
# The seed-0 pair of ../credit_360_s0_4gold again, under the collector's rules version 4 (the
# Planner's sub-goals of searchgrpo/agents/rules.py as they are now; the first pair ran under
# version 3). The script is that pair's: the rules are in the code, not in the script. As run on
# one H200 (2026-12-04): the SmolLM2 GGUF at /tmp/smol.gguf, OUT=/tmp/duo.
exec bash "$(dirname "$0")/../credit_360_s0_4gold/run.sh" "$@"
