#!/usr/bin/env bash
# gemm_fp8 vs cuBLASLt on one H200, every default shape (issue 11; bench/RESULTS.md, "gemm_fp8 vs cuBLASLt"). From the repo
# root on the GPU host, with the wheels of ../shared/gpu/wheelhouse.sh in .whl/; under 5 minutes (each step is
# bounded by what is left of ~285 s):
#   (0) cuBLASLt alone on every shape (bench/gemm_table.py baseline), a cross-check;
#   (1) every one of the 18 default shapes starts from bench/gemm_table.py's seed configs (cuBLASLt as
#       IMPL=scaled_mm, the earlier landscapes' best Triton configs, two split-K configs reduced each of the
#       three ways, five persistent ones; 17 configs): `autotune search --configs`;
#   (2) the default strategy (tpe) on the same database, TRIALS new evaluations per shape, at most
#       SHAPE_S seconds per shape;
#   (3) the table (bench/gemm_table.py table), then the fused split-K / persistent stress check and
#       gemm_fp8()'s dispatch, then (time allowing) a sample of the space compiled and checked.
# Everything lands in $OUT/gpu_gemm.tar.gz (database, logs, JSON, table).
set -uo pipefail
OUT=${OUT:-/tmp/out}
TRIALS=${TRIALS:-60}
SHAPE_S=${SHAPE_S:-7}
SITE=${SITE:-/tmp/site}
# SEARCH_ARGS: extra arguments of both searches, e.g. a dry run on a CPU:
#   NO_WHEELS=1 SEARCH_ARGS="--device cpu --shape M=32,N=48,K=64" TRITON_INTERPRET=1 PATH=$PWD/.venv/bin:$PATH \
#     bash bench/gpu_gemm.sh
read -r -a EXTRA <<< "${SEARCH_ARGS:-}"
W=$(mktemp -d /tmp/gpu_gemm.XXXX)
if [ -z "${NO_WHEELS:-}" ]; then  # NO_WHEELS=1: the dependencies are installed already (a dry run in .venv)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || exit 1
  # bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
  # process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
  python3 -m compileall -q -j 8 "$SITE" autotune > /dev/null 2>&1
fi
export PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$W/triton-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$W/gpu.txt"
K=examples/gemm_fp8.py
pack() { tar -czf "$OUT/gpu_gemm.tar.gz" -C "$W" --exclude triton-cache . ; }
t0=$SECONDS

timeout 40 python3 bench/gemm_table.py baseline --out "$W/baseline.json" > "$W/baseline.log" 2>&1
echo "baseline: exit $? at $((SECONDS - t0)) s" | tee -a "$W/steps.log"
python3 bench/gemm_table.py seeds --out "$W/seeds.json"
timeout 90 python3 -m autotune search $K "${EXTRA[@]}" --configs "$W/seeds.json" --db "$W/tune.db" --json "$W/seeds_report.json" \
  > "$W/seeds.log" 2>&1
echo "seeds: exit $? at $((SECONDS - t0)) s" | tee -a "$W/steps.log"; tail -3 "$W/seeds.log"
pack

timeout $((225 - (SECONDS - t0))) python3 -m autotune search $K "${EXTRA[@]}" --trials "$TRIALS" --timeout "$SHAPE_S" --seed 0 --db "$W/tune.db" \
  --json "$W/tpe_report.json" > "$W/tpe.log" 2>&1
echo "tpe: exit $? at $((SECONDS - t0)) s" | tee -a "$W/steps.log"

python3 bench/gemm_table.py table --db "$W/tune.db" --out "$W" --baseline "$W/baseline.json" > "$W/table.log" 2>&1
pack
timeout $((280 - (SECONDS - t0))) python3 bench/gemm_table.py stress --out "$W/stress.json" --calls 100 > "$W/stress.log" 2>&1
echo "stress: exit $? at $((SECONDS - t0)) s" | tee -a "$W/steps.log"; tail -16 "$W/stress.log"
pack
left=$((285 - (SECONDS - t0)))
if [ "$left" -gt 25 ]; then
  timeout "$left" python3 bench/gpu_space_check.py --impl persistent,triton --limit 120 --procs 14 \
    --out "$W/space_check.json" > "$W/space_check.log" 2>&1
  echo "space check: exit $? at $((SECONDS - t0)) s" | tee -a "$W/steps.log"; tail -6 "$W/space_check.log"
fi
pack
cat "$W/gemm_table.md"
