#!/usr/bin/env bash
# The default strategy on the H200, on 4 shapes outside the recorded landscapes (bench/RESULTS.md, "Search"):
#   1. exhaustive landscapes of the 4 shapes (bench/landscape.py: the regret reference, and the check's counts);
#   2. `autotune search` with auto and tpe at 20 and 40 evaluations, each on a fresh copy of a database holding
#      the 8 recorded wave-2 landscapes (bench/landscapes/wave2), with the frozen wave-2 kernel file;
#   3. the regret table (bench/auto_live_summary.py).
# Run from the repo root on the GPU host, wheels in .whl/. Writes $OUT/auto.tar.gz.
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/auto
mkdir -p "$R/exhaustive"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD
K=bench/kernels/gemm_fp8_wave2.py
SHAPES=${SHAPES:-128x2112x7168,4096x32768x512,64x24576x1536,4096x2112x7168}
python3 bench/landscape.py --kernel $K --shapes "$SHAPES" --num-tests 20 --time-budget-s "${BUDGET_S:-240}" \
  --out "$R/exhaustive" > "$R/exhaustive.log" 2>&1; echo "exhaustive rc=$?"; tail -6 "$R/exhaustive.log"
python3 bench/preload_landscapes.py "sqlite:///$R/preloaded.db" bench/landscapes/wave2/gemm_fp8_*.json
args=(); for s in ${SHAPES//,/ }; do IFS=x read -r m n k <<< "$s"; args+=(--shape "M=$m,N=$n,K=$k"); done
for strat in auto tpe; do for n in 20 40; do
  cp "$R/preloaded.db" "$R/$strat$n.db"
  t0=$(date +%s.%N)
  python3 -m autotune search $K "${args[@]}" --strategy $strat --trials $n --seed 0 --db "$R/$strat$n.db" \
    --json "$R/search_$strat$n.json" > "$R/search_$strat$n.log" 2>&1
  echo "search $strat $n rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a "$R/times.txt"
  rm -f "$R/$strat$n.db"
done; done
python3 bench/auto_live_summary.py "$R" | tee "$R/summary.txt"
tar -czf "$OUT/auto.tar.gz" -C "$OUT" auto && rm -rf "$R"
