"""The engine side by side with ``@triton.autotune``: the same configs and shape, both cold.

The engine side by side with ``@triton.autotune``: the same gemm_fp8 configs and shape, both cold, whole
tuning timed, and each one's pick timed with the same L2-flushed bench.

    python -m bench triton_side_by_side       # the 212 configs of data/configs/engine_b_configs.json
    python -m bench triton_side_by_side --limit 100 --no-tma --triton-only   # a fresh sample, Triton's side only

The Triton side (``--triton-only``, run in its own process so its cache is cold):

For one shape (default 4096x4096x7168) this takes the valid configs of search_spaces/gemm_fp8.yaml on
this device's facts, keeps those ``@triton.autotune`` can express with one wrapper (USE_TMA and SPLIT_K
fixed: ``--tma``/``--no-tma``, ``--split-k``; default pointer loads and no split), and optionally caps
them (``--limit N``: a seeded sample, kept in the space's order). It then wraps examples/gemm_fp8.py's
own ``@triton.jit`` kernel in ``triton.autotune(configs=[triton.Config(...)], key=["M", "N", "K"])``,
with ``TRITON_CACHE_DIR`` pointing at a fresh empty directory (set before triton is imported), and
times the first call -- every compile and every benchmark of Triton's tuning -- synchronised, as wall
time. The config Triton picked is then timed with the project's bench (``autotune.bench_kineto``:
L2-flushed Kineto device time of the kernels named by ``KERNEL.timed_kernels``) and checked against
the reference; so are the next best few by Triton's timings (``--recheck-top``), and cuBLASLt
(``torch._scaled_mm``) for scale.

With SPLIT_K > 1 Triton tunes (and times) the main kernel only; the split-K reduction runs after it, and
the bench_kineto times include it. With ``--tma`` each config's pre_hook sets the host descriptors'
block shapes. Without ``--limit``, the H200 space gives 492 configs per (USE_TMA, SPLIT_K=1); on an H200
tuning takes ~0.5 s per config (24 configs: 12.6 s).

Triton 3.6's autotuner gives a config that raises OutOfResources, CompileTimeAssertionFailure or
PTXASError an infinite time (pruned, reported here as failed); any other error stops the tuning.

The config list is written (``--configs-out``: a JSON list of dicts with the space's parameter names)
so ``autotune search examples/gemm_fp8.py --strategy exhaustive`` can be restricted to exactly these;
``--configs FILE`` reads such a list back instead of the space.

"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import DATA, GEMM_FP8, ROOT, autotune, cold_env, finish, out_dir, parser, search_report

KERNEL_FILE = GEMM_FP8
SPACE_FILE = ROOT / "search_spaces" / "gemm_fp8.yaml"
TUNED = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")  # Config kwargs; num_warps/num_stages are fields


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = parser("triton_side_by_side", __doc__)
    ap.add_argument("--shape", default="M=4096,N=4096,K=7168", help="M=..,N=..,K=..")
    ap.add_argument("--triton-only", action="store_true", help="only Triton's side, its results in --result")
    ap.add_argument("--result", type=Path, help="--triton-only: the results JSON (default: print only)")
    ap.add_argument("--configs-out", type=Path, help="write the config list used (JSON list of dicts)")
    which = ap.add_mutually_exclusive_group()
    which.add_argument(
        "--configs-from-space",
        action="store_true",
        default=True,
        help="every valid config of the space (with the fixed USE_TMA / SPLIT_K) -- the default",
    )
    which.add_argument(
        "--limit", type=int, default=0, help="at most N configs: a seeded sample of the space's"
    )
    which.add_argument("--configs", type=Path, help="a JSON list of configs (e.g. an earlier --configs-out)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the --limit sample")
    tma = ap.add_mutually_exclusive_group()
    tma.add_argument("--tma", dest="use_tma", action="store_true", help="USE_TMA=True (host descriptors)")
    tma.add_argument("--no-tma", dest="use_tma", action="store_false", help="USE_TMA=False")
    ap.set_defaults(use_tma=False)
    ap.add_argument("--split-k", type=int, default=1, help="the fixed SPLIT_K")
    ap.add_argument("--facts", default="device", help="device facts for the space: device, h200 or h100")
    ap.add_argument("--device", default="cuda", help="CUDA device")
    ap.add_argument("--num-tests", type=int, default=30, help="bench_kineto calls per measurement")
    ap.add_argument("--recheck-top", type=int, default=3, help="also bench_kineto Triton's next-best N")
    ap.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip cuBLASLt")
    ap.add_argument("--keep-cache", action="store_true", help="keep the fresh Triton cache directory")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="build the config list and the autotune wrapper, write --configs-out, launch nothing (no GPU)",
    )
    args = ap.parse_args(argv)
    try:
        dims = dict(kv.split("=") for kv in args.shape.split(","))
        args.dims = {k: int(dims[k]) for k in ("M", "N", "K")}
    except (KeyError, ValueError):
        ap.error(f"--shape must look like M=4096,N=4096,K=7168 (got {args.shape!r})")
    if args.split_k < 1:
        ap.error("--split-k must be >= 1")
    if args.dry_run and args.facts == "device":
        args.facts = "h200"
    return args


def space_configs(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The configs to tune over (the space's parameter names) and the facts they were enumerated on."""
    from autotune.env import DEVICE_PRESETS, device_facts
    from autotune.space import Space

    if args.facts == "device":
        facts = device_facts(args.device)
    elif args.facts in DEVICE_PRESETS:
        facts = dict(DEVICE_PRESETS[args.facts])
    else:
        raise SystemExit(f"unknown --facts {args.facts!r}: device or {', '.join(DEVICE_PRESETS)}")
    space = Space.from_yaml(SPACE_FILE)
    if args.configs:
        configs = [dict(c) for c in json.loads(args.configs.read_text())]
        bad = [(c, why) for c in configs if (why := space.check(c, facts))]
        if bad:
            raise SystemExit(f"{len(bad)} configs of {args.configs} are not valid here, e.g. {bad[0]}")
    else:
        configs = [
            c
            for c in space.enumerate(facts)
            # the one-program-per-tile kernel alone (the space also holds a persistent kernel and cuBLASLt,
            # which one @triton.autotune wrapper cannot express)
            if c.get("IMPL", "triton") == "triton"
            and bool(c["USE_TMA"]) == args.use_tma
            and c["SPLIT_K"] == args.split_k
        ]
        if args.limit and len(configs) > args.limit:
            keep = set(random.Random(args.seed).sample(range(len(configs)), args.limit))
            configs = [c for i, c in enumerate(configs) if i in keep]
    if not configs:
        raise SystemExit("no configs to tune over")
    fixed = {(bool(c["USE_TMA"]), c["SPLIT_K"]) for c in configs}
    if len(fixed) != 1:
        raise SystemExit(
            f"one triton.autotune wrapper needs one USE_TMA and one SPLIT_K; got {sorted(fixed)}"
        )
    return configs, facts


