"""Cost of the runtime lookup `autotune.best_config`: first call (one read-only query) and cache hits.

PYTHONPATH=. python bench/lookup_overhead.py --db tuned.db --kernel gemm_fp8 --shape M=64,N=2112,K=7168
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--kernel", default="gemm_fp8")
    ap.add_argument("--shape", default="M=64,N=2112,K=7168")
    ap.add_argument("--device", default="")
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument(
        "--record",
        help="also time cache hits of an untuned shape with miss recording on (record=this value: 1 or a URL)",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    import autotune

    t_import = time.perf_counter() - t0
    heavy = sorted(m for m in ("optuna", "typer", "alembic", "torch") if m in sys.modules)
    shape = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    if args.device.startswith("cuda"):
        import torch

        torch.cuda.init()
    t0 = time.perf_counter()
    first = autotune.best_config(args.kernel, db=args.db, device=args.device, default=None, **shape)
    t_first = time.perf_counter() - t0
    hits = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(args.n):
            autotune.best_config(args.kernel, db=args.db, device=args.device, default=None, **shape)
        hits.append((time.perf_counter() - t0) / args.n)
    near = dict(shape)
    near[next(iter(near))] += 1
    t0 = time.perf_counter()
    autotune.best_config(args.kernel, db=args.db, device=args.device, default=None, **near)
    t_near = time.perf_counter() - t0
    nears = []
    for _ in range(5):  # the cached fallback of an untuned shape: where a re-check of the store may start
        t0 = time.perf_counter()
        for _ in range(args.n):
            autotune.best_config(args.kernel, db=args.db, device=args.device, default=None, **near)
        nears.append((time.perf_counter() - t0) / args.n)
    print(f"import autotune: {t_import * 1e3:.1f} ms (heavy modules imported: {heavy or 'none'})")
    print(f"first call (one read-only query + cache fill): {t_first * 1e3:.2f} ms -> {first}")
    print(f"first call for an untuned shape (nearest-shape fallback): {t_near * 1e6:.1f} us")
    print(f"cache hit: median {statistics.median(hits) * 1e6:.2f} us over 5 x {args.n} calls")
    print(
        f"cache hit, untuned shape (nearest): median {statistics.median(nears) * 1e6:.2f} us over 5 x {args.n} calls"
    )
    if args.record:
        record: bool | str = True if args.record == "1" else args.record
        near[next(iter(near))] += 1  # a shape not looked up yet: its first call counts the miss
        autotune.best_config(args.kernel, db=args.db, device=args.device, default=None, record=record, **near)
        rec = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.n):
                autotune.best_config(
                    args.kernel, db=args.db, device=args.device, default=None, record=record, **near
                )
            rec.append((time.perf_counter() - t0) / args.n)
        print(
            f"cache hit, untuned shape, recording on: median {statistics.median(rec) * 1e6:.2f} us over 5 x "
            f"{args.n} calls"
        )


if __name__ == "__main__":
    main()
