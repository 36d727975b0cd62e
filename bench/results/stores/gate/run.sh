#!/usr/bin/env bash
# RESULTS section 31's gated hedge A/B, run from a worktree at /tmp/exp with gate.patch applied (git apply
# bench/results/stores/gate/gate.patch; HEDGE_AB: the hedge's share, GATE_AB=1: no hedge and tau over all results
# when the history has a landscape of the target's GPU, FT (FAST_TAU): 1 = tau over the faster half, avg = the mean
# of it and all). Tags: M (0 0: main), G (0.5 1), GF (0.5 1, FT=1), GA (0.5 1, FT=avg). Sets as replay.sh, plus
# h100x: section 27's two H100 sweeps with only the 8 H200 wave-2 landscapes as history (--no-transfer: cross-GPU only).
#   bash run.sh TAG HEDGE GATE STORE SEEDS SETS...  -> /tmp/g/TAG_SET_STORE.json (gzipped beside this file)
cd /tmp/exp
TAG=$1; H=$2; G=$3; STORE=$4; SEEDS=$5; shift 5
P=../shared/data/peer-landscapes; W=(bench/landscapes/wave2/gemm_fp8_*.json)
for k in "$@"; do
  case $k in
    gemm) files=("${W[@]}"); pre=() ;;
    held) files=(bench/results/search/h200_live/exhaustive/gemm_fp8_*.json); pre=(--preload "${W[@]}") ;;
    h100) files=(bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_*.json); pre=(--preload "${W[@]}") ;;
    h100x) files=(bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_*.json); pre=(--no-transfer --preload "${W[@]}") ;;
    *) files=("$P"/${k}_*.json); pre=() ;;
  esac
  n=${STORE#real}; opt=(); [[ "$STORE" == real* ]] && opt=(--history-evaluations "${n:-40}")
  [ "$STORE" = empty ] && { opt=(--no-transfer); pre=(); }
  FAST_TAU=${FT:-} HEDGE_AB=$H GATE_AB=$G .venv/bin/python -m autotune replay "${files[@]}" --strategy auto --trials 80 --seeds "$SEEDS" \
    --budgets 10,20,40,80 "${opt[@]}" --json /tmp/g/${TAG}_${k}_${STORE}.json "${pre[@]}" > /tmp/g/${TAG}_${k}_${STORE}.txt 2>&1
  echo "$TAG $k $STORE rc=$? $(date +%T)"
done