def to_triton_config(c: dict[str, Any], K: int, pre_hook: Any = None) -> Any:
    import triton

    kw = {k: c[k] for k in TUNED} | {"EVEN_K": K % c["BLOCK_K"] == 0}
    return triton.Config(kw, num_warps=c["num_warps"], num_stages=c["num_stages"], pre_hook=pre_hook)


def from_triton_config(cfg: Any, use_tma: bool, split_k: int) -> dict[str, Any]:
    c = {k: cfg.kwargs[k] for k in TUNED}
    return c | {
        "num_stages": cfg.num_stages,
        "num_warps": cfg.num_warps,
        "USE_TMA": use_tma,
        "SPLIT_K": split_k,
    }


def _tma_pre_hook(nargs: dict[str, Any]) -> None:
    # One pair of host descriptors serves every config: each config sets its own block shape first.
    nargs["a"].block_shape = [nargs["BLOCK_M"], nargs["BLOCK_K"]]
    nargs["b"].block_shape = [nargs["BLOCK_N"], nargs["BLOCK_K"]]


def build_autotuned(mod: Any, configs: list[dict[str, Any]], K: int, use_tma: bool) -> Any:
    import triton

    hook = _tma_pre_hook if use_tma else None
    tconfigs = [to_triton_config(c, K, hook) for c in configs]
    return triton.autotune(configs=tconfigs, key=["M", "N", "K"])(mod._autotune_gemm_fp8_kernel)


