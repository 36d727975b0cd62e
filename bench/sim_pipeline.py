"""The pipeline's scaling without GPUs: an exhaustive search of a recorded H200 landscape (1 shape, 472
valid configs of the wave-1 gemm_fp8 space) on 1, 4 and 8 simulated devices, each evaluation standing in
for a measurement by sleeping ``--eval-ms`` (the H200's median wall time per measurement was 21 ms), with a
compile pool whose compiles sleep ``--compile-ms``. Real tuner, real claims, real SQLite store, real Optuna
study writes: what it measures is the orchestrator's own cost and how evaluations per second scale.

    python bench/sim_pipeline.py --devices 1,4,8 --out bench/results/sim_pipeline.json
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.engine import SimulatedBackend, WorkerInfo  # noqa: E402
from autotune.engine.simulated import SimulatedKernel, load_landscape  # noqa: E402
from autotune.settings import SearchSettings  # noqa: E402
from autotune.space import Space  # noqa: E402
from autotune.store import Store  # noqa: E402
from autotune.tuning.tuner import Tuner  # noqa: E402
from bench.replay import SPACE_FILE, load  # noqa: E402


def run(
    land,
    devices: int,
    strategy: str,
    trials: int,
    eval_s: float,
    compile_s: float,
    workers: int,
    db: str = "",
) -> dict:
    info = WorkerInfo(land.meta, land.facts, land.env, "sim:0", devices)
    backend = SimulatedBackend(info, land.answer, compile_s=compile_s, eval_s=eval_s)
    settings = SearchSettings(
        trials=trials, strategy=strategy, seed=0, devices=",".join(f"sim:{i}" for i in range(devices)),
        compile_workers=workers,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Store(db or f"sqlite:///{tmp}/sim.db") as store:
        store.schema.upgrade()
        t0 = time.monotonic()
        with Tuner("sim", store, settings, backend=backend) as tuner:
            tuner.start()
            report = tuner.search_shape(dict(land.meta.default_shapes[0]))
        wall = time.monotonic() - t0
        dups = store.trials.duplicate_measurements()
    return {
        "devices": devices,
        "strategy": strategy,
        "db": "postgres" if db.startswith("postgres") else "sqlite",
        "evaluations": report.evaluations,
        "wall_s": wall,
        "evals_per_s": report.evaluations / wall,
        "loop_ms_per_trial": (report.loop_s_per_trial or 0) * 1e3,
        "device_gap_ms_median": report.device_gap_s[0] * 1e3 if report.device_gap_s else None,
        "device_gap_ms_p90": report.device_gap_s[1] * 1e3 if report.device_gap_s else None,
        "duplicates": dups,
        "best_s": report.best.time_s if report.best else None,
        "search_s": report.wall_s,
        "time_split": report.time_split,
    }


def fresh_pg(server: str) -> str:
    import uuid

    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from autotune.store import normalize_db_url

    url = make_url(normalize_db_url(server))
    name = f"autotune_sim_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="1,4,8")
    ap.add_argument("--strategies", default="exhaustive,tpe")
    ap.add_argument("--eval-ms", type=float, default=21.0)
    ap.add_argument("--compile-ms", type=float, default=0.0)
    ap.add_argument("--compile-workers", type=int, default=1)
    ap.add_argument("--tpe-trials", type=int, default=200)
    ap.add_argument(
        "--no-study-writes",
        action="store_true",
        help="diagnostic: skip the Optuna study copy (shows what the study writes cost the loop)",
    )
    ap.add_argument(
        "--landscape",
        default="",
        help="a landscape file (e.g. bench/landscapes/wave2/*.json, its space inside) instead of the wave-1 one",
    )
    ap.add_argument("--pg", default="", help="a Postgres server URL: each run gets a fresh database on it")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "sim_pipeline.json"))
    args = ap.parse_args()
    logging.getLogger("autotune").setLevel(logging.ERROR)
    if args.no_study_writes:
        from autotune.store.optuna_study import StudyWriter

        StudyWriter.add = lambda self, *a, **k: None  # type: ignore[method-assign]
    if args.landscape:
        land = SimulatedKernel.of([load_landscape(Path(args.landscape))])
    else:
        land = load(
            sorted((ROOT / "bench" / "landscapes").glob("gemm_fp8_*.json"))[0], Space.from_yaml(SPACE_FILE)
        )
    rows = []
    for strategy in args.strategies.split(","):
        trials = 10_000 if strategy == "exhaustive" else args.tpe_trials
        for n in (int(d) for d in args.devices.split(",")):
            r = run(
                land, n, strategy, trials, args.eval_ms / 1e3, args.compile_ms / 1e3, args.compile_workers
            )
            rows.append(r)
            print(
                f"{strategy:10} {n} dev: {r['evaluations']:4} evals in {r['wall_s']:6.2f} s = "
                f"{r['evals_per_s']:6.1f}/s; loop {r['loop_ms_per_trial']:.2f} ms/trial; device gap "
                f"median {r['device_gap_ms_median']:.2f} ms p90 {r['device_gap_ms_p90']:.2f} ms; dups {r['duplicates']}",
                flush=True,
            )
            print(f"  search {r['search_s']:.2f} s: {r['time_split']}", flush=True)
    meta = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "eval_ms": args.eval_ms,
        "compile_ms": args.compile_ms,
        "compile_workers": args.compile_workers,
    }
    Path(args.out).write_text(json.dumps({"meta": meta, "runs": rows}, indent=1))
    base = {r["strategy"]: r["evals_per_s"] for r in rows if r["devices"] == 1}
    for r in rows:
        r["speedup"] = r["evals_per_s"] / base[r["strategy"]]
    print("\nstrategy   devices  evals/s  speedup  loop ms/trial  gap p50/p90 ms")
    for r in rows:
        print(
            f"{r['strategy']:10} {r['devices']:7} {r['evals_per_s']:8.1f} {r['speedup']:7.2f}x "
            f"{r['loop_ms_per_trial']:13.2f}  {r['device_gap_ms_median']:.2f}/{r['device_gap_ms_p90']:.2f}"
        )


if __name__ == "__main__":
    main()
