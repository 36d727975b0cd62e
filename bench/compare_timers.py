"""GPU proof of ``bench_kineto``: compare timers on a small and a large FP8 GEMM.

For each (kernel, shape): ``autotune.bench_kineto`` (2x L2 flush), the seed recipe's original code (8 GB
flush, text-table parsing), ``triton.testing.do_bench`` and CUDA events around each call (L2 flushed
before each), each repeated 5 times: mean, spread over the repeats, and wall time per measurement.
Then the effect of the flush size on ``bench_kineto``: none / 2x L2 / 8 GB.

    PYTHONPATH=. python bench/compare_timers.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune.bench import bench_kineto, bench_kineto_detailed  # noqa: E402
from autotune.kernel.contract import load_kernel_file  # noqa: E402


def recipe_bench_kineto(
    fn,
    kernel_names,
    num_tests=30,
    suppress_kineto_output=False,
    trace_path=None,
    flush_l2=True,
    with_multiple_kernels=False,
):
    """The seed recipe as written (DeepGEMM's bench_kineto): 8 GB flush, parses the profiler's text table."""
    flush_l2_size = int(8e9 // 4)
    fn()  # pre-warm
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CUDA],
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1),
    ) as prof:
        for _ in range(2):
            for _ in range(num_tests):
                if flush_l2:
                    torch.empty(flush_l2_size, dtype=torch.int, device="cuda").zero_()
                fn()
            torch.cuda.synchronize()
            prof.step()
    is_tuple = isinstance(kernel_names, tuple)
    prof_lines = prof.key_averages().table(sort_by="cuda_time_total", max_name_column_width=100).split("\n")
    kernel_names = (kernel_names,) if isinstance(kernel_names, str) else kernel_names
    if not with_multiple_kernels:
        for name in kernel_names:
            assert sum([name in line for line in prof_lines]) <= 1, (
                f"Errors of the kernel {name} in the profiling table"
            )
    units = {"ms": 1e3, "us": 1e6}
    kernel_durations = []
    for name in kernel_names:
        total_time = 0
        total_num = 0
        for line in prof_lines:
            if name in line:
                time_str = line.split()[-2]
                num_str = line.split()[-1]
                for unit, scale in units.items():
                    if unit in time_str:
                        total_time += float(time_str.replace(unit, "")) / scale * int(num_str)
                        total_num += int(num_str)
                        break
        kernel_durations.append(total_time / total_num if total_num > 0 else 0)
    return tuple(kernel_durations) if is_tuple else kernel_durations[0]


def cuda_events(fn, num_tests=30, flush_bytes=None):
    """CUDA events around each call, L2 flushed before each: measures launch overhead too."""
    buf = torch.empty(
        int((flush_bytes or 2 * torch.cuda.get_device_properties(0).L2_cache_size) // 4),
        dtype=torch.int,
        device="cuda",
    )
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(num_tests):
        buf.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return statistics.fmean(times)


def repeat(measure, n=5):
    vals, walls = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            vals.append(measure())
        except Exception as exc:  # the recipe's table parsing may break on this torch: that is a finding
            return {
                "error": f"{type(exc).__name__}: {exc}"[:300],
                "mean_us": float("nan"),
                "spread_pct": float("nan"),
                "wall_ms": float("nan"),
            }
        walls.append(time.perf_counter() - t0)
    mean = statistics.fmean(vals)
    return {
        "mean_us": mean * 1e6,
        "spread_pct": (max(vals) - min(vals)) / mean * 100 if mean else 0.0,
        "wall_ms": statistics.fmean(walls) * 1e3,
        "values_us": [v * 1e6 for v in vals],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--num-tests", type=int, default=20)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import triton.testing

    k = load_kernel_file(Path(__file__).resolve().parents[1] / "examples" / "gemm_fp8.py")
    mod = sys.modules[type(k.kernel).__module__]
    shapes = {"small": {"M": 64, "N": 2112, "K": 7168}, "large": {"M": 8192, "N": 7168, "K": 2048}}
    configs = {
        "small": dict(k.kernel.default_config),
        "large": dict(k.kernel.default_config),
    }
    props = torch.cuda.get_device_properties(0)
    rows, results = (
        [],
        {"gpu": props.name, "l2_bytes": props.L2_cache_size, "num_tests": args.num_tests, "cases": []},
    )
    nt = args.num_tests
    for label, shape in shapes.items():
        inputs = k.kernel.make_inputs(dict(shape), "cuda")
        cases = {
            "triton": (k.kernel.compile(configs[label], inputs), k.timed_kernels(configs[label])[0]),
            "scaled_mm": (mod.scaled_mm_baseline(inputs), "nvjet"),
        }
        for impl, (fn, name) in cases.items():
            m = {
                "kineto_2xL2": repeat(
                    lambda fn=fn, name=name: bench_kineto(fn, name, num_tests=nt, suppress_kineto_output=True)
                ),
                "recipe_8GB": repeat(
                    lambda fn=fn, name=name: recipe_bench_kineto(
                        fn, name, num_tests=nt, suppress_kineto_output=True
                    )
                ),
                "do_bench": repeat(lambda fn=fn: triton.testing.do_bench(fn) / 1e3),
                "cuda_events": repeat(lambda fn=fn: cuda_events(fn, nt)),
                "kineto_noflush": repeat(
                    lambda fn=fn, name=name: bench_kineto(
                        fn, name, num_tests=nt, flush_l2=False, suppress_kineto_output=True
                    )
                ),
                "kineto_8GB": repeat(
                    lambda fn=fn, name=name: bench_kineto(
                        fn, name, num_tests=nt, flush_bytes=int(8e9), suppress_kineto_output=True
                    )
                ),
            }
            det = bench_kineto_detailed(fn, name, num_tests=nt, suppress_kineto_output=True)
            flops = 2 * shape["M"] * shape["N"] * shape["K"]
            case = {
                "size": label,
                "impl": impl,
                "shape": shape,
                "kernel": list(det.kernels[name].matched),
                "median_us": det.kernels[name].median_s * 1e6,
                "in_run_spread": det.kernels[name].spread,
                "tflops": flops / det.kernels[name].median_s / 1e12,
                "methods": m,
            }
            results["cases"].append(case)
            for meth, v in m.items():
                rows.append((label, impl, meth, v["mean_us"], v["spread_pct"], v["wall_ms"]))
            print(f"done {label} {impl}: kernel {case['kernel'][0][:60]}", flush=True)
    Path(args.out, "compare_timers.json").write_text(json.dumps(results, indent=2))
    print(
        f"\nGPU: {props.name}; L2 {props.L2_cache_size / 2**20:.0f} MiB; {args.num_tests} calls per measurement; 5 repeats"
    )
    print(f"{'size':6} {'impl':10} {'method':15} {'mean us':>10} {'spread %':>9} {'wall ms':>9}")
    for r in rows:
        print(f"{r[0]:6} {r[1]:10} {r[2]:15} {r[3]:10.2f} {r[4]:9.2f} {r[5]:9.1f}")


if __name__ == "__main__":
    main()
