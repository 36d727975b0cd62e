"""Replay `autotune search` offline on recorded H200 landscapes: regret of each strategy and budget over seeds.

The real Tuner runs (real Optuna samplers, the real pipeline with claims, a real SQLite store) on the
simulated evaluator (``autotune.engine.SimulatedEvaluator``), which answers each config with the time the
H200 landscape recorded for it (bench/landscapes/*.json, measured with the wave-1 space kept beside them),
so hundreds of searches run on a CPU in minutes.

    python bench/replay.py --seeds 20 --budgets 10,20,40 --out bench/results/replay.json
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.engine import SimulatedBackend, SimulatedKernel, WorkerInfo, load_landscape  # noqa: E402
from autotune.env import DEVICE_PRESETS  # noqa: E402
from autotune.settings import SearchSettings  # noqa: E402
from autotune.space import Space  # noqa: E402
from autotune.store import Store  # noqa: E402
from autotune.tuning.tuner import Tuner  # noqa: E402

#: the space the landscapes were recorded with (wave 1), and its kernel's default config at the time
SPACE_FILE = ROOT / "bench" / "landscapes" / "gemm_fp8_wave1.yaml"
DEFAULT_CONFIG = {
    "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8,
    "num_stages": 3, "num_warps": 8, "USE_TMA": False, "SPLIT_K": 1,
}  # fmt: skip


def load(path: Path, space: Space) -> SimulatedKernel:
    return SimulatedKernel.of(
        [load_landscape(path, space=space)], default_config=DEFAULT_CONFIG, facts=DEVICE_PRESETS["h200"]
    )


def replay(land: SimulatedKernel, strategy: str, budget: int, seed: int, db: str) -> dict[str, Any]:
    settings = SearchSettings(trials=budget, strategy=strategy, seed=seed, devices="sim:0", compile_workers=0)
    info = WorkerInfo(land.meta, land.facts, land.env, "sim:0", 1)
    with Store(db) as store:
        store.schema.upgrade()
        with Tuner("replay", store, settings, backend=SimulatedBackend(info, land.answer)) as tuner:
            tuner.start()
            report = tuner.search_shape(dict(land.meta.default_shapes[0]))
    return {
        "best_s": report.best.time_s,
        "evaluations": report.evaluations,
        "invalid": report.invalid,
        "reused": report.reused,
        "exhaustive": report.exhaustive,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budgets", default="10,20,40")
    ap.add_argument("--strategies", default="tpe,random")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "replay.json"))
    args = ap.parse_args()
    logging.getLogger("autotune").setLevel(logging.ERROR)
    space = Space.from_yaml(SPACE_FILE)
    results = []
    t0 = time.time()
    for path in sorted((ROOT / "bench" / "landscapes").glob("gemm_fp8_*.json")):
        doc = json.loads(path.read_text())
        land = load(path, space)
        best = min(c["time_s"] for c in doc["configs"] if c["status"] == "ok")
        key = f"{doc['shape']['M']}x{doc['shape']['N']}x{doc['shape']['K']}"
        for sampler in args.strategies.split(","):
            for budget in (int(b) for b in args.budgets.split(",")):
                regrets = []
                for seed in range(args.seeds):
                    with tempfile.TemporaryDirectory() as tmp:
                        r = replay(land, sampler, budget, seed, f"sqlite:///{tmp}/replay.db")
                    regrets.append(r["best_s"] / best - 1)
                results.append(
                    {
                        "shape": key,
                        "sampler": sampler,
                        "budget": budget,
                        "seeds": args.seeds,
                        "regret": regrets,
                    }
                )
                print(
                    f"{key:15} {sampler:6} budget {budget:3}: median regret {statistics.median(regrets) * 100:5.2f} %, "
                    f"worst {max(regrets) * 100:5.2f} %, within 1 % in {sum(r <= 0.01 for r in regrets)}/{args.seeds} "
                    f"({time.time() - t0:.0f} s)",
                    flush=True,
                )
    Path(args.out).write_text(json.dumps({"space_hash": space.hash(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
