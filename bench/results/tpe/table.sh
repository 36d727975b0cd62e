#!/usr/bin/env bash
# The TPE tables of RESULTS section 25 (repository root: bash bench/results/tpe/table.sh).
T=bench/results/tpe
python bench/replay_table.py "convolution | numeric | $T/conv_numeric.json.gz" "convolution | categorical | $T/conv_categorical.json.gz" \
  "convolution | numeric, no constant liar | $T/conv_numeric_no_liar.json.gz" "convolution | numeric, independent | $T/conv_numeric_independent.json.gz" \
  "convolution | numeric, wave-2 code | $T/conv_numeric_wave2_code.json.gz" \
  "dedispersion | numeric | $T/dedisp_numeric.json.gz" "dedispersion | categorical | $T/dedisp_categorical.json.gz" \
  "gemm_fp8 held out | numeric | $T/gemm_held_numeric.json.gz" "gemm_fp8 held out | categorical | $T/gemm_held_categorical.json.gz"
python bench/replay_table.py --paired --strategy tpe "convolution | categorical - numeric | $T/conv_numeric.json.gz | $T/conv_categorical.json.gz" \
  "dedispersion | categorical - numeric | $T/dedisp_numeric.json.gz | $T/dedisp_categorical.json.gz" \
  "gemm_fp8 held out | categorical - numeric | $T/gemm_held_numeric.json.gz | $T/gemm_held_categorical.json.gz"
