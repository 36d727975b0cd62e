#!/usr/bin/env bash
# H200 runs of issue 20 (start-up at the floor, the pipeline kept full, exhaustive at the compile limit);
# results in bench/RESULTS.md section 12. From the repository root (or a staged copy of it):
#   bash bench/gpu_startup.sh                      # this checkout's code
#   BASELINE=../.. bash bench/gpu_startup.sh       # and another checkout's (e.g. main) on the same runs
#   NO_PROBE=1 ...                                 # without bench/startup_probe.py's per-config breakdown
# Every run is a whole `autotune search` command in a fresh process, gemm_fp8 at M=2048,N=2112,K=7168, each
# with its own database and, where it says cold, its own empty Triton cache. Needs the wheels of
# ../shared/gpu/wheelhouse.sh in $WHL (default .whl).
set -uo pipefail
OUT=${OUT:-bench/out}
WHL=${WHL:-.whl}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHL"/*.whl || exit 1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONUNBUFFERED=1
HERE=$PWD
SHAPE=M=2048,N=2112,K=7168
CONFIGS=$HERE/bench/results/startup_configs_1176.json  # 1,176 of the one-program-per-tile kernel's configs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton" # the page cache holds torch's files for every run alike

# one NAME CODE_DIR TRITON_CACHE ARGS...: one whole command, its wall time in $OUT/times.txt
one() {
  local name=$1 code=$2 cache=$3
  shift 3
  local t0 t1
  t0=$(date +%s.%N)
  (cd "$code" && PYTHONPATH=/tmp/site:$code TRITON_CACHE_DIR=$cache AUTOTUNE_TRACE_STARTUP=1 \
    timeout 200 python3 -m autotune search examples/gemm_fp8.py --shape $SHAPE --db "/tmp/$name.db" \
    --json "$OUT/$name.json" "$@") > "$OUT/$name.log" 2>&1
  local rc=$?
  t1=$(date +%s.%N)
  echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 2))")" | tee -a "$OUT/times.txt"
}

versions=("new:$HERE")
[ -n "${BASELINE:-}" ] && versions+=("base:$(cd "$BASELINE" && pwd)")
for v in "${versions[@]}"; do
  tag=${v%%:*} code=${v#*:}
  one "${tag}_1eval_cold" "$code" "/tmp/tc_${tag}_1" --trials 1
  one "${tag}_1eval_warm" "$code" "/tmp/tc_${tag}_1" --trials 1
  one "${tag}_1eval_cold2" "$code" "/tmp/tc_${tag}_1b" --trials 1
done
for v in "${versions[@]}"; do
  tag=${v%%:*} code=${v#*:}
  one "${tag}_auto100" "$code" "/tmp/tc_${tag}_2" --trials 100 --seed 0
  one "${tag}_exh1176" "$code" "/tmp/tc_${tag}_3" --configs "$CONFIGS" --strategy exhaustive --trials 5000
done
# the timing worker's time per config, in its own code (Triton cache filled by another process first)
[ -z "${NO_PROBE:-}" ] && PYTHONPATH=/tmp/site:$HERE TRITON_CACHE_DIR=/tmp/tc_probe python3 bench/startup_probe.py fill --configs 40 > "$OUT/probe.log" 2>&1
[ -z "${NO_PROBE:-}" ] && PYTHONPATH=/tmp/site:$HERE TRITON_CACHE_DIR=/tmp/tc_probe python3 bench/startup_probe.py time --configs 40 \
  --json "$OUT/probe.json" >> "$OUT/probe.log" 2>&1
[ -z "${NO_PROBE:-}" ] && tail -9 "$OUT/probe.log"

python3 - "$OUT" <<'EOF'
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'run':18s} {'rc':>3s} {'wall s':>7s} {'evals':>6s} {'search s':>8s} {'evals/s':>8s}  best")
for line in (out / "times.txt").read_text().splitlines():
    name, rc, wall = re.match(r"(\S+) rc=(\d+) wall_s=(\S+)", line).groups()
    try:
        r = json.loads((out / f"{name}.json").read_text())[0]
        ev, ws = r["evaluations"], r["wall_s"]
        best = r["best"]["time_s"] * 1e6 if r.get("best") else float("nan")
        print(f"{name:18s} {rc:>3s} {float(wall):7.2f} {ev:6d} {ws:8.2f} {ev / ws:8.2f}  {best:.2f} us")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        print(f"{name:18s} {rc:>3s} {float(wall):7.2f}  (no json)")
EOF
