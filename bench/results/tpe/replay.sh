#!/usr/bin/env bash
# RESULTS section 25: TPE replayed with an empty store, 80 evaluations, 19 in flight, on the peer convolution and
# dedispersion landscapes (3 GPUs each) and the 4 held-out gemm_fp8 H200 landscapes. From the repository root:
#   bash bench/results/tpe/replay.sh TAG   (writes bench/results/tpe/{conv,dedisp,gemm_held}_TAG.json.gz)
# TAG "categorical": this tree (TPE sees every parameter as categorical). The numeric view (TAG "numeric"): the
# tree before it (git checkout 3e687be -- autotune/search/optuna_strategy.py). The variants no_liar /
# independent: the numeric view with TPESampler(constant_liar=False) / (multivariate=False, group=False).
# conv_numeric_wave2_code: the wave-2 commit e36d153 (`git worktree add W e36d153`, `python -m autotune replay
# ... --evaluations 80` there). Seeds: 6 per target (dedispersion 16, gemm 3).
set -euo pipefail
TAG=${1:?tag}
P=${PEER:-../shared/data/peer-landscapes}
D=bench/results/tpe
R=(--strategy tpe --no-transfer --trials 80 --budgets 10,20,40,80)
python -m autotune replay "$P"/convolution_*.json "${R[@]}" --seeds 6 --json "$D/conv_$TAG.json"
python -m autotune replay "$P"/dedispersion_*.json "${R[@]}" --seeds 16 --json "$D/dedisp_$TAG.json"
python -m autotune replay bench/landscapes/gemm_fp8_*.json "${R[@]}" --seeds 3 --json "$D/gemm_held_$TAG.json"
gzip -f "$D"/*_"$TAG".json
