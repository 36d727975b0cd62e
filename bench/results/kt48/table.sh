#!/usr/bin/env bash
# RESULTS section 28's tables from the files run.sh wrote (mean regret % ± standard error).
R=bench/results/kt48
python bench/replay_table.py \
  "convolution | empty | $R/convolution.json.gz" "convolution | empty | $R/convolution_tpe1.json.gz" \
  "convolution | empty | $R/convolution_auto1.json.gz" \
  "dedispersion | empty | $R/dedispersion.json.gz" "dedispersion | empty | $R/dedispersion_tpe1.json.gz" \
  "dedispersion | empty | $R/dedispersion_auto1.json.gz" \
  "gemm_fp8 held out (H200) | empty | $R/held_tpe1.json.gz" "gemm_fp8 (H100 sweeps) | empty | $R/h100_tpe1.json.gz"
