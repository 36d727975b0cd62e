#!/usr/bin/env bash
# The engine's figures on one H200 (bench/RESULTS.md, "Engine"): run on the GPU host from the repo root,
# with the wheels from ../shared/gpu/wheelhouse.sh in .whl/. Writes everything under $OUT (default /tmp/out).
#   (a) exhaustive, one shape, cold Triton cache, whole command (1,440 valid configs)
#   (b) @triton.autotune vs autotune search on the same 212 configs and shape, both cold
#   (c) orchestrator overhead per trial: from (a)'s report (loop ms per trial; GPU idle gap between trials)
#   (d) the default strategy at 40 evaluations, one shape, cold, whole command; and --devices all
#   (e) 4 processes on one GPU against one SQLite file and one study: duplicate measurements
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
K=examples/gemm_fp8.py
ONLY=${ONLY:-"a b d e tests sim"}
want() { [[ " $ONLY " == *" $1 "* ]]; }
at() { python3 -m autotune "$@"; }
stamp() { python3 -c "import time; print(time.time())"; }
since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 2))" "$1"; }
cold() { export TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX); }

# (a) + (c)
if want a; then
cold; t0=$(stamp)
at search $K --shape M=4096,N=4096,K=7168 --strategy exhaustive --trials 5000 --db "$OUT/a.db" \
   --json "$OUT/a.json" > "$OUT/a.log" 2>&1; rc=$?
echo "a rc=$rc wall_s=$(since $t0)" | tee "$OUT/a.time"
tail -6 "$OUT/a.log"
fi

if want b; then
# (b) @triton.autotune first (it writes the config list), then autotune search on exactly that list.
# SKIP_TRITON=1 reuses a list from an earlier run (bench/results/engine_b_configs.json).
if [ -z "${SKIP_TRITON:-}" ]; then
  cold; t0=$(stamp)
  python3 bench/triton_autotune_compare.py --shape M=4096,N=4096,K=7168 --limit 212 --seed 0 --no-tma \
     --configs-out "$OUT/b_configs.json" --out "$OUT/b_triton.json" > "$OUT/b_triton.log" 2>&1
  echo "b triton rc=$? wall_s=$(since $t0)" | tee "$OUT/b_triton.time"; tail -12 "$OUT/b_triton.log"
else
  cp bench/results/engine_b_configs.json "$OUT/b_configs.json"
fi
cold; t0=$(stamp)
at search $K --shape M=4096,N=4096,K=7168 --configs "$OUT/b_configs.json" --trials 5000 --db "$OUT/b.db" \
   --json "$OUT/b.json" > "$OUT/b.log" 2>&1; rc=$?
echo "b autotune rc=$rc wall_s=$(since $t0)" | tee "$OUT/b.time"
tail -5 "$OUT/b.log"
fi

# (d)
if want d; then
cold; t0=$(stamp)
at search $K --shape M=2048,N=2112,K=7168 --trials 40 --seed 0 --db "$OUT/d.db" --json "$OUT/d.json" \
   > "$OUT/d.log" 2>&1; rc=$?
echo "d rc=$rc wall_s=$(since $t0)" | tee "$OUT/d.time"
tail -5 "$OUT/d.log"
cold; t0=$(stamp)
at search $K --shape M=2048,N=2112,K=7168 --trials 40 --seed 0 --devices all --db "$OUT/d_all.db" \
   --json "$OUT/d_all.json" > "$OUT/d_all.log" 2>&1; rc=$?
echo "d_all rc=$rc wall_s=$(since $t0)" | tee "$OUT/d_all.time"
fi

# (e) 4 processes, one GPU, one SQLite file, one study
if want e; then
cold; t0=$(stamp)
for i in 0 1 2 3; do
  at search $K --shape M=1024,N=4096,K=512 --strategy random --trials 30 --seed $i --compile-workers 3 \
     --db "$OUT/e.db" --json "$OUT/e_$i.json" > "$OUT/e_$i.log" 2>&1 &
done
wait
echo "e wall_s=$(since $t0)" | tee "$OUT/e.time"
python3 - "$OUT/e.db" <<'PY' | tee "$OUT/e_check.txt"
import sys
from autotune.store import Store
s = Store(sys.argv[1]); key = s.history.key_states()[0]
trials = s.trials.recorded(key.key_id)
ran = [t for t in trials if t.status.value != "invalid"]
print(f"e: processes=4 trials={len(trials)} measured={len(ran)} duplicates={s.trials.duplicate_measurements()} "
      f"running_claims={len(s.claims.running(key.key_id))} best={s.trials.best('gemm_fp8')[0].time_s*1e6:.2f}us")
PY
fi
want tests && python3 -m pytest -q -m gpu tests/ -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"; tail -2 "$OUT/gpu_tests.log"
# the pipeline's scaling on this host's CPUs, simulated devices (no GPU involved)
if want sim; then
python3 bench/sim_pipeline.py --devices 1,4,8 --strategies exhaustive --out "$OUT/sim_pipeline.json" > "$OUT/sim.log" 2>&1
tail -5 "$OUT/sim.log"
fi

python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def rep(name):
    p = out / f"{name}.json"
    return json.loads(p.read_text())[0] if p.exists() else None
def wall(name):
    p = out / f"{name}.time"
    return p.read_text().strip().split("wall_s=")[-1] if p.exists() else "?"
print("run   wall_s   evals  best_us  loop_ms/trial  gpu_gap_ms p50/p90")
for n in ("a", "b", "d", "d_all"):
    r = rep(n)
    if not r:
        print(n, "missing"); continue
    g = r.get("device_gap_s") or [float("nan")] * 2
    print(f"{n:5} {wall(n):>7} {r['evaluations']:6} {r['best']['time_s']*1e6:8.2f} {(r['loop_s_per_trial'] or 0)*1e3:13.2f}"
          f"  {g[0]*1e3:.2f}/{g[1]*1e3:.2f}  devices={r['devices']}")
t = out / "b_triton.json"
if t.exists():
    d = json.loads(t.read_text()); print("triton.autotune:", {k: d[k] for k in d if k in ("tuning_s", "n_configs", "picked")})
PY
# one archive: the device tool brings back a limited number of files
rm -f "$OUT"/*.lock
tar -czf /tmp/engine_results.tgz -C "$OUT" . && rm -rf "$OUT"/* && mv /tmp/engine_results.tgz "$OUT/"
