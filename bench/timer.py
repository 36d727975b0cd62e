"""The timer against Nsight Compute: Kineto's device time per launch beside ncu's, three gemm_fp8 configs.

For each config: ``autotune.bench_kineto_detailed``'s median device time per launch of the timed kernel
(2x L2 flush, as a search measures it, with the SM clocks of the measurement), beside Nsight Compute's
``gpu__time_duration.sum`` of the same kernel over ``--launches`` launches, with ``--clock-control none``
(ncu otherwise locks the clocks to base, which is not what a search sees) and ncu's default cache control
(caches flushed before each profiled launch). ncu profiles a child process of this script that only builds
the inputs, compiles the config and launches it.

    python -m bench timer --shape M=2048,N=2112,K=7168     # needs a CUDA GPU and ncu on PATH
    python -m bench timer --db $OUT/s.db                    # the clock fields a search stored
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
from typing import Any

from bench.common import GEMM_FP8 as GEMM
from bench.common import ROOT, finish, out_dir, parser

#: the default tile, cuBLASLt itself, and a TMA tile with a deeper pipeline
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {
        "IMPL": "triton",
        "BLOCK_M": 128,
        "BLOCK_N": 128,
        "BLOCK_K": 128,
        "GROUP_M": 8,
        "num_stages": 3,
        "num_warps": 8,
        "USE_TMA": False,
        "SPLIT_K": 1,
    },
    "scaled_mm": {"IMPL": "scaled_mm"},
    "tma_128x256": {
        "IMPL": "triton",
        "BLOCK_M": 128,
        "BLOCK_N": 256,
        "BLOCK_K": 128,
        "GROUP_M": 8,
        "num_stages": 4,
        "num_warps": 8,
        "USE_TMA": True,
        "SPLIT_K": 1,
    },
}


def parse_shape(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (part.split("=") for part in text.split(","))}


def child(config: dict[str, Any], shape: dict[str, int], launches: int) -> None:
    """What ncu profiles: inputs, one compiling launch (skipped by ncu), then ``launches`` launches."""
    import torch

    from autotune.kernel.contract import load_kernel_file

    k = load_kernel_file(GEMM).kernel
    inputs = k.make_inputs(shape, "cuda")
    run = k.compile(config, inputs)  # launches once: ncu's --launch-skip 1
    torch.cuda.synchronize()
    for _ in range(launches):
        run()
        torch.cuda.synchronize()


def kineto(config: dict[str, Any], shape: dict[str, int], num_tests: int) -> dict[str, Any]:
    """The bench as a search runs it, under the clock watch."""
    import torch

    from autotune import clocks
    from autotune.bench import bench_kineto_detailed
    from autotune.kernel.contract import load_kernel_file
    from autotune.settings import throttle

    loaded = load_kernel_file(GEMM)
    k = loaded.kernel
    inputs = k.make_inputs(shape, "cuda")
    run = k.compile(config, inputs)
    torch.cuda.synchronize()
    names = loaded.timed_kernels(config)
    t = throttle()
    bench, c = clocks.measure(
        lambda: bench_kineto_detailed(run, names, num_tests=num_tests, suppress_kineto_output=True),
        clocks.nvml_source(),
        threshold=t.threshold,
        recovery_s=t.recovery_s,
        retakes=t.retakes,
    )
    (stats,) = bench.kernels.values()
    return {
        "kernels": names,
        "matched": list(stats.matched),
        "median_us": stats.median_s * 1e6,
        "min_us": stats.min_s * 1e6,
        "spread": stats.spread,
        "clocks": None if c is None else c.fields(),
    }


def ncu(config: dict[str, Any], shape: dict[str, int], kernel: str, launches: int) -> dict[str, Any]:
    """Nsight Compute's gpu__time_duration.sum of ``kernel``'s launches in a child process."""
    exe = shutil.which("ncu")
    if exe is None:
        return {"error": "ncu not found on PATH"}
    shape_arg = ",".join(f"{k}={v}" for k, v in shape.items())
    cmd = [
        exe,
        "--clock-control",
        "none",
        "--metrics",
        "gpu__time_duration.sum",
        "--kernel-name",
        f"regex:{kernel}",
        "--launch-skip",
        "1",
        "--launch-count",
        str(launches),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        sys.executable,
        "-m",
        "bench",
        "timer",
        "--child",
        json.dumps(config),
        "--shape",
        shape_arg,
        "--launches",
        str(launches),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=os.environ.copy(), cwd=ROOT)
    times = _ncu_times(proc.stdout)
    if not times:
        tail = (proc.stdout[-1500:] + proc.stderr[-1500:]).strip()
        return {"error": f"ncu exit {proc.returncode}, no gpu__time_duration rows: {tail}"}
    return {"median_us": statistics.median(times) / 1e3, "min_us": min(times) / 1e3, "n": len(times)}


def _ncu_times(stdout: str) -> list[float]:
    """gpu__time_duration.sum values (ns) from ncu's raw CSV page (a header row, a units row, data rows)."""
    lines = [line for line in stdout.splitlines() if line.startswith('"')]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    if "gpu__time_duration.sum" not in header:
        return []
    col = header.index("gpu__time_duration.sum")
    out = []
    for row in rows[1:]:
        try:
            out.append(float(row[col].replace(",", "")))
        except (ValueError, IndexError):
            continue  # the units row
    return out


