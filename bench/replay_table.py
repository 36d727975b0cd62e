"""Mean regret at fixed budgets from ``autotune replay --json`` files (``.json`` or ``.json.gz``), as one markdown
table: mean ± its standard error over every target and seed. A ``bench/kt_compare.py --out`` file (Kernel Tuner's
strategies and ours, a regret per budget) is read too.

    python bench/replay_table.py --budgets 10,20,40,80 "conv | full (after) | DIR/convolution_full.json" ...
    python bench/replay_table.py --paired "conv | ramp - main | A.json.gz | B.json.gz" [--strategy auto]

Each argument is ``data set | setting | file``; a row per (data set, setting, strategy): mean regret (%)
at each budget, and the runs it averages. ``--paired``: each argument names two files whose runs of
``--strategy`` are the same targets and seeds in the same order; a row of B − A run by run (a difference's
standard error is far smaller than either mean's when the runs share their start)."""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
from pathlib import Path


def regret(run: dict, n: int) -> float:
    if "regret" in run:  # a row of bench/kt_compare.py: its regret at each budget it read
        return run["regret"][str(n)]
    best = run["best_after"]
    return best[min(n, len(best)) - 1] / run["best_s"] - 1.0 if best else float("inf")


def load(path: str) -> list[dict]:
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(Path(path).read_text())


def cell(xs: list[float], signed: bool = False) -> str:
    """Mean ± standard error, in % of the best."""
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs) * 100:{'+' if signed else ''}.1f} ± {se * 100:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("entries", nargs="+")
    ap.add_argument("--budgets", default="10,20,40,80")
    ap.add_argument("--paired", action="store_true")
    ap.add_argument("--strategy", default="auto")
    a = ap.parse_args()
    budgets = [int(b) for b in a.budgets.split(",")]
    print("| data set | setting | strategy | " + " | ".join(f"@{b} %" for b in budgets) + " | runs |")
    print("|---|---|---|" + "---:|" * (len(budgets) + 1))
    for entry in a.entries:
        data, setting, *paths = (p.strip() for p in entry.split("|"))
        if a.paired:
            first, second = ([r for r in load(p) if r["strategy"] == a.strategy] for p in paths)
            pairs = list(zip(first, second, strict=True))
            if any(x["seed"] != y["seed"] or x["best_s"] != y["best_s"] for x, y in pairs):
                raise SystemExit(f"{entry}: the two files' runs are not the same targets and seeds")
            cells = " | ".join(cell([regret(y, b) - regret(x, b) for x, y in pairs], True) for b in budgets)
            print(f"| {data} | {setting} | {a.strategy} | {cells} | {len(pairs)} |")
            continue
        runs = load(paths[0])
        for strategy in dict.fromkeys(r["strategy"] for r in runs):
            mine = [r for r in runs if r["strategy"] == strategy]
            cells = " | ".join(cell([regret(r, b) for r in mine]) for b in budgets)
            print(f"| {data} | {setting} | {strategy} | {cells} | {len(mine)} |")


if __name__ == "__main__":
    main()
