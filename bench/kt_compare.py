"""Kernel Tuner's strategies and ours side by side on the same landscapes and budgets (mean regret).

Kernel Tuner (``pip install autotune[bench]``: a bench-only dependency, never needed by the tests) runs in
simulation mode on a cachefile written from each landscape: every config the landscape recorded is in the
cache (failures as ``RuntimeFailedConfig``), and a restriction keeps Kernel Tuner to exactly those (the rest
of the parameters' product is invalid in our space: neither side spends an evaluation on it). Each Kernel
Tuner run gets ``max_fevals`` = the largest budget and is read at every smaller budget (the best after the
first N evaluations, failures counted as ours are); ours are ``autotune replay`` runs (the one search loop on
the simulated backend) at the largest budget, read the same way, with an empty store (``--no-transfer``:
Kernel Tuner has no history) unless ``--transfer``.

    python bench/kt_compare.py bench/landscapes/wave2/gemm_fp8_*.json --seeds 3 --budgets 10,20,40,80 \
        --out bench/results/kt_compare_gemm.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.trial import TrialStatus, config_hash  # noqa: E402
from autotune.tuning.landscape import Landscape, load_landscape  # noqa: E402
from autotune.tuning.replay import replay  # noqa: E402

KT_STRATEGIES = (
    "random_sample",
    "genetic_algorithm",
    "bayes_opt",
    "simulated_annealing",
    "pso",
    "greedy_ils",
    "diff_evo",
)
OURS = ("auto", "tpe")


def _key(values: list[Any]) -> str:
    return ",".join(str(v) for v in values)


def write_cache(land: Landscape, path: Path) -> tuple[dict[str, list[Any]], set[str]]:
    """A Kernel Tuner cachefile of ``land``: (its tune_params, the keys of the configs it holds)."""
    params = [p.name for p in land.space.params]
    recorded = [r for r in land.results.values() if r.status is not TrialStatus.INVALID]
    tune_params = {p: sorted({r.config.get(p) for r in recorded}, key=repr) for p in params}
    cache: dict[str, dict[str, Any]] = {}
    for r in recorded:
        values = [r.config.get(p) for p in params]
        entry: dict[str, Any] = dict(zip(params, values, strict=True))
        if r.timed:
            ms = r.time_s * 1e3
            entry.update(time=ms, times=[ms])
        else:
            entry["time"] = "RuntimeFailedConfig"
        entry.update(compile_time=0, verification_time=0, benchmark_time=0, strategy_time=0, framework_time=0)
        entry["timestamp"] = "2026-01-01 00:00:00"
        cache[_key(values)] = entry
    doc = {
        "device_name": land.device_name,
        "kernel_name": land.kernel,
        "problem_size": [1, 1, 1],
        "tune_params_keys": params,
        "tune_params": tune_params,
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(doc))
    return tune_params, set(cache)


def run_kt(land: Landscape, strategy: str, fevals: int, seed: int, tmp: Path) -> list[float]:
    """One Kernel Tuner run: the best time (s) after each evaluation, in its order."""
    import numpy as np
    from kernel_tuner import tune_kernel

    cachefile = tmp / f"{config_hash(land.shape)}_{land.device_name}.json".replace(" ", "_")
    if not cachefile.exists():
        write_cache(land, cachefile)
    doc = json.loads(cachefile.read_text())
    params, held = doc["tune_params_keys"], set(doc["cache"])

    def restrict(p: dict[str, Any]) -> bool:
        return _key([p[k] for k in params]) in held

    np.random.seed(seed)
    import random

    random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_kernel(
            land.kernel,
            "__global__ void k() {}",
            (1, 1, 1),
            [],
            doc["tune_params"],
            restrictions=restrict,
            strategy=strategy,
            strategy_options={"max_fevals": fevals},
            cache=str(cachefile),
            simulation_mode=True,
            verbose=False,
            quiet=True,
        )
    best, after = math.inf, []
    for r in results[:fevals]:
        t = r.get("time")
        if isinstance(t, (int, float)) and math.isfinite(t):
            best = min(best, t / 1e3)
        after.append(best)
    return after


def regret(after: list[float], n: int, best: float) -> float:
    if not after:
        return math.inf
    return after[min(n, len(after)) - 1] / best - 1.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("landscapes", nargs="+")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budgets", default="10,20,40,80")
    ap.add_argument("--kt", default=",".join(KT_STRATEGIES), help="Kernel Tuner strategies")
    ap.add_argument("--ours", default=",".join(OURS), help="our strategies")
    ap.add_argument("--transfer", action="store_true", help="ours with the other landscapes in the store")
    ap.add_argument("--depth", type=int, default=19, help="our proposals in flight")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.getLogger("autotune").setLevel(logging.ERROR)
    budgets = sorted(int(b) for b in args.budgets.split(","))
    targets = [load_landscape(p) for p in args.landscapes]
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for land in targets:
            for strategy in filter(None, args.kt.split(",")):
                for seed in range(args.seeds):
                    try:
                        after = run_kt(land, strategy, budgets[-1], seed, Path(tmp))
                    except Exception as e:  # a strategy that cannot run here: said, not fatal
                        print(f"kernel_tuner {strategy} on {land.shape_key}: {type(e).__name__}: {e}"[:300])
                        break
                    rows.append(_row("kt:" + strategy, land, seed, after, budgets))
                    print(_line(rows[-1], t0), flush=True)
        ours = [s for s in args.ours.split(",") if s]
        if ours:
            for run in replay(
                targets, ours, budgets[-1], range(args.seeds), transfer=args.transfer, depth=args.depth
            ):
                # several GPUs share a shape: the run's own landscape is the one with its best time
                land = next(
                    t for t in targets if run.shape_key.startswith(t.shape_key) and t.best_s == run.best_s
                )
                rows.append(_row(run.strategy, land, run.seed, run.best_after, budgets, run.shape_key))
                print(_line(rows[-1], t0), flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    print()
    for line in table(rows, budgets):
        print(line)


def _row(
    strategy: str, land: Landscape, seed: int, after: list[float], budgets: list[int], name: str = ""
) -> dict[str, Any]:
    return {
        "landscape": f"{land.kernel} {land.shape_key} {land.device_name}",
        "strategy": strategy,
        "seed": seed,
        "regret": {str(b): regret(after, b, land.best_s) for b in budgets},
    }


def _line(row: dict[str, Any], t0: float) -> str:
    regrets = " ".join(f"{b}:{r * 100:.1f}%" for b, r in row["regret"].items())
    return f"{row['landscape'][:60]:60} {row['strategy']:24} seed {row['seed']} {regrets} ({time.time() - t0:.0f} s)"


def table(rows: list[dict[str, Any]], budgets: list[int]) -> list[str]:
    """Mean regret (%) per landscape set (kernel) and strategy at each budget, a Markdown table."""
    kernels = list(dict.fromkeys(r["landscape"].split()[0] for r in rows))
    lines = [
        "| kernel | strategy | " + " | ".join(str(b) for b in budgets) + " |",
        "|---|---|" + "---|" * len(budgets),
    ]
    for k in kernels:
        mine = [r for r in rows if r["landscape"].split()[0] == k]
        for s in dict.fromkeys(r["strategy"] for r in mine):
            rs = [r for r in mine if r["strategy"] == s]
            means = [statistics.fmean(r["regret"][str(b)] for r in rs) * 100 for b in budgets]
            lines.append(f"| {k} | {s} | " + " | ".join(f"{m:.1f}" for m in means) + " |")
    return lines


if __name__ == "__main__":
    main()
