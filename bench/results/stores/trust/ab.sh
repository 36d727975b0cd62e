#!/usr/bin/env bash
# ab.sh TAG STORE SEEDS SETS... ; env: HEDGE_AB HEDGE_ROUND FAST_TAU
cd /tmp/wt
TAG=$1; STORE=$2; SEEDS=$3; shift 3
P=/work/shared/data/peer-landscapes
for k in "$@"; do
  case $k in
    gemm) files=(bench/landscapes/wave2/gemm_fp8_*.json); pre=() ;;
    held) files=(bench/results/search/h200_live/exhaustive/gemm_fp8_*.json); pre=(--preload bench/landscapes/wave2/gemm_fp8_*.json) ;;
    *) files=("$P"/${k}_*.json); pre=() ;;
  esac
  opt=(); [ "$STORE" = real ] && opt=(--history-evaluations 40); [[ "$STORE" == real?* ]] && opt=(--history-evaluations ${STORE#real})
  [ "$STORE" = empty ] && opt=(--no-transfer) && pre=()
  .venv/bin/python -m autotune replay "${files[@]}" --strategy auto --trials 80 --seeds "$SEEDS" \
    --budgets 10,20,40,80 "${opt[@]}" --json /tmp/dbg2/${TAG}_${k}_${STORE}.json "${pre[@]}" > /tmp/dbg2/${TAG}_${k}_${STORE}.txt 2>&1
  echo "$TAG $k $STORE done $(date +%T) $(grep 'mean regret over' /tmp/dbg2/${TAG}_${k}_${STORE}.txt)"
done
