#!/usr/bin/env bash
# On a machine with a CUDA GPU, one prepared script (issue 15 item 5):
# 1. `prism calibrate`: launch overhead, HBM and L2 bandwidth and few-block bandwidth measured by
#    Triton microbenchmarks, beside the cost model's numbers
#    (bench/results/calibration/calibration-<device>-measured.json);
# 2. the nine workloads and the three safe attention variants (issue 19: their torch program is
#    F.scaled_dot_product_attention; also run on logits of magnitude 100) optimized with
#    --measure cuda, each best kernel timed against PyTorch
#    eager and torch.compile in one run (CUDA events, medians, L2 flushed before each call: the
#    cost model's regime), with the model's error per workload
#    (bench/results/gpu_check/gpu_check.{md,json}); `prism bench` reads both as measured rows.
# Run bench/gpu_prep.sh on the CPU machine first and carry .gpu: each workload's search is then
# loaded from its checkpoint, and the budget goes to tuning (without one, a 35 s budget on 16
# cores did not reach attention's split-key programs, 2026-12-04). Needs prism's dependencies and
# a CUDA build of torch there (PY=python3 with z3-solver on PYTHONPATH did on the H200).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEVICE=${DEVICE:-h100}
unset TRITON_INTERPRET
timeout 90 "$PY" -m prism calibrate --device "$DEVICE" --out bench/results/calibration
exec timeout 480 "$PY" bench/gpu_check.py --out "${OUT:-bench/results/gpu_check}" \
  --device "$DEVICE" --budget "${BUDGET:-20}" --checkpoints "${CHECKPOINTS:-.gpu/checkpoints}" "$@"
