"""Regret of live `autotune search` runs (their --json) against exhaustive landscapes of the same shapes:
the H200 check of the default strategy (bench/gpu_auto.sh).  python bench/auto_live_summary.py DIR"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autotune.shapes import format_shape
from autotune.trial import config_hash
from autotune.tuning.landscape import load_landscape

if __name__ == "__main__":
    d = Path(sys.argv[1])
    lands = {
        load_landscape(p).shape_key: load_landscape(p) for p in sorted((d / "exhaustive").glob("*.json"))
    }
    rows = []
    print(
        f"{'shape':24} {'run':10} {'evals':>5} {'regret %':>8} {'wall s':>7}  (regret: the chosen config's exhaustive time / best - 1)"
    )
    for run in sorted(d.glob("search_*.json")):
        for r in json.loads(run.read_text()):
            key = format_shape(r["shape"])
            land = lands.get(key)
            if land is None or not r.get("best"):
                continue
            chosen = land.results.get(config_hash(land.space.normalize(r["best"]["config"])))
            regret = (chosen.time_s / land.best_s - 1) if chosen and chosen.time_s else float("nan")
            rows.append(
                {
                    "shape": key,
                    "run": run.stem[7:],
                    "evaluations": r["evaluations"],
                    "regret": regret,
                    "wall_s": r["wall_s"],
                }
            )
            print(f"{key:24} {run.stem[7:]:10} {r['evaluations']:>5} {regret * 100:8.2f} {r['wall_s']:7.1f}")
    by_run: dict[str, list[float]] = {}
    for x in rows:
        by_run.setdefault(x["run"].split("-s")[0], []).append(x["regret"])  # every seed of a run together
    for name, regs in by_run.items():
        known = [r for r in regs if r == r]  # nan: the chosen config is not in a partial exhaustive landscape
        print(
            f"{name}: mean regret {sum(known) / len(known) * 100:.2f} % over {len(known)} (shape, seed) with a complete"
            f" exhaustive landscape, worst {max(known) * 100:.2f} %"
        )
    (d / "summary.json").write_text(json.dumps(rows, indent=1))
