#!/usr/bin/env bash
# `autotune serve` on the CPU example (bench/RESULTS.md section 19): whole-command seconds of a 1- and a
# 10-evaluation `autotune search` handed to a warm service vs the same search with --local (its own workers),
# a request tuned, a production miss served tuned to the same process, SIGTERM. From the repository root,
# with the project installed; writes under ${OUT:-bench/results/serve_cpu}.
set -uo pipefail
OUT=${OUT:-bench/results/serve_cpu}
mkdir -p "$OUT"
S=$OUT/summary.txt; : > "$S"
PY=${PY:-python}
now() { date +%s.%N; }
since() { $PY -c "import sys; print(round($(now) - float(sys.argv[1]), 2))" "$1"; }
wait_for() { local end=$(( $(date +%s) + $3 )); until grep -qE "$1" "$2"; do
  [ "$(date +%s)" -ge $end ] && return 1; sleep 0.1; done; }
DB=sqlite:////tmp/serve_cpu_$$.db
K=examples/matmul_cpu.py
export AUTOTUNE_RETIME_TOP=0 AUTOTUNE_NUM_TESTS=5
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$S"
$PY -m autotune db upgrade --db $DB > /dev/null 2>&1
t0=$(now)
$PY -m autotune serve --kernels $K --devices cpu --db $DB --log-format json > "$OUT/serve.log" 2>&1 &
SERVE=$!
wait_for '"event": "serving"' "$OUT/serve.log" 300 && echo "service start -> serving: $(since "$t0") s" | tee -a "$S"
run() {  # run NAME ARGS...: one whole search command
  local name=$1; shift; local t0; t0=$(now)
  $PY -m autotune search $K --device cpu --db $DB --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_s=$(since "$t0") $(grep -c 'handed to autotune serve' "$OUT/$name.log") handed" | tee -a "$S"
}
for i in 1 2 3; do
  run "one_service_$i" --shape "M=64,N=64,K=$((32 * i))" --trials 1
  run "one_local_$i" --shape "M=64,N=$((32 * i)),K=64" --trials 1 --local
done
run ten_service --shape M=128,N=64,K=64 --trials 10
run ten_local --shape M=64,N=128,K=64 --trials 10 --local
t0=$(now)
$PY -m autotune request $K --shape M=96,N=96,K=96 --device cpu --db $DB > /dev/null 2>&1
wait_for '"event": "tuned".*M=96,N=96,K=96' "$OUT/serve.log" 300 && echo "request -> tuned (stopping rule): $(since "$t0") s" | tee -a "$S"
AUTOTUNE_DB=$DB timeout 400 $PY bench/serve_miss.py matmul_cpu M=80,N=80,K=80 --timeout 360 --json "$OUT/miss.json" \
  > "$OUT/miss.log" 2>&1
tail -1 "$OUT/miss.log" | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); print('miss -> served tuned to the same process:', d['seconds_to_tuned'], 's', d['answers'])" | tee -a "$S"
$PY -m autotune request $K --shape M=256,N=256,K=256 --device cpu --db $DB > /dev/null 2>&1
wait_for '"event": "tuning".*M=256' "$OUT/serve.log" 120; sleep 1
t0=$(now); kill -TERM $SERVE; wait $SERVE; rc=$?
echo "SIGTERM during a search: exit $rc after $(since "$t0") s" | tee -a "$S"
$PY - "$DB" <<'PY' | tee -a "$S"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1].removeprefix("sqlite:///"))
print("claims still running:", c.execute("select count(*) from autotune_claims where status = 'running'").fetchone()[0],
      "| requests:", c.execute("select status, count(*) from autotune_shape_requests group by status").fetchall())
PY
rm -f "${DB#sqlite:///}"*
