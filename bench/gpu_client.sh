#!/usr/bin/env bash
# Issues 23 and 20 on one GPU, in one run (bench/RESULTS.md section 22): where the seconds of a search handed
# to a warm `autotune serve` go on the client's side, and what compiled bytecode changes for it and for a cold
# 1-evaluation search in one process.
#   1. the host's Python: the bytecode flags; `import autotune.cli, autotune.store` twice with the wheels
#      installed as every earlier bench did (`pip install --no-compile`);
#   2. `autotune serve --kernels examples/gemm_fp8.py` on a fresh SQLite database;
#   3. 1-evaluation `autotune search` through the service, 3 shapes, AUTOTUNE_TRACE_STARTUP=1, bytecode as
#      section 1 left it;
#   4. the wheels and the source compiled to bytecode (what `pip install` does by default); the import again;
#      3 more shapes through the service with this code, and 3 with the baseline's code (BASE_DIR: an older
#      `autotune/` and `alembic/`, same service);
#   5. SIGTERM to the service; then a cold 1-evaluation search in one process (own database and Triton
#      cache), this code twice and the baseline once, traced.
# QUICK=1: sections 2, 4 and 5 only, this code only, bytecode compiled first. The service's own phases are traced
# too (its AUTOTUNE_TRACE_STARTUP file, printed at the end).
# From the repository root with the wheels of ../shared/gpu/wheelhouse.sh in .whl/; writes under $OUT (all logs
# in all.tgz).
set -uo pipefail
OUT=${OUT:-/tmp/out}
BASE_DIR=${BASE_DIR:-}
mkdir -p "$OUT"
S=$OUT/summary.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt" | tee -a "$S"
now() { date +%s.%N; }
since() { python3 -c "import sys; print(round($(now) - float(sys.argv[1]), 2))" "$1"; }
wait_for() { local end=$(( $(date +%s) + $3 )); until grep -qE "$1" "$2"; do
  [ "$(date +%s)" -ge $end ] && return 1; sleep 0.1; done; }
imports() {  # whole-process seconds of the handed-over search's own imports
  local t0; t0=$(now); python3 -c "import autotune.cli, autotune.store, autotune.service.client"
  echo "  import autotune.cli, autotune.store, autotune.service.client: $(since "$t0") s" | tee -a "$S"
}
ROOT=$PWD
# one handed-over 1-evaluation search: LABEL M [CODE_DIR] (run from CODE_DIR, whose autotune/ `-m` then takes)
handed() {
  local t0; t0=$(now)
  (cd "${3:-$ROOT}" && PYTHONPATH=/tmp/site:$PWD AUTOTUNE_TRACE_STARTUP=1 timeout 100 python3 -m autotune search \
    "$ROOT/examples/gemm_fp8.py" --shape M=$2,N=2112,K=7168 --trials 1 --db $DB > "$OUT/$1.log" 2>&1)
  echo "  $1 M=$2 rc=$? wall_s=$(since "$t0") $(grep -c 'handed to autotune serve' "$OUT/$1.log") handed" | tee -a "$S"
}

echo "== 1. the host's Python" | tee -a "$S"
python3 -c "import sys, os; print(sys.version.split()[0], 'dont_write_bytecode', sys.dont_write_bytecode, 'PYTHONDONTWRITEBYTECODE', os.environ.get('PYTHONDONTWRITEBYTECODE'), 'pycache_prefix', sys.pycache_prefix)" | tee -a "$S"
env | grep -E '^PYTHON' | tee -a "$S"
python3 -c "import torch, triton"  # the page cache holds torch's files for every run alike
[ -n "${QUICK:-}" ] && { python3 -m compileall -q -j 8 /tmp/site autotune alembic > /dev/null 2>&1; BASE_DIR=; }
imports; imports
echo "  .pyc files under /tmp/site: $(find /tmp/site -name '*.pyc' | wc -l), under autotune/: $(find autotune -name '*.pyc' | wc -l)" | tee -a "$S"

