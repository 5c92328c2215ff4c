#!/usr/bin/env bash
# On a machine with a CUDA GPU: optimize the five Prism workloads with --measure cuda and time each
# best kernel against PyTorch eager and torch.compile in one run (CUDA events, medians, L2
# flushed before each call: the cost model's regime).
# Writes bench/results/gpu_check/gpu_check.{md,json}. Needs the repo's .venv (make install) and
# a CUDA build of torch on that machine; stays under 8 minutes at the default 60 s per workload.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
unset TRITON_INTERPRET
exec timeout 480 "$PY" bench/gpu_check.py --out "${OUT:-bench/results/gpu_check}" \
  --budget "${BUDGET:-60}" "$@"
