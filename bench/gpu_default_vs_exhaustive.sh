#!/usr/bin/env bash
# Issue 19 on one H200: the default command (no --trials: the stopping rule), seeds 0 and 1, beside the exhaustive
# search, examples/gemm_fp8.py at 2048x2112x7168 (wave 2: the default left 18.5 % there); each cold (own Triton
# cache, own database), whole commands timed. From the repo root with the wheels in .whl/; writes under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
wall() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$1"; }
for run in exhaustive default0 default1; do
  args=(); [ $run = exhaustive ] && args=(--strategy exhaustive)
  [ $run = default1 ] && args=(--seed 1)
  t0=$(python3 -c "import time; print(time.time())")
  TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-XXXX) timeout 200 python3 -m autotune search examples/gemm_fp8.py \
    --shape M=2048,N=2112,K=7168 "${args[@]}" --db "/tmp/d_$run.db" --json "$OUT/d_$run.json" > "$OUT/d_$run.log" 2>&1
  echo "$run rc=$? wall_s=$(wall "$t0")" | tee -a $OUT/summary.txt
done
python3 - "$OUT" <<'PY' | tee -a $OUT/summary.txt
import json, sys
from pathlib import Path
o = Path(sys.argv[1])
e = json.loads((o / "d_exhaustive.json").read_text())[0]
print(f"exhaustive: {e['evaluations']} evaluations, best {e['best']['time_s']*1e6:.2f} us {e['best']['config']}")
for n in ("default0", "default1"):
    d = json.loads((o / f"d_{n}.json").read_text())[0]
    regret = d["best"]["time_s"] / e["best"]["time_s"] - 1
    print(f"{n}: {d['evaluations']} evaluations, stop {d.get('stop_reason')}, best {d['best']['time_s']*1e6:.2f} us {d['best']['config']}; regret {regret*100:.2f} %")
PY
tar czf /tmp/a.tgz --exclude='*.db' -C $OUT . && mv /tmp/a.tgz $OUT/all.tgz
