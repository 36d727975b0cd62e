#!/usr/bin/env bash
# H200 runs for `autotune search` (issue 4) and the timer comparison (issue 2); see bench/RESULTS.md.
#   bash bench/gpu_search.sh a   # GPU tests, timer comparison (COMPARE=1), TPE search (40 trials x 4 shapes)
#   bash bench/gpu_search.sh b   # exhaustive search of the same 4 shapes, lookup overhead
# Needs the wheels of ../shared/gpu/wheelhouse.sh in .whl/.
set -uo pipefail
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
SHAPES=(--shape M=64,N=2112,K=7168 --shape M=128,N=24576,K=1536 --shape M=4096,N=7168,K=2048 --shape M=4096,N=4096,K=7168)
case "${1:-a}" in
a)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_bench.py tests/test_gemm_fp8.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -5
  [ -n "${COMPARE:-}" ] && timeout 150 python3 bench/compare_timers.py --out "$OUT" 2>&1 | tee "$OUT/compare_timers.log" | tail -28
  start=$SECONDS
  python3 -m autotune search examples/gemm_fp8.py "${SHAPES[@]}" --trials 40 --seed 0 --timeout 100 \
    --db "$OUT/tpe.db" --json "$OUT/search_tpe.json" > "$OUT/search_tpe.log" 2>&1
  echo "exit $? wall $((SECONDS - start)) s" | tee -a "$OUT/search_tpe.log"; tail -12 "$OUT/search_tpe.log"
  ;;
b)
  start=$SECONDS
  python3 -m autotune search examples/gemm_fp8.py "${SHAPES[@]}" --strategy exhaustive --trials 5000 --compile-workers 14 \
    --timeout 115 --db "$OUT/exh.db" --json "$OUT/search_exh.json" > "$OUT/search_exh.log" 2>&1
  echo "exit $? wall $((SECONDS - start)) s" | tee -a "$OUT/search_exh.log"; tail -12 "$OUT/search_exh.log"
  python3 bench/lookup_overhead.py --db "$OUT/exh.db" --device cuda 2>&1 | tee "$OUT/lookup_overhead.log"
  ;;
esac
