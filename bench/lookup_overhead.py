"""Runtime-lookup overhead: `autotune.best_config`'s first call (one read-only query) and its cache hits.

    python -m bench lookup_overhead                       # tunes matmul_cpu into a fresh SQLite file first
    python -m bench lookup_overhead --db tuned.db --kernel gemm_fp8 --shape M=64,N=2112,K=7168 --device cuda

Each timed figure is the median of 5 rounds of ``--n`` calls: a cache hit of a tuned shape, a cache hit of an
untuned shape (the nearest-shape fallback), and, with ``--record``, the same with miss recording on."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import MATMUL_CPU, autotune, cold_env, finish, out_dir, parser


def per_call(fn: Callable[[], Any], n: int) -> float:
    """Median seconds per call over 5 rounds of ``n`` calls."""
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t0) / n)
    return statistics.median(rounds)


def tuned_cpu_db(out: Path, shape: str) -> str:
    """A SQLite file holding a best config of the CPU example at ``shape`` (a 3-evaluation search)."""
    db = Path(tempfile.mkdtemp(prefix="bench-lookup-")) / "tuned.db"
    argv = ["search", MATMUL_CPU, "--device", "cpu", "--trials", "3", "--shape", shape, "--db", db]
    run = autotune(argv, out / "search.log", env=cold_env())
    if run.rc != 0:
        raise SystemExit(f"lookup_overhead: the set-up search failed (exit {run.rc}), see {run.log}")
    return str(db)


def main(argv: list[str] | None = None) -> int:
    ap = parser("lookup_overhead", __doc__)
    ap.add_argument(
        "--db", help="a database with stored bests (default: tune the CPU example into a new one)"
    )
    ap.add_argument("--kernel", default="matmul_cpu")
    ap.add_argument("--shape", default="M=256,N=256,K=128")
    ap.add_argument("--device", default="cpu", help="the device the bests were tuned on (cpu, cuda)")
    ap.add_argument("--n", type=int, default=100_000, help="calls per round")
    ap.add_argument("--record", help="also time hits with miss recording on (record=this value: 1 or a URL)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    out = out_dir(args, "lookup_overhead")
    db = args.db or tuned_cpu_db(out, args.shape)
    shape = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    t0 = time.perf_counter()
    import autotune as at

    t_import = time.perf_counter() - t0
    heavy = sorted(m for m in ("optuna", "typer", "alembic", "torch") if m in sys.modules)
    if args.device.startswith("cuda"):
        import torch

        torch.cuda.init()

    def look(record: bool | str = False, **dims: int) -> Any:
        return at.best_config(args.kernel, db=db, device=args.device, default=None, record=record, **dims)

    t0 = time.perf_counter()
    first = look(**shape)
    t_first = time.perf_counter() - t0
    near = dict(shape)
    near[next(iter(near))] += 1
    t0 = time.perf_counter()
    look(**near)
    t_near = time.perf_counter() - t0
    res: dict[str, Any] = {
        "import_ms": t_import * 1e3,
        "heavy_modules_imported": heavy,
        "first_call_ms": t_first * 1e3,
        "first_call_untuned_us": t_near * 1e6,
        "hit_us": per_call(lambda: look(**shape), args.n) * 1e6,
        "hit_untuned_us": per_call(lambda: look(**near), args.n) * 1e6,
        "found": first,
    }
    if args.record:
        record: bool | str = True if args.record == "1" else args.record
        near[next(iter(near))] += 1  # a shape not looked up yet: its first call counts the miss
        look(record=record, **near)
        res["hit_untuned_recording_us"] = per_call(lambda: look(record=record, **near), args.n) * 1e6
    rows = [
        {"figure": "import autotune (ms)", "value": res["import_ms"], "note": f"heavy: {heavy or 'none'}"},
        {"figure": "first call (ms)", "value": res["first_call_ms"], "note": "one read-only query"},
        {
            "figure": "first call, untuned shape (us)",
            "value": res["first_call_untuned_us"],
            "note": "nearest",
        },
        {"figure": "cache hit (us)", "value": res["hit_us"], "note": f"median of 5 x {args.n}"},
        {
            "figure": "cache hit, untuned shape (us)",
            "value": res["hit_untuned_us"],
            "note": "fallback cached",
        },
    ]
    if "hit_untuned_recording_us" in res:
        rows.append(
            {"figure": "cache hit, recording (us)", "value": res["hit_untuned_recording_us"], "note": ""}
        )
    return finish("lookup_overhead", out, res, argv, rows)


if __name__ == "__main__":
    sys.exit(main())
