#!/usr/bin/env bash
# The stopping rule live on the H200: `autotune search` WITHOUT --trials (the default command) on gemm_fp8 (the
# frozen wave-2 kernel file) at 2 shapes outside its recorded landscapes, with an empty database (cold) and with
# the 8 wave-2 landscapes preloaded (history). Prints per run: regret vs the stored exhaustive best
# (bench/results/search/h200_live/exhaustive, same kernel file and space), evaluations, stop reason, bound,
# noise and the whole command's wall time.
# Run from the repo root on the GPU host, wheels in .whl/ (see HELPERS.md / shared/gpu/README.md). Writes $OUT/stop/.
#   SHAPES=128x2112x7168,4096x2112x7168 SEEDS="0 1" bash bench/gpu_stop.sh
# KERNEL=examples/gemm_fp8.py (with REFERENCE=measure) runs today's kernel instead; STORES="empty" leaves the
# history runs out (the preloaded landscapes are the wave-2 kernel's). NAME is the kernel's name in the database
# (gemm_fp8 unless KERNEL is another kernel: KERNEL=bench/kernels/matmul_fp16.py NAME=matmul_fp16).
# REFERENCE=measure sweeps each shape exhaustively on this GPU first (the stored reference is the H200's: on any
# other GPU the regret needs this GPU's own landscape) and writes it under $OUT/stop/reference/.
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/stop
mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -1
# bytecode as an ordinary pip install writes it: the GPU hosts set PYTHONDONTWRITEBYTECODE=1, and without it every
# process compiles SQLAlchemy, Optuna and autotune from source (~1 s a command; RESULTS section 22)
python3 -m compileall -q -j 8 /tmp/site autotune > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
K=${KERNEL:-bench/kernels/gemm_fp8_wave2.py}
NAME=${NAME:-gemm_fp8}
REF=${REFERENCE:-bench/results/search/h200_live/exhaustive}
SHAPES=${SHAPES:-128x2112x7168,4096x2112x7168}
if [ "$REF" = measure ]; then
  REF=$R/reference; mkdir -p "$REF"
  for s in ${SHAPES//,/ }; do
    IFS=x read -r m n k <<< "$s"
    t0=$(date +%s.%N)
    python3 -m autotune search $K --shape "M=$m,N=$n,K=$k" --strategy exhaustive --trials 100000 \
      --db "sqlite:///$REF/ref.db" > "$REF/exhaustive_$s.log" 2>&1
    python3 -m autotune landscape export "$NAME" --shape "M=$m,N=$n,K=$k" --db "sqlite:///$REF/ref.db" \
      --out "$REF/${NAME}_$s.json" >> "$REF/exhaustive_$s.log" 2>&1
    echo "reference $s rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a "$R/times.txt"
  done
  rm -f "$REF/ref.db"
fi
[[ "${STORES:-empty history}" == *history* ]] &&
  python3 bench/preload_landscapes.py "sqlite:///$R/preloaded.db" bench/landscapes/wave2/gemm_fp8_*.json
for seed in ${SEEDS:-0}; do for store in ${STORES:-empty history}; do for s in ${SHAPES//,/ }; do
  IFS=x read -r m n k <<< "$s"
  run=${store}_${s}_s$seed
  if [ "$store" = history ]; then cp "$R/preloaded.db" "$R/$run.db"; else rm -f "$R/$run.db"; fi
  t0=$(date +%s.%N)
  python3 -m autotune search $K --shape "M=$m,N=$n,K=$k" --seed "$seed" --db "$R/$run.db" \
    --json "$R/$run.json" > "$R/$run.log" 2>&1
  echo "$run rc=$? wall_s=$(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a "$R/times.txt"
  rm -f "$R/$run.db"
done; done; done
python3 - "$R" "$REF" "$NAME" <<'PY' | tee "$R/summary.txt"
import json, sys
from pathlib import Path
r, ref, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
walls = {}
for line in (r / "times.txt").read_text().splitlines():
    if not line.startswith("reference"):
        walls[line.split(" rc=")[0]] = line.split("wall_s=")[1].strip()
print(f"{'run':32} {'regret %':>8} {'evals':>5} {'stop':10} {'bound %':>7} {'noise %':>7} {'wall s':>6}")
for f in sorted(r.glob("*_s*.json")):
    rep = json.loads(f.read_text())[0]
    shape = rep["shape"]
    land = ref / f"{name}_{shape['M']}x{shape['N']}x{shape['K']}.json"
    best = min(c["time_s"] for c in json.loads(land.read_text())["configs"] if c["status"] == "ok") if land.exists() else None
    t = (rep.get("best") or {}).get("time_s")
    regret = f"{(t / best - 1) * 100:8.2f}" if best and t else "       -"
    pct = lambda x: f"{x * 100:7.2f}" if x is not None else "      -"
    print(f"{f.stem:32} {regret} {rep['evaluations']:5d} {rep['stop_reason']:10} {pct(rep.get('stop_bound'))} "
          f"{pct(rep.get('stop_noise'))} {walls.get(f.stem, '-'):>6}")
PY
