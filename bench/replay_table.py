"""Mean regret at fixed budgets from ``autotune replay --json`` files, as one markdown table.

    python bench/replay_table.py --budgets 10,20,40,80 "conv | full (after) | DIR/convolution_full.json" ...

Each argument is ``data set | setting | file``; a row per (data set, setting, strategy): mean regret (%)
over every target and seed at each budget, and the runs it averages."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def regret(run: dict, n: int) -> float:
    best = run["best_after"]
    return best[min(n, len(best)) - 1] / run["best_s"] - 1.0 if best else float("inf")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("entries", nargs="+")
    ap.add_argument("--budgets", default="10,20,40,80")
    a = ap.parse_args()
    budgets = [int(b) for b in a.budgets.split(",")]
    print("| data set | setting | strategy | " + " | ".join(f"@{b} %" for b in budgets) + " | runs |")
    print("|---|---|---|" + "---:|" * (len(budgets) + 1))
    for entry in a.entries:
        data, setting, path = (p.strip() for p in entry.split("|"))
        runs = json.loads(Path(path).read_text())
        for strategy in dict.fromkeys(r["strategy"] for r in runs):
            mine = [r for r in runs if r["strategy"] == strategy]
            cells = " | ".join(f"{statistics.fmean(regret(r, b) for r in mine) * 100:.1f}" for b in budgets)
            print(f"| {data} | {setting} | {strategy} | {cells} | {len(mine)} |")


if __name__ == "__main__":
    main()
