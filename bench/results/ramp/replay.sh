#!/usr/bin/env bash
# RESULTS section 25: fixed-budget replays, empty store, of the `auto` strategy's start (and random) on the peer
# landscapes (convolution, dedispersion: 3 GPUs each), the wave-2 gemm_fp8 landscapes (8 shapes) and the 4 held-out
# gemm_fp8 H200 landscapes. From the repository root: bash bench/results/ramp/replay.sh TAG SEEDS STRATEGIES
# Writes bench/results/ramp/TAG_*.json.gz (tables: table.sh). "full19" ran on main (19 in flight from the start), "ramp" with
# ramp.patch applied (`git apply bench/results/ramp/ramp.patch`: 4 in flight without a prior, then twice the
# results in hand; AUTOTUNE_START_BATCH=0 in the environment turns it off). Not adopted: RESULTS section 25.
# The stopping-rule rows (stop_*.jsonl): AUTOTUNE_START_BATCH=4|0 python bench/stop_replay.py PEER/convolution_W6600.json
# PEER/convolution_MI250X.json PEER/dedispersion_W6600.json PEER/dedispersion_MI250X.json --no-transfer --seeds 4
# --noise 0.01 --out F (and bench/landscapes/gemm_fp8_*.json), both with the patch applied.
set -euo pipefail
TAG=${1:?tag}; SEEDS=${2:-16}; STRATS=${3:-auto}
P=${PEER:-../shared/data/peer-landscapes}
D=bench/results/ramp
for k in convolution dedispersion gemm held; do
  case $k in
    gemm) files=(bench/landscapes/wave2/gemm_fp8_*.json) ;;
    held) files=(bench/landscapes/gemm_fp8_*.json) ;;
    *) files=("$P"/${k}_*.json) ;;
  esac
  python -m autotune replay "${files[@]}" --strategy "$STRATS" --no-transfer --trials 80 --seeds "$SEEDS" \
    --budgets 10,20,40,80 --json "$D/${TAG}_$k.json" > "$D/${TAG}_$k.txt"
  gzip -f "$D/${TAG}_$k.json"
done
