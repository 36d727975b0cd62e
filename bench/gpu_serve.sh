#!/usr/bin/env bash
# Wave 3 (issues 23 and 20) on one H200, in one run (bench/RESULTS.md section 18):
#   1. `autotune serve --kernels examples/gemm_fp8.py` started on a fresh SQLite database: seconds to "serving";
#   2. `autotune request` of gemm_fp8 2048x2112x7168: whole request command, then seconds until the service
#      logged it tuned (the default stopping rule), and `autotune best` reads the row;
#   3. a production process's miss (bench/serve_miss.py: best_config(record=True) every 0.2 s) at
#      4096x2112x7168: seconds until that same process gets the tuned config;
#   4. `autotune search` handed to the service, 1 and 40 evaluations, whole command, vs the same with --local
#      (a cold process, its own database and Triton cache);
#   5. SIGTERM: seconds to exit, exit status, running claims left;
#   6. a 100-evaluation auto search vs the exhaustive strategy (1,176 configs), evaluations/s (issue 20;
#      SKIP_RATE=1 leaves it out).
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
now() { date +%s.%N; }
since() { python3 -c "import sys; print(round($(now) - float(sys.argv[1]), 2))" "$1"; }
# wait_for PATTERN FILE SECONDS: until a line of FILE matches (grep -E), or the time is up
wait_for() { local end=$(( $(date +%s) + $3 )); until grep -qE "$1" "$2"; do
  [ "$(date +%s)" -ge $end ] && return 1; sleep 0.1; done; }
python3 -c "import torch, triton"  # the page cache holds torch's files for every run alike

DB=sqlite:////tmp/serve.db
export AUTOTUNE_DB=$DB TRITON_CACHE_DIR=/tmp/tc_serve
echo "== 1. service start" | tee -a "$S"
t0=$(now)
python3 -m autotune serve --kernels examples/gemm_fp8.py --db $DB --log-format json > "$OUT/serve.log" 2>&1 &
SERVE=$!
wait_for '"event": "serving"' "$OUT/serve.log" 120 && echo "serving after $(since "$t0") s" | tee -a "$S"

echo "== 2. autotune request -> tuned" | tee -a "$S"
t0=$(now)
python3 -m autotune request examples/gemm_fp8.py --shape M=2048,N=2112,K=7168 --db $DB > "$OUT/request.log" 2>&1
echo "request command rc=$? $(since "$t0") s" | tee -a "$S"
wait_for '"event": "tuned".*2048' "$OUT/serve.log" 300 && echo "tuned after $(since "$t0") s" | tee -a "$S"
python3 -m autotune best gemm_fp8 --shape M=2048,N=2112,K=7168 --db $DB 2>&1 | tail -3 | tee -a "$S"

echo "== 3. a production miss, served tuned to the same process" | tee -a "$S"
timeout 240 python3 bench/serve_miss.py gemm_fp8 M=4096,N=2112,K=7168 --timeout 200 --json "$OUT/miss.json" \
  > "$OUT/miss.log" 2>&1
tail -4 "$OUT/miss.log" | tee -a "$S"

echo "== 4. search through the service (1 and 40 evaluations), and --local (cold process, own DB and cache)" | tee -a "$S"
python3 -m autotune search --help > "$OUT/search_help.txt" 2>&1 || echo "search --help rc=$?" | tee -a "$S"
for n in 1 40; do
  M=$([ $n = 1 ] && echo 1024 || echo 512)
  for mode in service local; do
    args=(--db $DB); [ $mode = local ] && args=(--local --db sqlite:////tmp/local_$n.db)
    t0=$(now)
    TRITON_CACHE_DIR=$([ $mode = local ] && echo /tmp/tc_local_$n || echo /tmp/tc_serve) \
    timeout 200 python3 -m autotune search examples/gemm_fp8.py --shape M=$M,N=2112,K=7168 --trials $n \
      "${args[@]}" --json "$OUT/s${n}_$mode.json" > "$OUT/s${n}_$mode.log" 2>&1
    echo "$n-eval M=$M via $mode rc=$? wall_s=$(since "$t0")" | tee -a "$S"
    tail -3 "$OUT/s${n}_$mode.log" | tee -a "$S"
  done
done

echo "== 5. SIGTERM" | tee -a "$S"
python3 -m autotune request examples/gemm_fp8.py --shape M=8192,N=2112,K=7168 --db $DB > /dev/null 2>&1
wait_for '"event": "tuning".*8192' "$OUT/serve.log" 60; sleep 2
t0=$(now); kill -TERM $SERVE; wait $SERVE; rc=$?
echo "SIGTERM during a search: exit $rc after $(since "$t0") s" | tee -a "$S"
python3 -m autotune show --services --db $DB 2>&1 | tail -4 | tee -a "$S"
python3 - <<'PY' | tee -a "$S"
import sqlite3
c = sqlite3.connect("/tmp/serve.db")
print("claims still running:", c.execute("select count(*) from autotune_claims where status = 'running'").fetchone()[0])
PY

[ -n "${SKIP_RATE:-}" ] || { echo "== 6. auto 100 evaluations vs exhaustive 1,176 (evaluations/s)" | tee -a "$S"
for run in auto100 exh1176; do
  args=(--trials 100 --seed 0)
  [ $run = exh1176 ] && args=(--configs bench/results/startup_configs_1176.json --strategy exhaustive --trials 5000)
  t0=$(now)
  TRITON_CACHE_DIR=/tmp/tc_$run timeout 200 python3 -m autotune search examples/gemm_fp8.py \
    --shape M=2048,N=2112,K=7168 --db "/tmp/$run.db" --json "$OUT/$run.json" "${args[@]}" > "$OUT/$run.log" 2>&1
  echo "$run rc=$? wall_s=$(since "$t0")" | tee -a "$S"
done
python3 - "$OUT" <<'PY' | tee -a "$S"
import json, sys
from pathlib import Path
o = Path(sys.argv[1])
rate = {}
for n in ("auto100", "exh1176"):
    try:
        r = json.loads((o / f"{n}.json").read_text())[0]
        rate[n] = r["evaluations"] / r["wall_s"]
        print(f"{n}: {r['evaluations']} evaluations in {r['wall_s']:.2f} s = {rate[n]:.2f}/s, best {r['best']['time_s']*1e6:.2f} us")
    except Exception as e:
        print(n, "no result:", e)
if len(rate) == 2:
    print(f"auto / exhaustive rate: {100 * rate['auto100'] / rate['exh1176']:.0f} %")
PY
}
echo "== summary"; cat "$S"
tar czf /tmp/all.tgz --exclude='*.db' -C "$OUT" . && mv /tmp/all.tgz "$OUT/all.tgz"
find "$OUT" -mindepth 1 -not -name all.tgz -not -name summary.txt -not -name gpu.txt -delete 2>/dev/null || true
