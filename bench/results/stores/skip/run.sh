#!/usr/bin/env bash
# TAG H SKIP SETS... (real store, 8 seeds; A tau, ceil rounding)
TAG=$1; H=$2; SK=$3; shift 3
cd /tmp/exp && HEDGE_SKIP=$SK HEDGE_ROUND=ceil FAST_TAU=avg bash /work/main/bench/results/stores/hedge/ab.sh $TAG $H ${STORE:-real} 8 "$@"
