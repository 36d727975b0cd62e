#!/usr/bin/env bash
# A short warm-up before a measurement on a warm GPU (settings.WarmUp) against the seed recipe's whole round
# (AUTOTUNE_WARM_CALLS=0), on one lease: (1) bench/measure_cost.py's per-measurement parts and kernel times,
# both ways, interleaved; (2) whole searches of gemm_fp8 at M=2048,N=2112,K=7168, each cold (own Triton cache,
# own database): the exhaustive 1,176 sample and `auto --trials 100`, both ways, interleaved (ABBA);
# (3) SIDE=1: the @triton.autotune side by side (bench/gpu_engine.sh section b), ours both ways.
# OLD_ENV / NEW_ENV: the environment of the "old" / "new" runs (default AUTOTUNE_WARM_CALLS=0 / =5, the short
# warm-up's A/B; OLD_ENV=AUTOTUNE_RACE=0 NEW_ENV=AUTOTUNE_RACE=1.25 is racing's, RESULTS section 29).
# Run on the GPU host from the repo root, wheels from ../shared/gpu/wheelhouse.sh in .whl/.
set -uo pipefail
. bench/gpu_env.sh
S="$OUT/summary.txt"; : > "$S"
now() { python3 -c "import time; print(time.time())"; }
since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 2))" "$1"; }
if [ -z "${SKIP_COST:-}" ]; then
  TRITON_CACHE_DIR=/tmp/tc_cost timeout 300 python3 bench/measure_cost.py examples/gemm_fp8.py \
    --shape M=2048,N=2112,K=7168 --configs bench/results/startup_configs_1176.json -n 60 \
    --variants base,full_warmup,base,full_warmup --out "$OUT/cost.json" > "$OUT/cost.log" 2>&1
  grep -E "^== |run \(all\)" "$OUT/cost.log" | tee -a "$S"
fi
OLD_ENV=${OLD_ENV:-AUTOTUNE_WARM_CALLS=0}; NEW_ENV=${NEW_ENV:-AUTOTUNE_WARM_CALLS=5}
search() {  # name env extra args...
  local run=$1 e=$2; shift 2
  local t0; t0=$(now)
  env $e TRITON_CACHE_DIR=/tmp/tc_$run timeout 200 python3 -m autotune search examples/gemm_fp8.py \
    --shape M=2048,N=2112,K=7168 --db "/tmp/$run.db" --json "$OUT/$run.json" "$@" > "$OUT/$run.log" 2>&1
  echo "$run rc=$? wall_s=$(since "$t0")" | tee -a "$S"
}
EXH=(--configs bench/results/startup_configs_1176.json --strategy exhaustive --trials 5000)
for run in ${RUNS:-exh_new exh_old auto_new auto_old auto_old2 auto_new2 exh_old2 exh_new2}; do
  w=$NEW_ENV; [[ $run == *old* ]] && w=$OLD_ENV
  case $run in
    exh*) search "$run" $w "${EXH[@]}" ;;
    auto*) search "$run" $w --trials 100 --seed 0 ;;
  esac
done
if [ -n "${SIDE:-}" ]; then
  C=/tmp/b_configs.json
  TRITON_CACHE_DIR=/tmp/tc_bt; t0=$(now)
  TRITON_CACHE_DIR=/tmp/tc_bt python3 bench/triton_autotune_compare.py --shape M=4096,N=4096,K=7168 --limit 212 \
    --seed 0 --no-tma --configs-out $C --out "$OUT/b_triton.json" > "$OUT/b_triton.log" 2>&1
  echo "b_triton rc=$? wall_s=$(since "$t0")" | tee -a "$S"
  for run in b_new b_old; do
    w=$NEW_ENV; [[ $run == *old* ]] && w=$OLD_ENV; t0=$(now)
    env $w TRITON_CACHE_DIR=/tmp/tc_$run python3 -m autotune search examples/gemm_fp8.py \
      --shape M=4096,N=4096,K=7168 --configs $C --trials 5000 --db /tmp/$run.db --json "$OUT/$run.json" > "$OUT/$run.log" 2>&1
    echo "$run rc=$? wall_s=$(since "$t0")" | tee -a "$S"
  done
fi
python3 - "$OUT" <<'PY' | tee -a "$S"
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    if f.name in ("cost.json",) or f.name.startswith("b_triton"):
        continue
    try:
        d = json.loads(f.read_text())
        sh = d[0]
    except Exception as e:
        print(f.name, "unreadable", e); continue
    sp = sh.get("time_split") or {}
    best = sh.get("best") or {}
    print(f"{f.stem:10s} evals={sh.get('evaluations')} search_s={sh.get('wall_s')} best_us={round((best.get('time_s') or 0)*1e6,2)} "
          f"measuring={sp.get('measuring')} idle={sp.get('device_idle')} best={best.get('config')}")
PY
