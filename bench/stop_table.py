"""The table of ``bench/stop_replay.py`` rows: per file, mean and worst regret where the rule stopped, mean
evaluations, why it stopped, and the mean regret the same runs had at 10 / 20 / 40 / 80 evaluations.

    python bench/stop_table.py "LABEL | F.jsonl" ...
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path


def row(label: str, path: Path) -> str:
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not runs:
        return f"| {label} | no runs | | | | | 0 |"
    regrets = [100 * r["regret"] for r in runs]
    evals = statistics.fmean(r["evaluations"] for r in runs)
    stops = ", ".join(f"{k} {n}" for k, n in Counter(r["stop_reason"] for r in runs).most_common())
    at = " / ".join(
        f"{statistics.fmean(100 * r['regret_at'][b] for r in runs):.1f}" for b in ("10", "20", "40", "80")
    )
    return (
        f"| {label} | {statistics.fmean(regrets):.2f} % | {max(regrets):.2f} % | {evals:.0f} "
        f"| {stops} | {at} | {len(runs)} |"
    )


def main(args: list[str]) -> None:
    print(
        "| runs | mean regret | worst | mean evaluations | stopped | mean regret @10 / 20 / 40 / 80 % | n |"
    )
    print("|---|---|---|---|---|---|---|")
    for arg in args:
        label, _, file = arg.rpartition("|")
        print(row(label.strip() or file.strip(), Path(file.strip())))


if __name__ == "__main__":
    main(sys.argv[1:])
