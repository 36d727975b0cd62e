#!/usr/bin/env bash
# The default strategy on the H200, on 4 shapes outside the recorded landscapes (bench/RESULTS.md, "Search"):
#   1. exhaustive landscapes of the 4 shapes (bench/landscape.py: the regret reference, and the check's counts);
#   2. `autotune search` with auto and tpe at 20 and 40 evaluations, each on a fresh copy of a database holding
#      the 8 recorded wave-2 landscapes (bench/landscapes/wave2), with the frozen wave-2 kernel file;
#   3. the regret table (bench/auto_live_summary.py).
# REFERENCE=DIR reuses the exhaustive landscapes of an earlier run instead of step 1; SEEDS="0 1 2" repeats
# step 2 per seed.
# Run from the repo root on the GPU host, wheels in .whl/. Writes $OUT/auto.tar.gz.
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/auto
mkdir -p "$R/exhaustive"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
K=bench/kernels/gemm_fp8_wave2.py
SHAPES=${SHAPES:-128x2112x7168,4096x32768x512,64x24576x1536,4096x2112x7168}
if [ -n "${REFERENCE:-}" ]; then  # exhaustive landscapes of an earlier run (its exhaustive/ directory)
  cp "$REFERENCE"/*.json "$R/exhaustive/"
else
  python3 bench/landscape.py --kernel $K --shapes "$SHAPES" --num-tests 20 --time-budget-s "${BUDGET_S:-240}" \
    --out "$R/exhaustive" > "$R/exhaustive.log" 2>&1; echo "exhaustive rc=$?"; tail -6 "$R/exhaustive.log"
fi
python3 bench/preload_landscapes.py "sqlite:///$R/preloaded.db" bench/landscapes/wave2/gemm_fp8_*.json
args=(); for s in ${SHAPES//,/ }; do IFS=x read -r m n k <<< "$s"; args+=(--shape "M=$m,N=$n,K=$k"); done
for seed in ${SEEDS:-0}; do for strat in auto tpe; do for n in 20 40; do
  run=$strat$n; [ "$seed" = 0 ] || run=$strat$n-s$seed
  cp "$R/preloaded.db" "$R/$run.db"
  t0=$(date +%s.%N)
  python3 -m autotune search $K "${args[@]}" --strategy $strat --trials $n --seed "$seed" --db "$R/$run.db" \
    --json "$R/search_$run.json" > "$R/search_$run.log" 2>&1
  echo "search $run rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a "$R/times.txt"
  rm -f "$R/$run.db"
done; done; done
python3 bench/auto_live_summary.py "$R" | tee "$R/summary.txt"
tar -czf "$OUT/auto.tar.gz" -C "$OUT" auto && rm -rf "$R"
