#!/usr/bin/env bash
# The tables of RESULTS sections 26 and 27 from the files beside this script (repository root: bash bench/results/stores/table.sh).
R=bench/results/stores
a=(); e=(); p=()
for k in convolution dedispersion gemm held h100; do
  for s in full real empty; do a+=("$k, $s | $R/rule_${k}_$s.jsonl"); done
  e+=("$k | full | $R/fixed_${k}_full.json.gz" "$k | real | $R/fixed_${k}_real.json.gz")
  if [ $k = held ] || [ $k = h100 ]; then e+=("$k | empty | $R/fixed_${k}_empty.json.gz"); else e+=("$k | empty (section 25) | bench/results/ramp/full19_$k.json.gz"); fi
done
python bench/stop_table.py "${a[@]}"
echo
python bench/replay_table.py --strategy auto "${e[@]}"
echo
H=$R/hedge
for k in convolution dedispersion gemm; do
  for s in real full; do
    for t in s0.5_8 n0.5_8; do [ -f $H/${t}_${k}_$s.json.gz ] && p+=("$k | $s, hedge $t - none | $H/s0_8_${k}_$s.json.gz | $H/${t}_${k}_$s.json.gz"); done
  done
done
python bench/replay_table.py --paired "${p[@]}"
