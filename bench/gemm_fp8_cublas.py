"""gemm_fp8 against cuBLASLt on every default shape, Triton alone and with the library selectable.

gemm_fp8 against cuBLASLt, per shape: every default shape of examples/gemm_fp8.py tuned (the library is one
of its implementations), the best Triton config and the best overall beside cuBLASLt's time, same bench.

    python -m bench gemm_fp8_cublas                    # needs a CUDA GPU; ~5 minutes
    python -m bench gemm_fp8_cublas --trials 20 --shape-seconds 3  # quicker
    TRITON_INTERPRET=1 python -m bench gemm_fp8_cublas --device cpu --shape M=32,N=48,K=64 --trials 2  # a dry run

Steps, each in its own process: cuBLASLt alone on every shape (``--step baseline``, a cross-check); a search
of every shape from 14 seed configs (cuBLASLt as ``IMPL=scaled_mm``, tiles that won before, split-K reduced
each of the two ways the space offers, persistent ones); the default strategy on the same database, ``--trials`` new
evaluations per shape at most ``--shape-seconds`` each; the table (``--step table``), ratios cuBLASLt time /
ours (> 1: faster than cuBLASLt); the one-launch split-K and persistent configs run many times back to
back with every output checked (``--step stress``)."""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import GEMM_FP8 as KERNEL_FILE
from bench.common import ROOT, autotune, cold_env, finish, out_dir, parser

# Starting points every shape gets before the search proper (`autotune search --configs`): the library,
# the best configs of the earlier landscapes, and two split-K configs reduced
# each of the ways the space offers, so the reductions are compared on equal tiles on every shape.
_T = {"IMPL": "triton", "GROUP_M": 8, "SPLIT_K": 1}
_P = {"IMPL": "persistent", "GROUP_M": 8}
SEEDS: list[dict[str, Any]] = [
    {"IMPL": "scaled_mm"},
    {**_T, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3, "num_warps": 4, "USE_TMA": True},
    {**_T, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3, "num_warps": 4, "USE_TMA": True},
    {**_T, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 3, "num_warps": 4, "USE_TMA": True},
    {**_T, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 3, "num_warps": 8, "USE_TMA": True},
    *(
        {**_T, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "num_stages": 5, "num_warps": 4}
        | {"USE_TMA": False, "SPLIT_K": 4, "SPLIT_REDUCE": r}
        for r in ("kernel", "fused")  # atomic raced on the H200: out of the space
    ),
    *(
        {**_T, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 4, "num_warps": 4}
        | {"USE_TMA": True, "SPLIT_K": 8, "SPLIT_REDUCE": r}
        for r in ("kernel", "fused")  # atomic raced on the H200: out of the space
    ),
    {**_P, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 4, "num_warps": 8}
    | {"FLATTEN": True, "TMA_STORE": True},
    {**_P, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 4, "num_warps": 4}
    | {"FLATTEN": False, "TMA_STORE": False},
    {**_P, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3, "num_warps": 4}
    | {"FLATTEN": True, "TMA_STORE": True},
    {**_P, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 3, "num_warps": 8}
    | {"FLATTEN": True, "TMA_STORE": True},
    {**_P, "BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 5, "num_warps": 4}
    | {"FLATTEN": True, "TMA_STORE": False},
]


def family(config: dict[str, Any]) -> str:
    impl = config.get("IMPL", "triton")
    if impl != "triton":
        return impl
    if config.get("SPLIT_K", 1) == 1:
        return "triton"
    return f"triton_splitk_{config.get('SPLIT_REDUCE', 'kernel')}"


def short(config: dict[str, Any]) -> str:
    c = config
    if c.get("IMPL") == "scaled_mm":
        return "scaled_mm"
    s = f"{c.get('IMPL', 'triton')} {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} g{c['GROUP_M']}"
    s += f" s{c['num_stages']} w{c['num_warps']}"
    if c.get("IMPL", "triton") == "triton":
        s += " tma" if c["USE_TMA"] else " ptr"
        if c["SPLIT_K"] > 1:
            s += f" sk{c['SPLIT_K']}-{c['SPLIT_REDUCE']}"
    else:
        s += " flat" if c.get("FLATTEN") else ""
        s += " tmastore" if c.get("TMA_STORE") else ""
    return s


def read_trials(db: Path) -> dict[tuple[int, int, int], list[dict[str, Any]]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT s.dims, t.config, t.status, t.time_s, t.tflops, t.error, t.kernels FROM autotune_trials t "
        "JOIN autotune_tuning_keys k ON t.key_id = k.id JOIN autotune_shapes s ON k.shape_id = s.id "
        "WHERE s.kernel_name = 'gemm_fp8'"
    ).fetchall()
    out: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for dims, config, status, time_s, tflops, error, kernels in rows:
        d = json.loads(dims)
        out.setdefault((d["M"], d["N"], d["K"]), []).append(
            {
                "config": json.loads(config),
                "status": status,
                "time_s": time_s,
                "tflops": tflops,
                "error": error,
                "kernels": json.loads(kernels) if kernels else None,
            }
        )
    return out


def baseline(out: Path) -> None:
    """cuBLASLt (``torch._scaled_mm``) on every default shape with the same bench, outside any search: a
    cross-check of the IMPL=scaled_mm trials, and the reference figure if such a trial failed (e.g. a
    kernel not named nvjet_*)."""
    from autotune.bench import bench_kineto_detailed
    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]
    res = {}
    for shape in kernel.default_shapes:
        key = "x".join(str(shape[d]) for d in ("M", "N", "K"))
        inp = kernel.make_inputs(shape, "cuda")
        try:
            b = bench_kineto_detailed(
                mod.scaled_mm_baseline(inp),
                ("nvjet",),
                num_tests=30,
                suppress_kineto_output=True,
                with_multiple_kernels=True,
            )
            res[key] = {"us": b.per_call_s * 1e6, "kernels": list(b.kernels["nvjet"].matched)}
        except Exception as exc:
            res[key] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        print(key, res[key], flush=True)
    out.write_text(json.dumps(res, indent=1))


