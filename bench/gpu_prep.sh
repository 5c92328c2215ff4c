#!/usr/bin/env bash
# Before bench/gpu_check.sh, on this (CPU) machine: each workload's search run here, its symbolic
# checkpoint written gzip'd to .gpu/checkpoints/<workload>.ck.json.gz (git-ignored). Carry
# .gpu to the GPU machine (the device tool's `carry`): gpu_check.sh passes each checkpoint to
# its optimize run, which re-instantiates it (re-proved, modeled as the search modeled it) and
# spends its budget on tuning and timing, not on the search. A workload whose checkpoint is
# already there is skipped; delete the folder after a change to the search.
#   bench/gpu_prep.sh [WORKLOAD ...]     (BUDGET=600 s each, DEVICE=h200, WORKERS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DIR=${DIR:-.gpu/checkpoints}
mkdir -p "$DIR"
WORKLOADS=("$@")
if [ ${#WORKLOADS[@]} -eq 0 ]; then
  WORKLOADS=(rmsnorm_matmul rmsnorm_mlp swiglu attention qknorm_attention gated_mlp lora gqa
             ntrans attention_safe qknorm_attention_safe gqa_safe)
fi
for w in "${WORKLOADS[@]}"; do
  if [ -f "$DIR/$w.ck.json.gz" ]; then
    echo "$w: $DIR/$w.ck.json.gz is there"
    continue
  fi
  started=$(date +%s)
  OMP_NUM_THREADS=1 "$PY" -m prism optimize "$w" --measure model --device "${DEVICE:-h200}" \
    --budget "${BUDGET:-600}" --executor processes --workers "${WORKERS:-2}" \
    --checkpoint "$DIR/$w.ck.json.gz" --out "${TMPDIR:-/tmp}/gpu_prep/$w" --json >/dev/null
  echo "$w: $DIR/$w.ck.json.gz ($(du -h "$DIR/$w.ck.json.gz" | cut -f1)) in $(( $(date +%s) - started )) s"
done
