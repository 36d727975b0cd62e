#!/usr/bin/env bash
# Issue 19 (model side): replay `auto` on the peer landscapes (convolution, dedispersion: 3 GPUs, one shape;
# leave-one-device-out) and the project's gemm_fp8 wave-2 landscapes (8 shapes, H200; leave-one-shape-out)
# with the full store, a realistic store (every history landscape as a 40-evaluation search of it) and an
# empty store; mean regret at 10/20/40/80. Run from the repository root: bash bench/model_replay.sh OUTDIR [SEEDS]
# (run the same script on main's checkout for "before": main has no --history-evaluations, and drops the
# target's shape on other GPUs, so its "full" peer store is empty).
set -euo pipefail
OUT=${1:?output folder}; SEEDS=${2:-2}
P=${PEER:-../shared/data/peer-landscapes}
R="--strategy auto --evaluations 80 --seeds $SEEDS --budgets 10,20,40,80"
mkdir -p "$OUT"
for k in convolution dedispersion gemm; do
  if [ $k = gemm ]; then files=(bench/landscapes/wave2/gemm_fp8_*.json); else files=("$P"/${k}_*.json); fi
  python -m autotune replay "${files[@]}" $R --json "$OUT/${k}_full.json" > "$OUT/${k}_full.txt"
  python -m autotune replay "${files[@]}" $R --history-evaluations 40 --json "$OUT/${k}_real.json" > "$OUT/${k}_real.txt"
  python -m autotune replay "${files[@]}" $R --no-transfer --json "$OUT/${k}_empty.json" > "$OUT/${k}_empty.txt"
done
python -m autotune replay "$P"/convolution_*.json --strategy tpe,tpe@1,random --no-transfer --evaluations 80 \
  --seeds "$SEEDS" --budgets 10,20,40,80 --json "$OUT/convolution_tpe.json" > "$OUT/convolution_tpe.txt"
