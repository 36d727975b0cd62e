"""Time every valid gemm_fp8 config on a few shapes, plus cuBLASLt (torch._scaled_mm), and write landscapes
in the format ``autotune replay`` reads (autotune/landscape.py documents it).

Uses the frozen wave-2 kernel file (bench/kernels/gemm_fp8_wave2.py, its space beside it) unless --kernel
names another. Each config's output is judged by the kernel's check (``compare_outputs``) and, for the
record, by the wave-1 check (``legacy_check``: isclose at 0.02 of the RMS), so the landscapes count what
the old check rejected.

On the H200, from the repo root:   PYTHONPATH=. python bench/landscape.py --out $OUT
CPU smoke run (interpreter):        TRITON_INTERPRET=1 PYTHONPATH=. python bench/landscape.py --device cpu \\
                                        --shapes 64x64x128 --max-configs 3 --out /tmp/ls

Every config is compiled ahead in a pool of processes on a small shape whose dims are all multiples of 16
and of 128 (Triton specializes on divisibility by 16, and the kernel on K % BLOCK_K), so the real shapes
load from Triton's disk cache. Then, per shape and config: compile (cached), check against the reference,
time the kernel(s) named by KERNEL.timed_kernels with bench_kineto (L2 flushed). Writes
<out>/gemm_fp8_<M>x<N>x<K>.json per shape and prints a summary table last."""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KERNEL_FILE = ROOT / "bench" / "kernels" / "gemm_fp8_wave2.py"
DEFAULT_SHAPES = "64x2112x7168,128x24576x1536,4096x7168x2048,4096x4096x7168"
# Dims divisible by 16 and K by 128 (so EVEN_K matches the real shapes): the compile is what is reused.
PRECOMPILE_SHAPE = {"M": 128, "N": 256, "K": 512}
SCALED_MM_NAME = "nvjet"  # cuBLASLt's fp8 kernels on sm_90: nvjet_sm90_qqtst_...
_module: Any = None
_small_inputs: Any = None


def log(msg: str) -> None:
    print(msg, flush=True)


def load_example() -> Any:
    """The kernel file as a module (one fixed name, so pool workers import it the same way)."""
    global _module
    if _module is None:
        spec = importlib.util.spec_from_file_location("autotune_example_gemm_fp8", KERNEL_FILE)
        assert spec is not None and spec.loader is not None
        _module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = _module
        spec.loader.exec_module(_module)
    return _module


# ---- space and timing ---------------------------------------------------------------------------------


def load_space(facts: Mapping[str, int]) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    from autotune.kernel.contract import resolve_space
    from autotune.space import Space

    space_def, source = resolve_space(KERNEL_FILE, load_example().KERNEL.space)
    space = Space.from_dict(space_def, source=source)
    return list(space.enumerate(facts)), space.hash(), space.to_dict()


def wall_time(fn: Callable[[], Any], num_tests: int) -> float:
    """CPU smoke run only: wall-clock seconds per call (the interpreter has no device kernels to profile)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(num_tests):
        fn()
    return (time.perf_counter() - t0) / num_tests


# ---- precompile pool ----------------------------------------------------------------------------------


def _pool_init(device: str, kernel_file: str) -> None:
    global _small_inputs, KERNEL_FILE
    KERNEL_FILE = Path(kernel_file)
    _small_inputs = load_example().KERNEL.make_inputs(PRECOMPILE_SHAPE, device)


def _precompile(config: dict[str, Any]) -> tuple[str, str, float]:
    """(status, error, seconds) of compiling + launching ``config`` once on the small shape (in a worker)."""
    t0 = time.perf_counter()
    try:
        load_example().KERNEL.compile(config, _small_inputs)
        import torch

        torch.cuda.synchronize()
        return "ok", "", time.perf_counter() - t0
    except Exception as exc:
        return classify(exc), f"{type(exc).__name__}: {exc}"[:2000], time.perf_counter() - t0


def classify(exc: BaseException) -> str:
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    return "compile_failed" if isinstance(exc, CompilationError | OutOfResources) else "launch_failed"


def precompile_all(
    configs: list[dict[str, Any]], device: str, workers: int
) -> dict[int, tuple[str, str, float]]:
    t0 = time.perf_counter()
    results: dict[int, tuple[str, str, float]] = {}
    ctx = mp.get_context("spawn")
    try:
        with cf.ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_pool_init, initargs=(device, str(KERNEL_FILE))
        ) as pool:
            futs = {pool.submit(_precompile, c): i for i, c in enumerate(configs)}
            for n, fut in enumerate(cf.as_completed(futs), 1):
                results[futs[fut]] = fut.result()
                if n % 50 == 0 or n == len(configs):
                    log(f"  precompiled {n}/{len(configs)} ({time.perf_counter() - t0:.0f} s)")
    except cf.process.BrokenProcessPool as exc:  # the main loop compiles whatever is left
        log(f"  precompile pool broke ({exc}); compiling the rest in the main process")
    bad = sum(r[0] != "ok" for r in results.values())
    log(f"precompile: {len(results)} done, {bad} failed, {time.perf_counter() - t0:.0f} s")
    return results


# ---- main loop ----------------------------------------------------------------------------------------


def parse_shapes(text: str) -> list[dict[str, int]]:
    shapes = []
    for item in text.split(","):
        m, n, k = (int(x) for x in item.lower().strip().split("x"))
        shapes.append({"M": m, "N": n, "K": k})
    return shapes


def shape_tag(shape: Mapping[str, int]) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']}"


def legacy_check(out: Any, ref: Any) -> str | None:
    """The wave-1 gemm_fp8 check: isclose at rtol = atol = 0.02 of the reference's RMS."""
    from autotune.kernel.contract import compare_tensors

    if tuple(out.shape) != tuple(ref.shape):
        return "shape"
    r = ref.float()
    rms = float(r.square().mean().sqrt()) or 1.0
    return compare_tensors(out.float() / rms, r / rms, 0.02, 0.02)