def table(db: Path, out: Path, base: Path | None = None) -> None:
    shapes = read_trials(db)
    ref = json.loads(base.read_text()) if base and base.exists() else {}
    res: list[dict[str, Any]] = []
    for (m, n, k), trials in sorted(shapes.items()):
        ok = [t for t in trials if t["status"] == "ok" and t["time_s"]]
        best = {}
        for t in ok:
            f = family(t["config"])
            if f not in best or t["time_s"] < best[f]["time_s"]:
                best[f] = t
        tri = [t for t in ok if t["config"].get("IMPL", "triton") != "scaled_mm"]
        bt = min(tri, key=lambda t: t["time_s"]) if tri else None
        ba = min(ok, key=lambda t: t["time_s"]) if ok else None
        lib = best.get("scaled_mm")
        sep = ref.get(f"{m}x{n}x{k}", {})
        flops = 2.0 * m * n * k
        statuses: dict[str, int] = {}
        for t in trials:
            statuses[t["status"]] = statuses.get(t["status"], 0) + 1
        res.append(
            {
                "shape": [m, n, k],
                "trials": len(trials),
                "statuses": statuses,
                "cublaslt_us": lib["time_s"] * 1e6 if lib else sep.get("us"),
                "cublaslt_separate_us": sep.get("us"),
                "cublaslt_separate_error": sep.get("error"),
                "cublaslt_kernel": lib["kernels"] if lib else None,
                "triton_us": bt["time_s"] * 1e6 if bt else None,
                "triton_config": bt["config"] if bt else None,
                "best_us": ba["time_s"] * 1e6 if ba else None,
                "best_config": ba["config"] if ba else None,
                "families_us": {f: t["time_s"] * 1e6 for f, t in sorted(best.items())},
                "families_config": {f: short(t["config"]) for f, t in sorted(best.items())},
                "tflops_triton": flops / bt["time_s"] / 1e12 if bt else None,
                "tflops_best": flops / ba["time_s"] / 1e12 if ba else None,
                "failed": [
                    {"config": t["config"], "status": t["status"], "error": (t["error"] or "")[:300]}
                    for t in trials
                    if t["status"] not in ("ok", "invalid")
                ][:10],
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemm_table.json").write_text(json.dumps(res, indent=1))
    # Every trial, per shape (a partial landscape of the space: what the search measured), for replays.
    dump = {
        "x".join(map(str, key)): [
            {"config": t["config"], "status": t["status"], "time_s": t["time_s"], "tflops": t["tflops"]}
            for t in trials
            if t["status"] != "invalid"
        ]
        for key, trials in sorted(shapes.items())
    }
    (out / "trials.json").write_text(json.dumps(dump, separators=(",", ":")))
    md = markdown(res)
    (out / "gemm_table.md").write_text(md)
    print(md)


def markdown(res: list[dict[str, Any]]) -> str:
    lines = [
        "| shape | evals | cuBLASLt µs | (alone) | best Triton µs | Triton vs cuBLASLt | Triton TFLOP/s | best overall µs | "
        "overall vs cuBLASLt | winner | best Triton config |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    ratios_t, ratios_a = [], []
    for r in res:
        lib, tri, best = r["cublaslt_us"], r["triton_us"], r["best_us"]
        rt = lib / tri if lib and tri else None
        ra = lib / best if lib and best else None
        if rt:
            ratios_t.append(rt)
        if ra:
            ratios_a.append(ra)
        winner = "cuBLASLt" if r["best_config"] and r["best_config"].get("IMPL") == "scaled_mm" else "Triton"
        evals = sum(v for s, v in r["statuses"].items() if s != "invalid")
        lines.append(
            f"| {'x'.join(map(str, r['shape']))} | {evals} | {_f(lib)} | {_f(r['cublaslt_separate_us'])} | "
            f"{_f(tri)} | {_x(rt)} | "
            f"{_f(r['tflops_triton'], 0)} | {_f(best)} | {_x(ra)} | {winner} | "
            f"{short(r['triton_config']) if r['triton_config'] else '-'} |"
        )
    if ratios_t:
        lines.append("")
        lines.append(
            f"Triton only: geomean {_x(_geo(ratios_t))}, worst {_x(min(ratios_t))}, "
            f">= 0.95x on {sum(x >= 0.95 for x in ratios_t)}/{len(ratios_t)} shapes; with selection: "
            f"geomean {_x(_geo(ratios_a))}, worst {_x(min(ratios_a))}; cuBLASLt chosen on "
            f"{sum(1 for r in res if r['best_config'] and r['best_config'].get('IMPL') == 'scaled_mm')} shapes."
        )
    lines += ["", "Best of each implementation family (µs):", ""]
    fams = ["triton", "triton_splitk_kernel", "triton_splitk_fused", "triton_splitk_atomic", "persistent"]
    fams.append("scaled_mm")
    lines.append("| shape | " + " | ".join(fams) + " |")
    lines.append("|---|" + "---:|" * len(fams))
    for r in res:
        cells = [_f(r["families_us"].get(f)) for f in fams]
        lines.append(f"| {'x'.join(map(str, r['shape']))} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def stress(out: Path, calls: int) -> None:
    """The fused split-K's counters and memory ordering under many back-to-back calls on the GPU, the
    persistent kernel on ragged shapes, and gemm_fp8() dispatching on IMPL: every output checked."""
    import torch

    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]
    torch.manual_seed(0)
    fused = [s for s in SEEDS if s.get("SPLIT_REDUCE") in ("fused", "atomic")]
    pers = [s for s in SEEDS if s.get("IMPL") == "persistent"]
    cases = [(sh, c) for sh in ((64, 2112, 7168), (100, 2000, 7168), (128, 7168, 2048)) for c in fused]
    cases += [(sh, c) for sh in ((1000, 1104, 1040), (64, 2112, 7168)) for c in pers]  # N % 8: TMA store
    rows = []
    for (m, n, k), cfg in cases:
        inp = kernel.make_inputs({"M": m, "N": n, "K": k}, "cuda")
        ref = kernel.reference(inp)
        bad: list[Any] = []
        try:
            run = kernel.compile(cfg, inp)
            for i in range(calls):
                why = kernel.compare(run(), ref)
                if why:
                    bad.append((i, why))
            torch.cuda.synchronize()
        except Exception as exc:
            bad.append((-1, f"{type(exc).__name__}: {str(exc)[:300]}"))
        rows.append(
            {"shape": [m, n, k], "config": short(cfg), "calls": calls, "bad": bad[:5], "n_bad": len(bad)}
        )
        print(f"{m}x{n}x{k} {short(cfg)}: {len(bad)}/{calls} wrong", flush=True)
        out.write_text(json.dumps({"stress": rows, "partial": True}, indent=1))  # survives a timeout
    # gemm_fp8() honours IMPL: each implementation's own kernels run (and only those)
    inp = kernel.make_inputs({"M": 256, "N": 512, "K": 1024}, "cuda")
    ref = kernel.reference(inp)
    dispatch = {}
    for cfg in (SEEDS[0], SEEDS[1], fused[0], fused[1], pers[0]):
        try:
            mod.gemm_fp8(inp.a, inp.b, inp.scale_a, inp.scale_b, cfg)  # compiles outside the profile
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                o = mod.gemm_fp8(inp.a, inp.b, inp.scale_a, inp.scale_b, cfg)
                torch.cuda.synchronize()
            names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            dispatch[short(cfg)] = {"kernels": names, "check": kernel.compare(o, ref)}
        except Exception as exc:
            dispatch[short(cfg)] = {"kernels": [], "check": f"{type(exc).__name__}: {str(exc)[:300]}"}
        print(f"gemm_fp8 {short(cfg)}: {names} check={dispatch[short(cfg)]['check']}", flush=True)
    out.write_text(json.dumps({"stress": rows, "dispatch": dispatch}, indent=1))


def step(name: str, out: Path, *extra: str, timeout: float = 300) -> int:
    """One step in its own process (a fresh CUDA context; the searches need the GPU to themselves)."""
    argv = [sys.executable, "-m", "bench", "gemm_fp8_cublas", "--step", name, "--out", str(out), *extra]
    with (out / f"{name}.log").open("w") as log:
        try:
            return subprocess.run(
                argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            return 124


def run_step(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.step == "table":
        table(out / "tune.db", out, out / "baseline.json")
    elif args.step == "baseline":
        baseline(out / "baseline.json")
    else:
        stress(out / "stress.json", args.calls)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = parser("gemm_fp8_cublas", __doc__)
    ap.add_argument("--trials", type=int, default=60, help="the default strategy's evaluations per shape")
    ap.add_argument("--shape-seconds", type=float, default=7, help="the default strategy's seconds per shape")
    ap.add_argument("--calls", type=int, default=100, help="stress: calls per config")
    ap.add_argument(
        "--device", default="cuda", help="cpu: a dry run of the searches and the table (TRITON_INTERPRET=1)"
    )
    ap.add_argument("--shape", action="append", default=[], help="search these shapes only (default: all 18)")
    ap.add_argument("--step", choices=("baseline", "table", "stress"), help="(internal) one step, in --out")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    if args.step:
        return run_step(args)
    out = out_dir(args, "gemm_fp8_cublas")
    (out / "tune.db").unlink(missing_ok=True)
    gpu = args.device != "cpu"  # cuBLASLt alone and the stress run need the GPU
    codes = {"baseline": step("baseline", out, timeout=120)} if gpu else {}
    seeds = out / "seeds.json"
    seeds.write_text(json.dumps(SEEDS, indent=1))
    env = cold_env()
    shapes = [a for s in args.shape for a in ("--shape", s)]
    common = [KERNEL_FILE, "--device", args.device, *shapes, "--db", out / "tune.db"]
    codes["seeds"] = autotune(["search", *common, "--configs", seeds], out / "seeds_search.log", env=env).rc
    tpe = ["--trials", str(args.trials), "--timeout", str(args.shape_seconds), "--seed", "0"]
    codes["search"] = autotune(["search", *common, *tpe], out / "search.log", env=env).rc
    codes["table"] = step("table", out)
    if gpu:
        codes["stress"] = step("stress", out, "--calls", str(args.calls))
    res = json.loads((out / "gemm_table.json").read_text()) if (out / "gemm_table.json").exists() else []
    rows = []
    for r in res:
        lib, tri, best = r["cublaslt_us"], r["triton_us"], r["best_us"]
        rows.append(
            {
                "shape": "x".join(map(str, r["shape"])),
                "cublaslt_us": lib,
                "triton_us": tri,
                "best_us": best,
                "triton_x": lib / tri if lib and tri else None,
                "best_x": lib / best if lib and best else None,
                "best_impl": (r["best_config"] or {}).get("IMPL"),
            }
        )
    ratios = [x["best_x"] for x in rows if x["best_x"]]
    if ratios:
        rows.append({"shape": "geomean", "best_x": math.exp(sum(map(math.log, ratios)) / len(ratios))})
        for k in rows[0]:
            rows[-1].setdefault(k, None)
    finish("gemm_fp8_cublas", out, {"steps": codes, "table": res}, argv, rows)
    return 0 if all(c == 0 for c in codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
