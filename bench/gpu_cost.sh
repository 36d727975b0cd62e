#!/usr/bin/env bash
# Where a measurement's seconds go in the timing worker (bench/measure_cost.py), on the GPU host, gemm_fp8 at
# M=2048,N=2112,K=7168 over 60 configs of the 1,176 sample. Wheels from ../shared/gpu/wheelhouse.sh in .whl/.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
TRITON_CACHE_DIR=/tmp/tc_cost timeout ${COST_TIMEOUT:-400} python3 bench/measure_cost.py examples/gemm_fp8.py \
  --shape M=2048,N=2112,K=7168 --configs bench/results/startup_configs_1176.json -n ${N:-60} \
  ${VARIANTS:+--variants $VARIANTS} --out "$OUT/cost.json" 2>&1 | tee "$OUT/cost.log"
