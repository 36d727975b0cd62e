#!/usr/bin/env bash
# The tables of RESULTS section 25 from the files beside this script (repository root: bash bench/results/ramp/table.sh).
R=bench/results/ramp
e=(); p=()
for k in convolution dedispersion gemm held; do
  e+=("$k | main (19 from the start) | $R/full19_$k.json.gz" "$k | ramp 4 -> 19 | $R/ramp_$k.json.gz")
  p+=("$k | ramp - main | $R/full19_$k.json.gz | $R/ramp_$k.json.gz")
done
python bench/replay_table.py "${e[@]}"
python bench/replay_table.py --paired "${p[@]}"
