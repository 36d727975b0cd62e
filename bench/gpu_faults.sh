#!/usr/bin/env bash
# Issue 24 on one H200: the exhaustive search of the 8-config fault kernel (bench/kernels/faults.py: one
# hang, one 400 GiB allocation, one illegal address, one compile error, one NaN, one wrong result, two good),
# whole command timed (target <= 30 s; 137.8 s before the default ran first under a short bound), every
# status typed. Run from the repo root with the wheels of ../shared/gpu/wheelhouse.sh on PYTHONPATH (or
# installed); writes under $OUT (default /tmp/out/faults).
set -uo pipefail
OUT=${OUT:-/tmp/out/faults}
mkdir -p "$OUT"
export TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-faults-XXXX)  # cold
t0=$(python3 -c "import time; print(time.time())")
python3 -m autotune search bench/kernels/faults.py --strategy exhaustive --db "$OUT/faults.db" \
  --json "$OUT/faults.json" > "$OUT/faults.log" 2>&1
rc=$?
wall=$(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0")
echo "rc=$rc wall_s=$wall" | tee "$OUT/faults.time"
python3 - "$OUT/faults.db" <<'PY' | tee "$OUT/faults_statuses.txt"
import sys
from autotune.engine.faults import label
from autotune.store import Store
store = Store(f"sqlite:///{sys.argv[1]}")
(key,) = store.history.key_states()
for t in store.trials.recorded(key.key_id):
    err = (t.error or "").splitlines()[0][:90] if t.error else ""
    time_s = f"{t.time_s * 1e6:.1f} us" if t.time_s else "-"
    print(f"{t.config['CASE']:16} {label(t):34} {time_s:>10}  {err}")
PY
tail -8 "$OUT/faults.log"