def _warm_triton_driver(device: str) -> float:
    """Build Triton's CUDA driver helpers (a C module compiled into the fresh cache on first use) with a
    tiny unrelated kernel, so the timed tuning holds only what the search also pays per config."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _warmup_copy(x, y, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)

    t0 = time.perf_counter()
    x = torch.ones(1024, device=device)
    y = torch.empty_like(x)
    _warmup_copy[(1,)](x, y, 1024, BLOCK=1024)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def fmt_config(c: dict[str, Any]) -> str:
    sk = c["SPLIT_K"]
    return (
        f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} g{c['GROUP_M']} s{c['num_stages']} w{c['num_warps']}"
        + (" tma" if c["USE_TMA"] else "")
        + (f" sk{sk}" if sk > 1 else "")
    )


def triton_side(args: argparse.Namespace) -> int:
    """``@triton.autotune`` over the configs, cold; the picks timed with autotune's bench."""
    # A cold cache: set before triton (or anything importing it) is imported.
    cache_dir = tempfile.mkdtemp(prefix="triton_autotune_cold_")
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, str(ROOT))

    configs, facts = space_configs(args)
    M, N, K = args.dims["M"], args.dims["N"], args.dims["K"]
    if args.configs_out:
        args.configs_out.parent.mkdir(parents=True, exist_ok=True)
        args.configs_out.write_text(json.dumps(configs, indent=1))

    import triton

    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]
    use_tma, split_k = bool(configs[0]["USE_TMA"]), configs[0]["SPLIT_K"]
    tuned = build_autotuned(mod, configs, K, use_tma)
    result: dict[str, Any] = {
        "shape": args.dims,
        "facts": facts,
        "n_configs": len(configs),
        "fixed": {"USE_TMA": use_tma, "SPLIT_K": split_k},
        "limit": args.limit or None,
        "seed": args.seed,
        "triton": triton.__version__,
        "triton_cache_dir": cache_dir,
        "configs_out": str(args.configs_out) if args.configs_out else None,
    }
    shape_ok = [c for c in configs if mod.check_config(c, M, N, K) is None]
    if len(shape_ok) != len(configs):
        raise SystemExit(f"{len(configs) - len(shape_ok)} configs cannot run {args.shape}: {configs[0]}")
    if args.dry_run:
        print(f"dry run: {len(configs)} configs (USE_TMA={use_tma}, SPLIT_K={split_k}) on {args.facts} facts")
        print(
            f"  autotune wrapper: {type(tuned).__name__} over {len(tuned.configs)} triton.Config, key {tuned.keys}"
        )
        print(f"  first: {fmt_config(configs[0])}   last: {fmt_config(configs[-1])}")
        if args.configs_out:
            print(f"  configs -> {args.configs_out}")
        _write(args.result, result | {"dry_run": True})
        return 0

    import torch

    from autotune.bench import bench_kineto

    torch.cuda.set_device(torch.device(args.device).index or 0)
    torch.manual_seed(0)
    inputs = kernel.make_inputs(args.dims, args.device)
    a, b, sa, sb = inputs.a, inputs.b, inputs.scale_a, inputs.scale_b
    ref = kernel.reference(inputs)
    out = torch.empty(M, N, dtype=torch.bfloat16, device=args.device)
    ws = torch.empty(split_k, M, N, dtype=torch.float32, device=args.device) if split_k > 1 else out
    result["driver_warmup_s"] = round(_warm_triton_driver(args.device), 3)

    if use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        c0 = configs[0]
        a_arg: Any = TensorDescriptor(a, [M, K], [a.stride(0), 1], [c0["BLOCK_M"], c0["BLOCK_K"]])
        b_arg: Any = TensorDescriptor(b, [N, K], [b.stride(0), 1], [c0["BLOCK_N"], c0["BLOCK_K"]])
    else:
        a_arg, b_arg = a, b

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), split_k)

    call_args = (a_arg, b_arg, out, ws, sa, sb, M, N, K, a.stride(0), b.stride(0), out.stride(0))

    def run_tuned() -> None:
        tuned[grid](*call_args, SPLIT_K=split_k, USE_TMA=use_tma)
        if split_k > 1:
            mod._autotune_gemm_fp8_splitk_reduce[(triton.cdiv(M * N, mod.REDUCE_BLOCK),)](
                ws, out, sa, sb, M * N, SPLIT_K=split_k, BLOCK=mod.REDUCE_BLOCK, num_warps=4
            )

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run_tuned()  # compiles and benchmarks every config, then runs the winner once
    torch.cuda.synchronize()
    tune_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_tuned()  # the cached winner: the wrapper's steady-state overhead
    torch.cuda.synchronize()
    second_call_s = time.perf_counter() - t0

    timings = {c: (list(t) if isinstance(t, list | tuple) else [t]) for c, t in tuned.configs_timings.items()}
    failed = [from_triton_config(c, use_tma, split_k) for c, t in timings.items() if t[0] == float("inf")]
    ranked = sorted(((t[0], c) for c, t in timings.items() if t[0] != float("inf")), key=lambda x: x[0])
    picked = from_triton_config(tuned.best_config, use_tma, split_k)
    result |= {
        "tune_wall_s": round(tune_s, 3),
        "triton_bench_time_s": round(float(getattr(tuned, "bench_time", float("nan"))), 3),
        "second_call_s": round(second_call_s, 6),
        "n_failed": len(failed),
        "failed_configs": failed,
        "picked": picked,
        "triton_ranking_ms": [[round(ms, 5), from_triton_config(c, use_tma, split_k)] for ms, c in ranked],
    }

    def kineto(cfg: dict[str, Any]) -> dict[str, Any]:
        sk = cfg["SPLIT_K"]
        ws_c = torch.empty(sk, M, N, dtype=torch.float32, device=args.device) if sk > 1 else None
        out_c = torch.empty(M, N, dtype=torch.bfloat16, device=args.device)
        run = mod.launcher(cfg, a, b, sa, sb, out_c, ws_c)
        wrong = kernel.compare(run(), ref)
        names = kernel.timed_kernels(cfg)
        t = bench_kineto(run, names, num_tests=args.num_tests, suppress_kineto_output=True)
        sec = sum(t) if isinstance(t, tuple) else t
        return {
            "config": cfg,
            "device_us": round(sec * 1e6, 3),
            "tflops": round(kernel.flops(args.dims) / sec / 1e12, 1),
            "wrong_result": wrong,
        }

    rows: list[dict[str, Any]] = []
    triton_ms = {json.dumps(c, sort_keys=True): ms for ms, c in result["triton_ranking_ms"]}
    for rank, (_, tc) in enumerate(ranked[: 1 + max(0, args.recheck_top)]):
        cfg = from_triton_config(tc, use_tma, split_k)
        row = {"what": "triton picked" if rank == 0 else f"triton #{rank + 1}", **kineto(cfg)}
        row["triton_ms"] = triton_ms.get(json.dumps(cfg, sort_keys=True))
        rows.append(row)
    default = dict(kernel.default_config)
    rows.append({"what": "kernel default", **kineto(default)})
    if args.baseline:
        try:
            t = bench_kineto(mod.scaled_mm_baseline(inputs), "nvjet", num_tests=args.num_tests)
            rows.append({"what": "cuBLASLt", "config": None, "device_us": round(t * 1e6, 3)})
            rows[-1]["tflops"] = round(kernel.flops(args.dims) / t / 1e12, 1)
        except Exception as exc:  # a different cuBLAS kernel name, say: the comparison still stands
            rows.append({"what": "cuBLASLt", "config": None, "error": f"{type(exc).__name__}: {exc}"})
    result["measured"] = rows
    _write(args.result, result)
    if not args.keep_cache:
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)

    print(
        f"\n@triton.autotune, cold cache, {M}x{N}x{K}: {len(configs)} configs "
        f"(USE_TMA={use_tma}, SPLIT_K={split_k}), {len(failed)} failed to compile/launch"
    )
    print(
        f"  tuning (first call, synchronised): {tune_s:.1f} s   (Triton's bench_time {result['triton_bench_time_s']} s)"
    )
    print(f"  {'what':<16} {'config':<34} {'device us':>10} {'TFLOP/s':>8} {'triton ms':>10}  ok")
    for r in rows:
        cfg = fmt_config(r["config"]) if r.get("config") else "-"
        tm = f"{r['triton_ms']:.4f}" if r.get("triton_ms") is not None else "-"
        ok = "-" if r["what"] == "cuBLASLt" else ("yes" if not r.get("wrong_result") else "NO")
        us, tf = r.get("device_us", float("nan")), r.get("tflops", float("nan"))
        print(f"  {r['what']:<16} {cfg:<34} {us:>10.2f} {tf:>8.1f} {tm:>10}  {ok}")
    if args.result:
        print(f"  -> {args.result}")
    return 0


