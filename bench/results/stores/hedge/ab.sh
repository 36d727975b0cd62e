#!/usr/bin/env bash
# The driver of RESULTS section 26's hedge A/B (run from /tmp/dbg then; the rows beside it). With hedge.patch
# applied (git apply bench/results/stores/hedge/hedge.patch; HEDGE_AB sets auto.HEDGE, TRUST_W=1 the weighted
# Kendall tau): bash ab.sh TAG HEDGE STORE(real|full|empty) SEEDS SETS...  -> /tmp/dbg/TAG_SET_STORE.json
# "s*" tags ran the patch's first rounding (a space-filling pick whenever design < share x (picks + 1), so the
# first one comes first), "n*" and "w*" the rounding to nearest that the patch holds. Not adopted.
# rescue.patch (applied alone): RESCUE_AB=N space-filling picks once the prior ranks the results wrong ("r8", "r16"),
# STICKY_AB=1 keeps such a prior ignored for the rest of the search ("k8" with 8 picks, "k0" without). Not adopted.
# RESULTS section 27's trust variants (../trust/, rows there): ../trust/variants.patch applied alone (hedge.patch with
# HEDGE_AB 0 unless set, plus switches): HEDGE 0 and FAST_TAU=1 ("F": tau over the faster half), FAST_TAU=avg ("A"
# as first run; ../trust/fast_half_mean.patch is its clean form), HEDGE 0.5 with HEDGE_ROUND=ceil and FAST_TAU=1
# ("FH"; without HEDGE_ROUND, "FHn"), PB=1 FAST_TAU=1 ("PB": the prior phase bounded at 8 of its picks), none ("B").
# STORE realN: the history as N-evaluation searches (real = real40). OUT_AB: where the rows go (default /tmp/dbg).
cd "$(git rev-parse --show-toplevel)"
TAG=$1; H=$2; STORE=$3; SEEDS=$4; shift 4
P=../shared/data/peer-landscapes
O=${OUT_AB:-/tmp/dbg}; mkdir -p "$O"
for k in "$@"; do
  case $k in
    gemm) files=(bench/landscapes/wave2/gemm_fp8_*.json); pre=() ;;
    held) files=(bench/results/search/h200_live/exhaustive/gemm_fp8_*.json); pre=(--preload bench/landscapes/wave2/gemm_fp8_*.json) ;;
    *) files=("$P"/${k}_*.json); pre=() ;;
  esac
  n=${STORE#real}; opt=(); [[ "$STORE" == real* ]] && opt=(--history-evaluations "${n:-40}")
  [ "$STORE" = empty ] && opt=(--no-transfer)
  STICKY_AB=${STICKY_AB:-0} RESCUE_AB=${RESCUE_AB:-0} TRUST_W=${TRUST_W:-0} HEDGE_AB=$H .venv/bin/python -m autotune replay "${files[@]}" --strategy auto --trials 80 --seeds "$SEEDS" \
    --budgets 10,20,40,80 "${opt[@]}" --json $O/${TAG}_${k}_${STORE}.json "${pre[@]}" > $O/${TAG}_${k}_${STORE}.txt 2>&1
  echo "$TAG $k $STORE done $(date +%T)"
done
