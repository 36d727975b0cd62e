#!/usr/bin/env bash
# Issue 20's rate target on one GPU: a 100-evaluation `auto` search against the exhaustive strategy's
# evaluations per second (the 1,176-config sample), gemm_fp8 at M=2048,N=2112,K=7168, each cold (own Triton
# cache, own database), with where each search's seconds went (the report's time_split), plus:
#   - the auto search again under cProfile (the orchestrator's main thread: what the loop does) (PROFILE=1),
#   - each search's trials as a timeline from its database (submitted, stored, compile seconds),
#   - the @triton.autotune side by side (bench/gpu_engine.sh section b) (ENGINE_B=1).
# Run on the GPU host from the repo root, with the wheels from ../shared/gpu/wheelhouse.sh in .whl/.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1  # bytecode, as a normal pip install writes
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
S="$OUT/summary.txt"
: > "$S"
now() { python3 -c "import time; print(time.time())"; }
since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 2))" "$1"; }
SHAPE=M=2048,N=2112,K=7168
RUNS=${RUNS:-"auto100 exh1176 auto100b"}

# the orchestrator with a shorter GIL switch interval (0.5 ms instead of 5 ms): whether the main loop's
# strategy work delays the threads that drive the timing and compile workers
SI=(-c "import runpy, sys; sys.setswitchinterval(0.0005); sys.argv[0] = 'autotune'; runpy.run_module('autotune', run_name='__main__', alter_sys=True)")
search() {  # name, extra args...
  local run=$1; shift
  local py=(-m autotune)
  [[ $run == *si ]] && py=("${SI[@]}")
  local t0; t0=$(now)
  TRITON_CACHE_DIR=/tmp/tc_$run timeout 200 python3 "${py[@]}" search examples/gemm_fp8.py \
    --shape $SHAPE --db "/tmp/$run.db" --json "$OUT/$run.json" "$@" > "$OUT/$run.log" 2>&1
  echo "$run rc=$? wall_s=$(since "$t0")" | tee -a "$S"
}
for run in $RUNS; do
  case $run in
    auto100*) search "$run" --trials 100 --seed 0 ;;
    exh1176*) search "$run" --configs bench/results/startup_configs_1176.json --strategy exhaustive --trials 5000 ;;
    one*) AUTOTUNE_TRACE_STARTUP=1 search "$run" --trials 1 ;;
  esac
done
if [ -n "${PROFILE:-}" ]; then
  t0=$(now)
  TRITON_CACHE_DIR=/tmp/tc_prof timeout 200 python3 -m cProfile -o "$OUT/auto100_prof.prof" -m autotune search \
    examples/gemm_fp8.py --shape $SHAPE --db /tmp/prof.db --json "$OUT/auto100_prof.json" --trials 100 --seed 0 \
    > "$OUT/auto100_prof.log" 2>&1
  echo "auto100_prof rc=$? wall_s=$(since "$t0")" | tee -a "$S"
  python3 -c "
import pstats, sys
p = pstats.Stats(sys.argv[1]); p.sort_stats('cumulative').print_stats(60)
p.sort_stats('tottime').print_stats(25)" "$OUT/auto100_prof.prof" > "$OUT/auto100_prof.txt" 2>&1
fi

python3 - "$OUT" $RUNS <<'PY' | tee -a "$S"
import json, sqlite3, sys
from datetime import datetime
from pathlib import Path
out, runs = Path(sys.argv[1]), sys.argv[2:] + ["auto100_prof"]
rate = {}
for n in runs:
    try:
        r = json.loads((out / f"{n}.json").read_text())[0]
    except Exception as e:
        print(n, "no result:", e)
        continue
    rate[n] = r["evaluations"] / r["wall_s"]
    print(f"{n}: {r['evaluations']} evaluations in {r['wall_s']:.2f} s = {rate[n]:.2f}/s, loop "
          f"{1e3 * (r['loop_s_per_trial'] or 0):.1f} ms/trial, best {r['best']['time_s']*1e6:.2f} us")
    print("   split:", r.get("time_split"))
    db = Path(f"/tmp/{n}.db") if n != "auto100_prof" else Path("/tmp/prof.db")
    if db.exists():
        con = sqlite3.connect(db)
        rows = con.execute(
            "select id, started_at, finished_at, compile_s, time_s, status, config from autotune_trials "
            "where started_at is not null order by id").fetchall()
        def ts(x):
            return datetime.fromisoformat(x).timestamp() if x else None
        t0 = min(ts(r[1]) for r in rows) if rows else 0
        line = [dict(id=r[0], submitted=round(ts(r[1]) - t0, 4), stored=round(ts(r[2]) - t0, 4) if r[2] else None,
                     compile_s=r[3], time_s=r[4], status=r[5], impl=json.loads(r[6]).get("IMPL")) for r in rows]
        (out / f"{n}_timeline.json").write_text(json.dumps(line))
        lat = sorted(x["stored"] - x["submitted"] for x in line if x["stored"] is not None)
        comp = sorted(x["compile_s"] for x in line if x["compile_s"])
        if lat and comp:
            print(f"   submit->stored median {lat[len(lat)//2]:.3f} s p90 {lat[int(len(lat)*.9)]:.3f} s; "
                  f"compile median {comp[len(comp)//2]:.3f} s p90 {comp[int(len(comp)*.9)]:.3f} s mean "
                  f"{sum(comp)/len(comp):.3f} s")
a = [v for k, v in rate.items() if k.startswith("auto100")]
e = [v for k, v in rate.items() if k.startswith("exh")]
if a and e:
    print(f"auto / exhaustive rate: {', '.join(f'{100 * x / e[0]:.0f} %' for x in a)}")
PY

if [ -n "${ENGINE_B:-}" ]; then
  ONLY=b OUT="$OUT/engine_b" bash bench/gpu_engine.sh > "$OUT/engine_b.out" 2>&1
  grep -E "wall_s|rc=" "$OUT/engine_b.out" | tee -a "$S"
  tail -15 "$OUT/engine_b/b_triton.log" 2>/dev/null | tail -6 | tee -a "$S"
  tar xzf "$OUT/engine_b/engine_results.tgz" -C "$OUT/engine_b" 2>/dev/null
  tail -12 "$OUT/engine_b/b.log" 2>/dev/null | tee -a "$S"
fi
echo "== summary"; cat "$S"; cp "$S" /tmp/rate_summary.txt
# one archive: the device tool brings back a few files only
tar czf /tmp/rate.tgz --exclude='*.db' -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/rate.tgz "$OUT/rate.tgz"
cp /tmp/rate_summary.txt "$OUT/summary.txt" 2>/dev/null || true
