#!/usr/bin/env bash
# Wave 3 on one H200, after the merge of every wave-3 branch, in one run (bench/RESULTS.md section 17):
#   1. the GPU tests (the Kineto bench, gemm_fp8, compile-ahead for sm_90);
#   2. the fault kernel's exhaustive search, whole command (issue 24: <= 30 s, every status typed);
#   3. a 1-evaluation search, whole command, cold Triton cache then warm (issue 20: <= 10 s);
#   4. the default command (no --trials: the stopping rule) on examples/gemm_fp8.py at 2048x2112x7168 beside
#      its exhaustive search (issue 19: the default left 18.5 % there in wave 2);
#   5. bench/gpu_stop.sh: the default command on the frozen wave-2 kernel at 2 shapes outside its landscapes,
#      empty store and with the wave-2 landscapes preloaded, regret vs the stored exhaustive best.
# From the repository root with the wheels of ../shared/gpu/wheelhouse.sh in .whl/; writes under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
S=$OUT/summary.txt
wall() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$1"; }

echo "== 1. GPU tests" | tee -a "$S"
timeout 240 python3 -m pytest -q -m gpu tests/test_bench.py tests/test_kernel_triton.py tests/test_gemm_fp8.py \
  -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1
tail -2 "$OUT/gpu_tests.log" | tee -a "$S"

echo "== 2. fault kernel, exhaustive" | tee -a "$S"
OUT=$OUT/faults timeout 120 bash bench/gpu_faults.sh > "$OUT/faults.txt" 2>&1
head -12 "$OUT/faults.txt" | tee -a "$S"

echo "== 3. 1-evaluation search (gemm_fp8 2048x2112x7168)" | tee -a "$S"
cold=$(mktemp -d /tmp/triton-XXXX)
for run in cold warm; do
  t0=$(python3 -c "import time; print(time.time())")
  TRITON_CACHE_DIR=$cold timeout 120 python3 -m autotune search examples/gemm_fp8.py --shape M=2048,N=2112,K=7168 \
    --trials 1 --db "/tmp/one_$run.db" --json "$OUT/one_$run.json" > "$OUT/one_$run.log" 2>&1
  echo "1-eval $run rc=$? wall_s=$(wall "$t0")" | tee -a "$S"
done

echo "== 4. default command vs exhaustive, examples/gemm_fp8.py 2048x2112x7168" | tee -a "$S"
for run in default exhaustive; do
  args=(); [ $run = exhaustive ] && args=(--strategy exhaustive)
  t0=$(python3 -c "import time; print(time.time())")
  TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-XXXX) timeout 200 python3 -m autotune search examples/gemm_fp8.py \
    --shape M=2048,N=2112,K=7168 "${args[@]}" --db "/tmp/d_$run.db" --json "$OUT/d_$run.json" > "$OUT/d_$run.log" 2>&1
  echo "$run rc=$? wall_s=$(wall "$t0")" | tee -a "$S"
done
python3 - "$OUT" <<'PY' | tee -a "$S"
import json, sys
from pathlib import Path
o = Path(sys.argv[1])
d, e = (json.loads((o / f"d_{n}.json").read_text())[0] for n in ("default", "exhaustive"))
regret = d["best"]["time_s"] / e["best"]["time_s"] - 1
print(f"default: {d['evaluations']} evaluations, stop {d.get('stop_reason')}, best {d['best']['time_s']*1e6:.2f} us; "
      f"exhaustive: {e['evaluations']} evaluations, best {e['best']['time_s']*1e6:.2f} us; regret {regret*100:.2f} %")
PY

echo "== 5. stopping rule on the wave-2 kernel, shapes outside its landscapes" | tee -a "$S"
OUT=$OUT timeout 300 bash bench/gpu_stop.sh > "$OUT/stop.txt" 2>&1
tail -6 "$OUT/stop.txt" | tee -a "$S"
echo "== summary"; cat "$S"
# what comes back is a few files: everything but the databases in one archive
tar czf /tmp/all.tgz --exclude='*.db' -C "$OUT" . && mv /tmp/all.tgz "$OUT/all.tgz"
find "$OUT" -mindepth 1 -not -name all.tgz -not -name summary.txt -not -name gpu.txt -delete 2>/dev/null || true
