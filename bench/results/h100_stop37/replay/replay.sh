#!/usr/bin/env bash
# RESULTS section 27: the 2 gemm_fp8 landscapes measured on the H100 this stop (wave-2 kernel, shapes outside the
# wave-2 set) as targets, the 8 wave-2 H200 landscapes as history (another GPU): the default rule (4 seeds,
# noise 1 %) and fixed budgets (8 seeds), full / real (40-evaluation searches) / empty store. Repo root:
#   bash bench/results/h100_stop37/replay/replay.sh
set -euo pipefail
D=bench/results/h100_stop37/replay
T=(bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_*.json)
W=(bench/landscapes/wave2/gemm_fp8_*.json)
for store in full real empty; do
  opt=(--preload "${W[@]}"); [ $store = real ] && opt+=(--history-evaluations 40); [ $store = empty ] && opt=(--no-transfer)
  rm -f $D/rule_$store.jsonl
  python bench/stop_replay.py "${T[@]}" --seeds 4 --noise 0.01 "${opt[@]}" --out $D/rule_$store.jsonl > /dev/null
  python -m autotune replay "${T[@]}" --strategy auto --trials 80 --seeds 8 --budgets 10,20,40,80 "${opt[@]}" \
    --json $D/fixed_$store.json > $D/fixed_$store.txt
  gzip -f $D/fixed_$store.json
done
