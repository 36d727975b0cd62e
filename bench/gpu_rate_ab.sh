#!/usr/bin/env bash
# A/B of bench/gpu_rate.sh's searches on one lease: this tree against an older commit checked out in ./base
# (`git worktree add base REV`; carried to the GPU host), interleaved (the H100 leases differ by up to 1.6x in
# the same search, so only runs of one lease compare). Each: a 100-evaluation auto search and the exhaustive
# 1,176-config sample, gemm_fp8 M=2048,N=2112,K=7168, cold Triton cache, own database.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
python3 -m compileall -q -j 8 /tmp/site autotune base/autotune > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
run() {  # version name args...
  local v=$1 n=$2; shift 2
  local dir=$PWD; [ "$v" = base ] && dir=$PWD/base
  (cd "$dir" && PYTHONPATH=/tmp/site:$dir TRITON_CACHE_DIR=/tmp/tc_${v}_$n timeout 200 python3 -m autotune search \
    examples/gemm_fp8.py --shape M=2048,N=2112,K=7168 --db "/tmp/${v}_$n.db" --json "$OUT/${v}_$n.json" "$@" \
    > "$OUT/${v}_$n.log" 2>&1)
  echo "$v $n rc=$?"
}
for i in ${REPS:-1 2}; do for v in new base; do run $v auto$i --trials 100 --seed 0; done; done
for v in new base; do run $v exh --configs bench/results/startup_configs_1176.json --strategy exhaustive --trials 5000; done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rate = {}
for p in sorted(out.glob("*.json")):
    r = json.loads(p.read_text())[0]
    rate[p.stem] = r["evaluations"] / r["wall_s"]
    print(f"{p.stem:10} {r['evaluations']:5} evals {r['wall_s']:6.2f} s {rate[p.stem]:6.2f}/s best "
          f"{r['best']['time_s'] * 1e6:.2f} us split {r.get('time_split')}")
for v in ("new", "base"):
    for k in sorted(rate):
        if k.startswith(v + "_auto") and f"{v}_exh" in rate:
            print(f"{k}: {100 * rate[k] / rate[v + '_exh']:.0f} % of {v}'s exhaustive rate")
PY
tar czf /tmp/ab.tgz --exclude='*.db' -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/ab.tgz "$OUT/ab.tgz"
