#!/usr/bin/env bash
# RESULTS section 28: issue 19's fixed-budget comparison with 16 seeds per target (48 runs a cell on the peer
# sets), the sequential strategies beside the pipelined ones. Run from the repo root in the venv with the
# bench extra (kernel_tuner 1.5.0); about an hour on this 2-core VM, ~30 min of it the held-out gemm_fp8
# replay. Writes bench/results/kt48/, then prints the tables.
# The rd_* rows (a variant, not adopted): `git apply bench/results/kt48/rd.patch` in a worktree of main, then
# AUTOTUNE_START_BATCH=4 python -m autotune replay PEER/{convolution,dedispersion}_*.json --strategy auto
# --no-transfer --trials 80 --seeds 16 --budgets 10,20,40,80 --json rd_KERNEL.json (paired against
# bench/results/ramp/full19_*.json.gz, the same runs on main).
set -euo pipefail
R=bench/results/kt48
P=../shared/data/peer-landscapes
# an empty-store replay at the fixed budgets: rep LANDSCAPES... STRATEGIES OUT_NAME
rep() {
  local out=${*: -1} strat=${*: -2:1}
  python -m autotune replay "${@:1:$#-2}" --strategy "$strat" --no-transfer --trials 80 --seeds 16 \
    --budgets 10,20,40,80 --json "$R/$out.json" > "$R/$out.log" 2>&1
}
for d in convolution dedispersion; do
  # Kernel Tuner's 7 strategies (simulation mode) and ours (auto, tpe; 19 in flight), empty store
  python bench/kt_compare.py $P/${d}_*.json --seeds 16 --out $R/$d.json > $R/$d.log 2>&1
  # one proposal in flight: sequential TPE (the baseline) and sequential auto
  for s in tpe@1 auto@1; do rep $P/${d}_*.json $s ${d}_${s/@/}; done
done
# gemm_fp8: the 4 held-out H200 landscapes and the 2 H100 sweeps of section 27 (nobody developed on them)
rep bench/landscapes/gemm_fp8_*.json tpe@1,auto held_tpe1
rep bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_*.json tpe@1,auto h100_tpe1
gzip -f $R/*.json
bash $R/table.sh
