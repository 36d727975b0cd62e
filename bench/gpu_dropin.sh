#!/usr/bin/env bash
# Issue 13's H200 figures (bench/RESULTS.md, "Triton drop-in"): run on the GPU host from the repo root, with
# the wheels from ../shared/gpu/wheelhouse.sh in .whl/. Writes ONE tar.gz under $OUT (default /tmp/out) and
# a short table on stdout.
#   (a) autotune search examples/softmax.py: every one of its 69 listed configs (exhaustive), both default
#       shapes, cold Triton cache, whole command
#   (b) @triton.autotune on the same 69 configs and shapes, cold (its own fresh cache), first call per shape;
#       then each tuner's pick and the first config timed by autotune.bench_kineto, and the drop-in checked
#       to launch the stored config (bench/dropin_compare.py)
#   (c) the drop-in's per-launch cost after the first launch vs a bare launch (bench/dropin_overhead.py)
# Expected wall time on one H200: ~2-3 minutes.
# CPU_CHECK=1 runs the same steps on a CPU in Triton's interpreter on one small shape (checks the script;
# its times say nothing about a GPU).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
  # bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
  # process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
  python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
fi
export PYTHONPATH=/tmp/site:$PWD
unset AUTOTUNE_DB
if [ -n "${CPU_CHECK:-}" ]; then
  export TRITON_INTERPRET=1
  SEARCH_ARGS="--device cpu --shape n_rows=4,n_cols=300 --num-tests 2"
  COMPARE_ARGS="--shape n_rows=4,n_cols=300 --num-tests 3"
  OVERHEAD_ARGS="--n 2000 --rounds 2"
else
  unset TRITON_INTERPRET
  SEARCH_ARGS="" COMPARE_ARGS="" OVERHEAD_ARGS=""
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
fi
K=examples/softmax.py
DB="sqlite:///$OUT/softmax.db"
stamp() { python3 -c "import time; print(time.time())"; }
since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 2))" "$1"; }
cold() { export TRITON_CACHE_DIR=$(mktemp -d /tmp/triton-cache-XXXX); }

# (a)
cold; t0=$(stamp)
python3 -m autotune search $K --strategy exhaustive --trials 100 --db "$DB" --json "$OUT/search.json" $SEARCH_ARGS \
  > "$OUT/search.log" 2>&1; rc=$?
echo "search rc=$rc wall_s=$(since $t0)" | tee "$OUT/search.time"
tail -6 "$OUT/search.log"

# (b) cold by itself: dropin_compare.py points TRITON_CACHE_DIR at a fresh directory before importing triton
t0=$(stamp)
python3 bench/dropin_compare.py --db "$DB" --out "$OUT/compare.json" $COMPARE_ARGS > "$OUT/compare.log" 2>&1; rc=$?
echo "triton.autotune + bench rc=$rc wall_s=$(since $t0)" | tee "$OUT/compare.time"
cat "$OUT/compare.log" | tail -12

# (c)
python3 bench/dropin_overhead.py --db "$DB" --out "$OUT/overhead.json" $OVERHEAD_ARGS > "$OUT/overhead.log" 2>&1
echo "overhead rc=$?"; tail -9 "$OUT/overhead.log"

python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def load(name):
    p = out / name
    return json.loads(p.read_text()) if p.exists() else None
search, cmp = load("search.json") or [], load("compare.json")
wall = (out / "search.time").read_text().split("wall_s=")[-1].strip() if (out / "search.time").exists() else "?"
print(f"softmax, {cmp['n_configs'] if cmp else '?'} listed configs, {cmp['device'] if cmp else '?'}; "
      f"autotune search (both shapes, cold, whole command): {wall} s")
print("| shape | tuner | tune s (cold) | picked config | device us (bench_kineto) |")
print("|---|---|---|---|---|")
per_shape = {json.dumps(r.get("shape"), sort_keys=True): r for r in search}
for row in (cmp or {}).get("shapes", []):
    s = row["shape"]; name = f"{s['n_rows']}x{s['n_cols']}"
    rep = per_shape.get(json.dumps(s, sort_keys=True), {})
    tune = {"triton.autotune": f"{row['triton_tune_s']:.1f}",
            "autotune search": f"{rep.get('wall_s', float('nan')):.1f} (shape's share)", "first config": "-"}
    for t in row["timed"]:
        us = f"{t['device_us']:.2f}" if t.get("device_us") is not None else "-"
        bad = "" if not t.get("wrong") else " WRONG"
        print(f"| {name} | {t['what']} | {tune[t['what']]} | {t['config']} | {us}{bad} |")
    print(f"| {name} | drop-in launch | - | {row['dropin_source']}, stored config: {row['dropin_is_stored']} | - |")
ov = load("overhead.json")
if ov:
    for part in ("dispatch", "launch"):
        rows = ov.get(part)
        rows = rows.get("rows") if isinstance(rows, dict) and "rows" in rows else rows
        if rows:
            bare = rows["bare launch"]
            print(f"{part}: " + "; ".join(f"{k} {v * 1e6:.2f} us ({(v - bare) * 1e6:+.2f})" for k, v in rows.items()))
PY
# one archive: the device tool brings back a limited number of files
tar -czf /tmp/dropin_results.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/dropin_results.tgz "$OUT/"
ls -la "$OUT"
