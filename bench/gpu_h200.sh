#!/usr/bin/env bash
# Issue 20's H200 figures in one device call (stops 37-39 found no H200; RESULTS 27 has the H100's):
# (a) the exhaustive 1,176 sample (AB) and `auto --trials 100` (ABBA) on gemm_fp8 at M=2048,N=2112,K=7168, each
#     cold, with racing (AUTOTUNE_RACE=1.25, the default) and without (0) (bench/gpu_warm_ab.sh: evaluations per
#     second and the whole command);
# (b) the @triton.autotune side by side on 212 configs (SIDE=1 of the same script), ours with and without racing;
# (c) cold 1-evaluation searches (`--trials 1`) at three shapes outside gemm_fp8's landscapes, whole command.
# PART=19 runs issue 19's live check instead: the default command (no --trials) on gemm_fp8 (wave-2 kernel) at two
# shapes outside its landscapes against the stored H200 sweeps, cold and with the wave-2 landscapes preloaded, and
# on the held-out fp16 GEMM (bench/kernels/matmul_fp16.py) at 128x8192x8192, seeds 0 and 1, against a sweep of
# this GPU (bench/gpu_stop.sh).
# Exits 3 on a GPU other than an H200 (ONLY_H200=0 runs anyway). Everything lands in $OUT/h200.tgz.
#   OUT=/tmp/out bash bench/gpu_h200.sh          OUT=/tmp/out PART=19 bash bench/gpu_h200.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=/tmp/h200; rm -rf "$B"; mkdir -p "$B"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
if [[ "${ONLY_H200:-1}" == 1 && "$name" != *H200* ]]; then echo "not an H200: stopping"; exit 3; fi
if [ "${PART:-20}" = 19 ]; then
  OUT=$B/g SHAPES=128x2112x7168,4096x2112x7168 SEEDS=0 bash bench/gpu_stop.sh
  # SKIP_M=1: gemm_fp8 only (the matmul_fp16 sweep takes ~4 min with a cold Triton cache, RESULTS 29)
  [ -z "${SKIP_M:-}" ] && OUT=$B/m KERNEL=bench/kernels/matmul_fp16.py NAME=matmul_fp16 STORES=empty \
    REFERENCE=measure SHAPES=128x8192x8192 SEEDS="0 1" bash bench/gpu_stop.sh
  mkdir -p "$OUT"; tar -C "$B" -czf "$OUT/h200.tgz" .
  echo "== gemm_fp8"; cat "$B/g/stop/summary.txt"; echo "== matmul_fp16"; cat "$B/m/stop/summary.txt" 2>/dev/null
  exit 0
fi
export OLD_ENV=AUTOTUNE_RACE=0 NEW_ENV=AUTOTUNE_RACE=1.25  # "new": racing (the default), "old": without
OUT=$B/a SKIP_COST=1 RUNS="exh_new exh_old auto_new auto_old auto_old2 auto_new2" bash bench/gpu_warm_ab.sh
OUT=$B/b SKIP_COST=1 RUNS=" " SIDE=1 bash bench/gpu_warm_ab.sh
export PYTHONPATH=/tmp/site:$PWD
mkdir -p "$B/c"
for m in 1024 1536 3072; do
  t0=$(date +%s.%N)
  TRITON_CACHE_DIR=/tmp/tc_one$m python3 -m autotune search examples/gemm_fp8.py --shape "M=$m,N=2112,K=7168" \
    --trials 1 --db "/tmp/one$m.db" --json "$B/c/one$m.json" > "$B/c/one$m.log" 2>&1
  echo "one$m rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 2))")" | tee -a "$B/c/summary.txt"
done
mkdir -p "$OUT"; tar -C "$B" -czf "$OUT/h200.tgz" .
echo "== a"; tail -8 "$B/a/summary.txt"; echo "== b"; tail -6 "$B/b/summary.txt"; echo "== c"; cat "$B/c/summary.txt"
