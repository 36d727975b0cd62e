"""Replay `autotune search` offline on recorded H200 landscapes: regret of each sampler and budget over seeds.

The real Tuner runs (real Optuna samplers, the real ask/tell loop with its invalid/dedupe handling, a real
SQLite store); only the worker is replaced by one that answers each config with the time the H200 landscape
recorded for it (bench/landscapes/*.json), so hundreds of searches run on a CPU in minutes.

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

from autotune.env import DEVICE_PRESETS  # noqa: E402
from autotune.kernel import load_kernel_file  # noqa: E402
from autotune.settings import SearchSettings  # noqa: E402
from autotune.space import Space  # noqa: E402
from autotune.store import Store  # noqa: E402
from autotune.trial import TrialResult, TrialStatus, config_hash  # noqa: E402
from autotune.tuner import Tuner  # noqa: E402
from autotune.worker import WorkerInfo  # noqa: E402

#: the kernel file's own default config: the first config every search evaluates
DEFAULT_CONFIG = dict(load_kernel_file(ROOT / "examples" / "gemm_fp8.py").kernel.default_config)


class ReplayWorker:
    """Stands in for ``autotune.worker.Worker``: answers from a recorded landscape instead of a GPU."""

    def __init__(self, landscape: dict[str, Any], space: Space):
        self.times = {config_hash(space.normalize(c["config"])): c for c in landscape["configs"]}
        shape = landscape["shape"]
        self.info = WorkerInfo(
            meta={
                "name": "gemm_fp8_replay",
                "path": "replay",
                "source_hash": "replay",
                "space": space.to_dict(),
                "space_source": space.source,
                "default_config": DEFAULT_CONFIG,
                "default_shapes": [shape],
                "shape_params": ["M", "N", "K"],
                "dtypes": {"a": "float8_e4m3fn", "out": "bfloat16"},
            },
            facts=DEVICE_PRESETS["h200"],
            env={
                "device_kind": "cuda",
                "gpu_name": landscape["gpu"],
                "cc": "9.0",
                "sm_count": 132,
                "driver": "replay",
                "cuda": "replay",
                "torch": "replay",
                "triton": "3.6.0",
                "hostname": "replay",
            },
            device="cuda:0",
        )
        self.flops = 2 * shape["M"] * shape["N"] * shape["K"]

    def start(self) -> WorkerInfo:
        return self.info

    def evaluate(self, config: dict[str, Any], shape: dict[str, int], **_: Any) -> TrialResult:
        rec = self.times.get(config_hash(config))
        if rec is None or rec["status"] != "ok":
            return TrialResult(TrialStatus.LAUNCH_FAILED, config, error="not in the landscape")
        t = rec["time_s"]
        return TrialResult(TrialStatus.OK, config, time_s=t, tflops=self.flops / t / 1e12, worker="replay")

    def close(self) -> None:
        pass


def replay(
    landscape: dict[str, Any], space: Space, sampler: str, budget: int, seed: int, db: str
) -> dict[str, Any]:
    settings = SearchSettings(trials=budget, sampler=sampler, seed=seed, device="cuda")
    with Store(db) as store:
        store.upgrade()
        tuner = Tuner("replay", store, settings)
        tuner.worker = ReplayWorker(landscape, space)
        tuner.start()
        report = tuner.search_shape(dict(landscape["shape"]))
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
    ap.add_argument("--samplers", default="tpe,random")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "replay.json"))
    args = ap.parse_args()
    logging.getLogger("autotune").setLevel(logging.ERROR)
    space = Space.from_yaml(ROOT / "search_spaces" / "gemm_fp8.yaml")
    results = []
    t0 = time.time()
    for path in sorted((ROOT / "bench" / "landscapes").glob("gemm_fp8_*.json")):
        land = json.loads(path.read_text())
        best = min(c["time_s"] for c in land["configs"] if c["status"] == "ok")
        key = f"{land['shape']['M']}x{land['shape']['N']}x{land['shape']['K']}"
        for sampler in args.samplers.split(","):
            for budget in (int(b) for b in args.budgets.split(",")):
                regrets = []
                for seed in range(args.seeds):
                    with tempfile.TemporaryDirectory() as tmp:
                        r = replay(land, space, sampler, budget, seed, f"sqlite:///{tmp}/replay.db")
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