def run_shape(
    shape: dict[str, int],
    configs: list[dict[str, Any]],
    pre: Mapping[int, tuple[str, str, float]],
    args: argparse.Namespace,
    deadline: float,
) -> dict[str, Any]:
    import torch

    mod = load_example()
    kernel = mod.KERNEL
    cuda = args.device.startswith("cuda")
    from autotune.bench import bench_kineto

    def timed(fn: Callable[[], Any], names: tuple[str, ...]) -> list[float]:
        """Per-call seconds of each named kernel (each launches once per call)."""
        if not cuda:
            return [wall_time(fn, 2)]
        t = bench_kineto(fn, names, num_tests=args.num_tests, flush_l2=True, suppress_kineto_output=True)
        return [float(x) for x in t]

    torch.manual_seed(0)
    inputs = kernel.make_inputs(shape, args.device)
    ref = kernel.reference(inputs)
    flops = kernel.flops(shape)
    scaled_mm_s = None
    if cuda:
        try:
            scaled_mm_s = timed(mod.scaled_mm_baseline(inputs), (SCALED_MM_NAME,))[0]
        except Exception as exc:
            log(f"  torch._scaled_mm: {type(exc).__name__}: {exc}")
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i, config in enumerate(configs):
        row: dict[str, Any] = {
            "config": config,
            "status": "ok",
            "time_s": None,
            "tflops": None,
            "error": None,
        }
        rows.append(row)
        if time.perf_counter() > deadline:
            row.update(status="skipped", error="time budget")
            continue
        status, error, _ = pre.get(i, ("ok", "", 0.0))
        if status == "compile_failed":
            row.update(status=status, error=error)
            continue
        M, N, K = shape["M"], shape["N"], shape["K"]
        why = mod.check_config(config, M, N, K)
        if why:
            row.update(status="invalid", error=why)
            continue
        try:
            run = kernel.compile(config, inputs)
        except Exception as exc:
            row.update(status=classify(exc), error=f"{type(exc).__name__}: {exc}"[:2000])
            continue
        try:
            from autotune.kernel.contract import check_metrics

            out = run()
            err = kernel.compare(out, ref)
            row["check"] = check_metrics(out, ref)
            row["legacy_check"] = legacy_check(out, ref)
            del out
            if err:
                row.update(status="wrong_result", error=err)
                continue
            row["kernel_times_s"] = times = timed(run, kernel.timed_kernels(config))
            row["time_s"] = t = sum(times)
            row["tflops"] = flops / t / 1e12
        except Exception as exc:
            row.update(status="launch_failed", error=f"{type(exc).__name__}: {exc}"[:2000])
            if cuda and "illegal" in str(exc).lower():  # the CUDA context is gone: nothing after this runs
                rows += [
                    {"config": c, "status": "skipped", "error": "CUDA context lost"} for c in configs[i + 1 :]
                ]
                return {
                    "rows": rows,
                    "scaled_mm_s": scaled_mm_s,
                    "seconds": time.perf_counter() - t0,
                    "fatal": True,
                }
        finally:
            del run
        if (i + 1) % 50 == 0:
            log(f"  {shape_tag(shape)}: {i + 1}/{len(configs)} configs, {time.perf_counter() - t0:.0f} s")
    return {"rows": rows, "scaled_mm_s": scaled_mm_s, "seconds": time.perf_counter() - t0, "fatal": False}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxNxK")
    ap.add_argument("--out", default=str(ROOT / "bench" / "landscapes"))
    ap.add_argument("--kernel", default=None, help="kernel file (gemm_fp8-like; default: the frozen copy)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-configs", type=int, default=0, help="time only the first N valid configs (0: all)")
    ap.add_argument(
        "--time-budget-s", type=float, default=420.0, help="whole run; configs past it are skipped"
    )
    ap.add_argument("--workers", type=int, default=min(14, max(1, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--num-tests", type=int, default=30)
    args = ap.parse_args(argv)
    global KERNEL_FILE
    KERNEL_FILE = Path(args.kernel).resolve() if args.kernel else KERNEL_FILE
    start = time.perf_counter()
    cuda = args.device.startswith("cuda")
    if not cuda and os.environ.get("TRITON_INTERPRET") != "1":
        ap.error("--device cpu needs TRITON_INTERPRET=1 (set before Python starts)")

    import torch

    from autotune.env import device_facts

    facts = device_facts(args.device)
    gpu = torch.cuda.get_device_name(torch.device(args.device)) if cuda else "cpu (interpreter)"
    configs, space_hash, space_dict = load_space(facts)
    n_valid = len(configs)
    if args.max_configs:
        configs = configs[: args.max_configs]
    shapes = parse_shapes(args.shapes)
    log(f"{gpu}: {n_valid} valid configs, timing {len(configs)} on {len(shapes)} shapes")
    pre = precompile_all(configs, args.device, args.workers) if cuda and args.workers > 0 else {}

    kernel = load_example().KERNEL
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = []
    for s_i, shape in enumerate(shapes):
        # Each remaining shape gets an equal share of the remaining budget.
        left = args.time_budget_s - (time.perf_counter() - start)
        deadline = time.perf_counter() + left / (len(shapes) - s_i)
        log(f"shape {shape_tag(shape)} ({max(left, 0):.0f} s of budget left)")
        res = run_shape(shape, configs, pre, args, deadline)
        rows, sm = res["rows"], res["scaled_mm_s"]
        ok = [r for r in rows if r["status"] == "ok"]
        doc = {
            "format": "autotune-landscape",
            "version": 1,
            "kernel": kernel.name,
            "device_name": gpu,
            "facts": facts,
            "gpu": gpu,
            "shape": shape,
            "space": space_dict,
            "space_hash": space_hash,
            "default_config": dict(kernel.default_config),
            "num_tests": args.num_tests,
            "scaled_mm_s": sm,
            "scaled_mm_tflops": kernel.flops(shape) / sm / 1e12 if sm else None,
            "configs": rows,
        }
        path = out_dir / f"gemm_fp8_{shape_tag(shape)}.json"
        path.write_text(json.dumps(doc, indent=1))
        best = min(ok, key=lambda r: r["time_s"]) if ok else None
        counts = {st: sum(r["status"] == st for r in rows) for st in {r["status"] for r in rows}}
        log(f"  wrote {path} in {res['seconds']:.0f} s: {counts}")
        summary.append((shape, len(rows), len(ok), len(rows) - len(ok), best, sm))
        if res["fatal"]:
            log("  stopping: an illegal memory access poisoned the CUDA context")
            break

    log(f"\nsummary ({gpu}, {time.perf_counter() - start:.0f} s; times are device time per call)")
    log(
        f"{'shape':>18} {'valid':>5} {'ok':>4} {'fail':>4} {'best us':>8} {'TFLOP/s':>8} {'cuBLAS':>8} {'cuBLAS/us':>9}  best config"
    )
    for shape, n, n_ok, n_bad, best, sm in summary:
        fl = kernel.flops(shape)
        bt = best["time_s"] if best else None
        cfg = (
            " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in best["config"].items())
            if best
            else "-"
        )
        log(
            f"{shape_tag(shape):>18} {n:>5} {n_ok:>4} {n_bad:>4} "
            f"{bt * 1e6 if bt else float('nan'):>8.1f} {fl / bt / 1e12 if bt else float('nan'):>8.1f} "
            f"{fl / sm / 1e12 if sm else float('nan'):>8.1f} {sm / bt if (sm and bt) else float('nan'):>9.2f}  {cfg}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