def _write(path: Path | None, result: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.triton_only or args.dry_run:
        return triton_side(args)
    out = out_dir(args, "triton_side_by_side")
    if not args.configs and not args.limit:
        args.configs = DATA / "configs" / "engine_b_configs.json"  # the 212 configs of the published figure
    configs = out / "configs.json"
    shape = args.shape
    triton_argv = ["-m", "bench", "triton_side_by_side", "--triton-only", "--shape", shape]
    triton_argv += ["--configs", str(args.configs)] if args.configs else ["--limit", str(args.limit)]
    triton_argv += ["--seed", str(args.seed), "--tma" if args.use_tma else "--no-tma"]
    triton_argv += ["--result", str(out / "triton.json"), "--configs-out", str(configs)]
    t0 = time.perf_counter()
    with (out / "triton.log").open("w") as log:
        rc = subprocess.run(
            [sys.executable, *triton_argv], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    triton_wall = round(time.perf_counter() - t0, 2)
    db = out / "autotune.db"
    db.unlink(missing_ok=True)
    search = ["search", KERNEL_FILE, "--shape", shape, "--configs", configs, "--trials", "5000", "--db", db]
    run = autotune([*search, "--json", out / "autotune.json"], out / "autotune.log", env=cold_env())
    tri = json.loads((out / "triton.json").read_text()) if rc == 0 else {}
    ours = search_report(out / "autotune.json") or {}
    picked = next((r for r in tri.get("measured", []) if r.get("what") == "triton picked"), {})
    rows = [
        {
            "tuner": "@triton.autotune",
            "configs": tri.get("n_configs"),
            "tuning_s": tri.get("tune_wall_s"),
            "command_s": triton_wall,
            "pick_us": picked.get("device_us"),
            "exit": rc,
        },
        {
            "tuner": "autotune search",
            "configs": ours.get("evaluations"),
            "tuning_s": ours.get("wall_s"),
            "command_s": run.wall_s,
            "pick_us": (ours.get("best") or {}).get("time_s", 0) * 1e6 or None,
            "exit": run.rc,
        },
    ]
    finish(
        "triton_side_by_side",
        out,
        {"triton": tri, "autotune": ours, "autotune_wall_s": run.wall_s},
        argv,
        rows,
    )
    return 0 if rc == 0 and run.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
