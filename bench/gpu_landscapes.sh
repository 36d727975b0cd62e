#!/usr/bin/env bash
# Record exhaustive H200 landscapes of the wave-2 gemm_fp8 space (bench/kernels/gemm_fp8_wave2.py: 1,440 valid
# configs) for `autotune replay` and the search benchmarks (bench/RESULTS.md, "Search"). Run on the GPU host
# from the repo root, wheels in .whl/ (../shared/gpu/wheelhouse.sh). Writes $OUT/landscapes.tar.gz.
#   SHAPES="64x2112x7168,..." NUM_TESTS=20 BUDGET_S=500 bash bench/gpu_landscapes.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/landscapes"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/landscapes/gpu.txt"
SHAPES=${SHAPES:-64x2112x7168,128x24576x1536,4096x7168x2048,4096x4096x7168,2048x2112x7168,64x32768x512,128x7168x16384,4096x7168x16384}
python3 bench/landscape.py --shapes "$SHAPES" --num-tests "${NUM_TESTS:-20}" --time-budget-s "${BUDGET_S:-500}" \
  --out "$OUT/landscapes" 2>&1 | tee "$OUT/landscapes/landscape_h200.log" | grep -v "configs, " 
tar -czf "$OUT/landscapes.tar.gz" -C "$OUT" landscapes && rm -rf "$OUT/landscapes"
