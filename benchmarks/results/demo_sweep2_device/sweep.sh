#!/usr/bin/env bash
# Demo-config sweep on the device's CPU: each variant pinned to one core, one thread, same minutes.
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 SEARCHGRPO_HOME=/tmp/sghome
MIN=${MIN:-4}
common=(--set model.base=/tmp/smol.gguf --set model.device=cpu --set train.eval_every=8)
python - <<'PY' > /tmp/dc-prep.log 2>&1
import sys; sys.path.insert(0, ".")
from searchgrpo.config import load_config
from searchgrpo.policy.model import resolve_base
from searchgrpo.world import resolve_data_paths
cfg = load_config("configs/demo.yaml", ["model.base=/tmp/smol.gguf", "model.device=cpu"])
resolve_base(cfg); print(resolve_data_paths(cfg))
PY
tail -2 /tmp/dc-prep.log
declare -A V=(
  [A-asis]=""
  [B-beta04]="--set grpo.beta=0.04"
  [C-tok48]="--set grpo.max_new_tokens=48"
  [D-lr1e4]="--set train.lr=1e-4"
  [E-softguards]="--set reward.empty_clue=-0.1 --set reward.cut_clue=-0.1 --set reward.invented_number=-0.1 --set reward.long_clue=-0.1"
  [F-soft-bounds1]="--set reward.empty_clue=-0.1 --set reward.cut_clue=-0.1 --set reward.invented_number=-0.1 --set reward.long_clue=-0.1 --set reward.clue_count_out_of_bounds=-1.0"
  [G-imp2]="--set reward.new_important=2.0"
  [H-tok48-soft]="--set grpo.max_new_tokens=48 --set reward.empty_clue=-0.1 --set reward.cut_clue=-0.1 --set reward.invented_number=-0.1 --set reward.long_clue=-0.1"
)
i=0
for name in "${!V[@]}"; do
  mkdir -p /tmp/dc/$name
  taskset -c $((i*2)) timeout $((MIN*60+50)) python benchmarks/demo_curve.py --threads 1 --minutes $MIN "${common[@]}" ${V[$name]} \
      --out /tmp/dc/$name/curve.json > /tmp/dc/$name/log 2>&1 &
  i=$((i+1))
done
wait
cd /tmp && tar czf $OUT/dc.tgz --exclude="*.safetensors" --exclude="*.bin" --exclude="*.pt" dc; cd - >/dev/null
python3 - <<'PY'
import json, glob
for f in sorted(glob.glob("/tmp/dc/*/curve.json")):
    d = json.load(open(f)); n = f.split("/")[3]
    ev = [(e["step"], round(e.get("eval/recall_at_10", -1), 3), round(e.get("eval/clues_mean", -1), 2), round(e["wall_s"])) for e in d["evals"]]
    st = d["steps"]; r = [s["reward"] for s in st]
    print(n, "steps", len(st), "evals", ev, "reward first5 %.2f last5 %.2f" % (sum(r[:5])/max(1,len(r[:5])), sum(r[-5:])/max(1,len(r[-5:]))))
PY
