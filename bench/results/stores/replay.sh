#!/usr/bin/env bash
# RESULTS section 26: issue 19's three stores replayed with today's code, the default rule (no --trials,
# measurement noise 1 %) and fixed budgets. From the repository root:
#   bash bench/results/stores/replay.sh rule SEEDS    -> rule_<set>_<store>.jsonl  (bench/stop_replay.py)
#   bash bench/results/stores/replay.sh fixed SEEDS   -> fixed_<set>_<store>.json.gz (autotune replay --trials 80)
# Sets: convolution and dedispersion (peer, 3 GPUs; history = the other 2 GPUs on the shape: leave-one-device-out),
# gemm (the 8 wave-2 H200 landscapes; history = the other 7 shapes: leave-one-shape-out), held (the 4 H200
# landscapes of section 20 that are not wave-2 shapes; history = the 8 wave-2 landscapes); SETS=h100 adds section
# 27's two H100 gemm_fp8 sweeps as targets with the same (H200) history, SETS=h100x the same with only that history
# (section 31: the other H100 sweep left out, so every history landscape is another GPU's). OUT_DIR: where the rows
# go (default bench/results/stores). Stores: full (history
# swept), real (each history landscape as a 40-evaluation search: --history-evaluations 40), empty (--no-transfer).
set -euo pipefail
MODE=${1:?rule|fixed}; SEEDS=${2:-4}
P=${PEER:-../shared/data/peer-landscapes}
D=${OUT_DIR:-bench/results/stores}
W=(bench/landscapes/wave2/gemm_fp8_*.json)
for k in ${SETS:-convolution dedispersion gemm held}; do
  pre=(); xt=()
  case $k in
    gemm) files=("${W[@]}") ;;
    held) files=(bench/results/search/h200_live/exhaustive/gemm_fp8_*.json); pre=("${W[@]}") ;;
    h100) files=(bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_*.json); pre=("${W[@]}") ;;
    h100x) files=(bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_*.json); pre=("${W[@]}"); xt=(--no-transfer) ;;
    *) files=("$P"/${k}_*.json) ;;
  esac
  for store in ${STORES:-full real empty}; do
    case $store in
      full) opt=() ;;
      real) opt=(--history-evaluations 40) ;;
      empty) opt=(--no-transfer); xt=() ;;
    esac
    p=(); [ $store != empty ] && [ ${#pre[@]} -gt 0 ] && p=(--preload "${pre[@]}")
    if [ "$MODE" = rule ]; then
      rm -f "$D/rule_${k}_$store.jsonl"
      python bench/stop_replay.py "${files[@]}" --seeds "$SEEDS" --noise 0.01 "${opt[@]}" "${xt[@]}" \
        --out "$D/rule_${k}_$store.jsonl" "${p[@]}" > /dev/null
    else
      python -m autotune replay "${files[@]}" --strategy auto --trials 80 --seeds "$SEEDS" --budgets 10,20,40,80 \
        "${opt[@]}" "${xt[@]}" --json "$D/fixed_${k}_$store.json" "${p[@]}" > "$D/fixed_${k}_$store.txt"
      gzip -f "$D/fixed_${k}_$store.json"
    fi
  done
done