DB=sqlite:////tmp/serve.db
export TRITON_CACHE_DIR=/tmp/tc_serve
echo "== 2. service start" | tee -a "$S"
t0=$(now)
touch "$OUT/service_trace.jsonl"
AUTOTUNE_TRACE_STARTUP=$OUT/service_trace.jsonl python3 -m autotune serve --kernels examples/gemm_fp8.py --db $DB \
  --log-format json > "$OUT/serve.log" 2>&1 &
SERVE=$!
wait_for '"event": "serving"' "$OUT/serve.log" 120 && echo "  serving after $(since "$t0") s" | tee -a "$S"
handed warmup 4096  # the service's first search of the kernel (its first Triton compile in the service)

[ -z "${QUICK:-}" ] && { echo "== 3. 1-evaluation searches through the service, bytecode as section 1 left it" | tee -a "$S"
for M in 1024 1536 3072; do handed as_is_$M $M; done; }

echo "== 4. compiled bytecode (pip's default)" | tee -a "$S"
t0=$(now)
python3 -m compileall -q -j 8 /tmp/site autotune alembic ${BASE_DIR:+$BASE_DIR} > /dev/null 2>&1
echo "  compileall $(since "$t0") s" | tee -a "$S"
imports; imports
for M in 768 1280 2560; do
  handed new_$M $M
  [ -n "$BASE_DIR" ] && handed base_$((M + 64)) $((M + 64)) "$ROOT/$BASE_DIR"
done

echo "== 5. SIGTERM, then cold 1-evaluation searches in one process" | tee -a "$S"
t0=$(now); kill -TERM $SERVE; wait $SERVE; echo "  SIGTERM: exit $? after $(since "$t0") s" | tee -a "$S"
for run in new_a base new_b; do
  [ $run = base ] && [ -z "$BASE_DIR" ] && continue
  dir=$ROOT; [ $run = base ] && dir=$ROOT/$BASE_DIR
  t0=$(now)
  (cd "$dir" && PYTHONPATH=/tmp/site:$PWD TRITON_CACHE_DIR=/tmp/tc_local_$run AUTOTUNE_TRACE_STARTUP=1 timeout 120 \
    python3 -m autotune search "$ROOT/examples/gemm_fp8.py" --shape M=1024,N=2112,K=7168 --trials 1 \
    --db sqlite:////tmp/local_$run.db --json "$OUT/local_$run.json" > "$OUT/local_$run.log" 2>&1)
  echo "  cold local $run rc=$? wall_s=$(since "$t0")" | tee -a "$S"
done

echo "== where the handed-over searches' seconds went (traced, this code)" | tee -a "$S"
for f in "$OUT"/new_*.log "$OUT"/as_is_*.log; do
  echo "-- $(basename "$f")"; sed -n '/start-up timeline/,$p' "$f" | tail -n +3
done | tee -a "$S"
echo "== the service's own phases (its trace)" | tee -a "$S"
python3 -c "import sys; from autotune import timeline; print(timeline.format_rows(timeline.read(sys.argv[1])))" \
  "$OUT/service_trace.jsonl" | grep -v 'job [0-9]*: inputs' | tail -60 > "$OUT/service_trace.txt"
tail -40 "$OUT/service_trace.txt" | tee -a "$S"
for f in "$OUT"/local_*.log; do echo "-- $(basename "$f")"; sed -n '/start-up timeline/,$p' "$f" | tail -n +3; done >> "$S"
tar czf /tmp/all.tgz --exclude='*.db' -C "$OUT" . && mv /tmp/all.tgz "$OUT/all.tgz"
find "$OUT" -mindepth 1 -not -name all.tgz -not -name summary.txt -delete 2>/dev/null || true
echo "== summary"; grep -v '^ *[0-9.]* *[0-9.]* ' "$S" | grep -v '^--' | head -60
