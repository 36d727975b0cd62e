#!/usr/bin/env bash
# Issue 10 on one H200 (bench/RESULTS.md, "Nightly jobs"): a nightly job over gemm_fp8's 18 default shapes
# plus 4 shapes recorded as misses by best_config(record=True), run twice against one SQLite database:
#   run 1 tunes until its budget is spent (the shapes it did not reach stay planned);
#   run 2 re-verifies every best run 1 stored (rank test, interleaved with the default config) and resumes
#   the shapes run 1 left.
# Run on the GPU host from the repo root, with the wheels of ../shared/gpu/wheelhouse.sh in .whl/ (plus
# plotly and narwhals for the report: wheelhouse.sh plotly==7.1.0 narwhals==2.29.0). Writes one tar.gz
# under $OUT (default /tmp/out) and prints a short summary. About 5-6 minutes on the H200 (two runs of BUDGET=120 s plus start-ups).
#
# On a CPU (a check of the script, minutes):
#   KERNEL=examples/matmul_cpu.py KERNEL_NAME=matmul_cpu DEVICES=cpu EVALS=3 BUDGET=60 REPEATS=5 NUM_TESTS=3 \
#     MISSES="M=96,N=64,K=64 M=64,N=96,K=64" DEFAULTS=0 bash bench/gpu_nightly.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
  # bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
  # process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
  python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
PY=${PY:-python3}
KERNEL=${KERNEL:-examples/gemm_fp8.py}
KERNEL_NAME=${KERNEL_NAME:-gemm_fp8}
DEVICES=${DEVICES:-cuda}
EVALS=${EVALS:-12}          # new evaluations per shape
BUDGET=${BUDGET:-120}       # seconds per run: run 1 stops inside it, run 2 resumes
REPEATS=${REPEATS:-6}       # re-measurements of each stored best (each one a median of NUM_TESTS calls)
NUM_TESTS=${NUM_TESTS:-30}
DEFAULTS=${DEFAULTS:-1}     # 1: the kernel's default shapes (gemm_fp8: 18)
# shapes production "asked for" that no one tuned (not among gemm_fp8's defaults)
MISSES=${MISSES:-"M=256,N=7168,K=2048 M=512,N=4096,K=7168 M=2048,N=2112,K=7168 M=96,N=24576,K=1536"}
DB="$OUT/nightly.db"
rm -f "$DB"
at() { $PY -m autotune "$@"; }
stamp() { $PY -c "import time; print(time.time())"; }
since() { $PY -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$1"; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for m in scipy plotly; do
  $PY -c "import $m" 2>/dev/null || echo "missing python module $m: the report or the rank test will fail" | tee -a "$OUT/warnings.txt"
done
T0=$(stamp)

# 1. the schema, then the recorded misses: what a production process with AUTOTUNE_RECORD=1 leaves behind
at db upgrade --db "$DB" > "$OUT/upgrade.log" 2>&1
$PY - "$DB" "$DEVICES" "$KERNEL_NAME" $MISSES <<'PY' 2>&1 | tee "$OUT/record.log"
import sys

import autotune
from autotune import requests_log

db, device, kernel, shapes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
if device.startswith("cuda"):
    import torch  # the lookup names the device with torch's GPU name, as kernel code would

    torch.cuda.init()
for text in shapes:
    shape = {k: int(v) for k, v in (kv.split("=") for kv in text.split(","))}
    for _ in range(3):
        autotune.best_config(kernel, db=db, device=device.split(",")[0], record=True, **shape)
print(f"recorded {requests_log.flush()} lookups of {len(shapes)} untuned shapes of {kernel}")
PY
at show --requests --db "$DB" > "$OUT/requests.txt" 2>&1

# 2. the job file
SHAPES='"requested"'
[ "$DEFAULTS" = 1 ] && SHAPES='"default", "requested"'
cat > "$OUT/job.yaml" <<EOF
name: nightly-h200
database: $DB
devices: $DEVICES
kernels:
  - file: $PWD/$KERNEL
    shapes: [$SHAPES]
evaluations: $EVALS
seed: 0
num_tests: $NUM_TESTS
budget_s: $BUDGET
verify: {repeats: $REPEATS, threshold: 0.03, alpha: 0.05, reference: true}
report: $OUT/report
EOF

# 3. the plan, run 1, run 2
at nightly "$OUT/job.yaml" --dry-run > "$OUT/plan.log" 2>&1
for run in 1 2; do
  t0=$(stamp)
  at nightly "$OUT/job.yaml" --fail-on-regression --json "$OUT/run$run.json" > "$OUT/run$run.log" 2>&1
  echo "run $run rc=$? wall_s=$(since "$t0")" | tee "$OUT/run$run.time"
  cp "$OUT/report/report.md" "$OUT/report_run$run.md" 2>/dev/null
done
at export --format triton --db "$DB" --out "$OUT/best_triton.py" > "$OUT/export.log" 2>&1

# 4. summary (stdout) and one archive
$PY - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import collections
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
for n in (1, 2):
    p = out / f"run{n}.json"
    if not p.exists():
        print(f"run {n}: no summary ({(out / f'run{n}.log').read_text()[-500:]})")
        continue
    s = json.loads(p.read_text())
    actions = collections.Counter(e["action"] + (" (skipped: budget)" if e.get("skipped") else "") for e in s["shapes"])
    evals = sum(e.get("evaluations", 0) for e in s["shapes"])
    ver = collections.Counter(v["status"] for v in s["verifications"])
    print(f"run {n}: {s['wall_s']:.0f} s; shapes {dict(actions)}; {evals} new evaluations; "
          f"verified {dict(ver)}; stopped: {s['stopped']}")
    warm = [e for e in s["shapes"] if e["action"] == "retune"]
    if warm:
        print(f"  re-tuned from old bests: {len(warm)}")
PY
echo "total wall_s=$(since "$T0")" | tee -a "$OUT/summary.txt"
sed -n '1,60p' "$OUT/report/report.md" 2>/dev/null
tar -czf /tmp/nightly_results.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/nightly_results.tgz "$OUT/"
