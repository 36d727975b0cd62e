"""Mean regret (%) at 10/20/40/80 evaluations per data set and strategy, from `autotune replay --json` files.

Usage: python bench/results/coldstart/table.py run1.json run2.json ..."""

import collections
import json
import sys
from pathlib import Path

for f in sys.argv[1:]:
    runs = json.loads(Path(f).read_text())
    groups = collections.defaultdict(list)
    for r in runs:
        data_set = r["shape_key"].split("[")[1].split()[0]
        groups[(data_set, r["strategy"])].append(r)
    for (data_set, strategy), rs in sorted(groups.items()):
        cells = [
            sum(r["best_after"][min(b, len(r["best_after"])) - 1] / r["best_s"] - 1 for r in rs)
            / len(rs)
            * 100
            for b in (10, 20, 40, 80)
        ]
        print(
            f"{Path(f).name:20s} {data_set:16s} {strategy:8s} n={len(rs):3d} "
            + " ".join(f"{c:7.1f}" for c in cells)
        )
