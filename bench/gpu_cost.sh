#!/usr/bin/env bash
# Where a measurement's seconds go in the timing worker (bench/measure_cost.py), on the GPU host, gemm_fp8 at
# M=2048,N=2112,K=7168 over 60 configs of the 1,176 sample. Wheels from ../shared/gpu/wheelhouse.sh in .whl/.
set -uo pipefail
. bench/gpu_env.sh
TRITON_CACHE_DIR=/tmp/tc_cost timeout ${COST_TIMEOUT:-400} python3 bench/measure_cost.py examples/gemm_fp8.py \
  --shape M=2048,N=2112,K=7168 --configs bench/results/startup_configs_1176.json -n ${N:-60} \
  ${VARIANTS:+--variants $VARIANTS} --out "$OUT/cost.json" 2>&1 | tee "$OUT/cost.log"