def show_db(path: str) -> None:
    """The clock fields of every trial a search stored."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT status, kind, time_s, clock_min_mhz, clock_max_mhz, clock_limit_mhz, throttle_reasons, "
        "throttled, retakes FROM autotune_trials ORDER BY id"
    ).fetchall()
    print(
        f"{'status':14s} {'kind':7s} {'time_us':>9s} {'clk_min':>7s} {'clk_max':>7s} {'limit':>6s} thr ret reasons"
    )
    for status, kind, t, lo, hi, lim, reasons, thr, ret in rows:
        ts = f"{t * 1e6:9.2f}" if t else f"{'-':>9s}"
        print(
            f"{status:14s} {kind:7s} {ts} {lo or '-':>7} {hi or '-':>7} {lim or '-':>6} {thr!s:3s} {ret!s:3s} {reasons}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = parser("timer", __doc__)
    ap.add_argument("--shape", default="M=2048,N=2112,K=7168")
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--num-tests", type=int, default=30)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--db", help="print the clock fields of a search's SQLite file and exit")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    shape = parse_shape(args.shape)
    if args.child:
        child(json.loads(args.child), shape, args.launches)
        return 0
    if args.db:
        show_db(args.db)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("timer: needs a CUDA GPU (and ncu on PATH)", file=sys.stderr)
        return 2
    results: dict[str, Any] = {
        "shape": shape,
        "num_tests": args.num_tests,
        "launches": args.launches,
        "cases": {},
    }
    rows = []
    for name, config in CONFIGS.items():
        k = kineto(config, shape, args.num_tests)
        n = ncu(config, shape, k["kernels"][0], args.launches)
        case = {"config": config, "kineto": k, "ncu": n}
        if "median_us" in n:
            case["kineto_over_ncu_pct"] = (k["median_us"] / n["median_us"] - 1) * 100
        results["cases"][name] = case
        c = k["clocks"] or {}
        rows.append(
            {
                "config": name,
                "kineto_us": k["median_us"],
                "ncu_us": n.get("median_us"),
                "diff_pct": case.get("kineto_over_ncu_pct"),
                "clock_mhz": c.get("clock_max_mhz"),
                "ncu_error": (n.get("error") or "")[:60] or None,
            }
        )
    return finish("timer", out_dir(args, "timer"), results, argv, rows)


if __name__ == "__main__":
    sys.exit(main())
