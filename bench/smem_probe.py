"""The resource limits of examples/gemm_fp8.py, learnt by cross-compiling it for sm_90 on a CPU (no GPU).

Every distinct (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, USE_TMA, SPLIT_K > 1) combination is
compiled once with Triton's real sm_90 pipeline (``triton.compile(ASTSource(...), target=GPUTarget("cuda",
90, 32))``: TTIR -> TTGIR -> LLVM -> PTX -> ptxas cubin), with the argument specialization the JIT uses for
a 4096x7168x7168 problem. No GPU is needed: only the launch (which checks shared memory against the
device and loads the cubin) is skipped. Recorded per combination: ``metadata.shared`` (bytes of dynamic
shared memory the launch asks for), registers per thread, spill stores/loads and stack frame (ptxas -v,
which Triton runs anyway; its log is captured), compile wall time, and any compile error.

What is probed:
- every tile in {64, 128, 256}^3 whose fp32 accumulator is at most 128 floats per thread
  (BLOCK_M * BLOCK_N <= 4096 * num_warps), each warps in {4, 8}, TMA on/off, SPLIT_K 1 and 2 (the
  split-K value is only a loop bound; > 1 switches the epilogue to an fp32 store), and num_stages from
  2 up to the first count whose pipeline buffers, num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K bytes, pass
  the H200's 232,448 B (that first one is compiled too, to show the limit is real; more stages only add
  buffers);
- ``--rejected``: the tiles the register rule rejects (128x256 / 256x128 at 4 warps, 256x256 at 8), a few
  stages each, to show that they spill;
- ``--ragged-k``: the pointer-load (non-TMA) combinations again with a ragged K (EVEN_K=False, masked
  loads), at the most stages that fit;
- ``--splitk-values``: a few split-K combinations with SPLIT_K 4 and 8, to show the value changes nothing.

GROUP_M is a scalar in the tile-order arithmetic only; it is fixed at 8 here.

    python -m bench smem_probe                        # --out DIR/smem_probe/smem_probe_sm90.json
    python -m bench smem_probe --variants fused,atomic,persistent   # ... smem_probe_sm90_variants.json

The recorded probes that search_spaces/gemm_fp8.yaml's constraints and tests/test_gemm_fp8.py rest on are
data/probes/smem_probe_sm90.json and data/probes/smem_probe_sm90_variants.json (copy a new run there).

One compile at a time, in one worker process (restarted after a compile that outlasts --timeout).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import out_dir, parser, table

ROOT = Path(__file__).resolve().parents[1]
KERNEL_FILE = ROOT / "examples" / "gemm_fp8.py"
SMEM_H200 = 232_448
TILES = (64, 128, 256)
PROBLEM = {"M": 4096, "N": 7168, "K": 7168}  # every BLOCK_K divides K: EVEN_K
RAGGED_K = 7168 + 16  # K % 16 == 0 (same stride specialization), K % 64 != 0: EVEN_K=False

_fn: Any = None
_fns: dict[str, Any] = {}
_backend: Any = None
_target: Any = None


def init_worker(cache_dir: str) -> None:
    os.environ["TRITON_CACHE_DIR"] = cache_dir  # fresh cache: every compile is a real one
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, str(ROOT))
    global _fn, _fns, _backend, _target
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    from autotune.kernel.contract import load_kernel_file

    _target = GPUTarget("cuda", 90, 32)
    _backend = make_backend(_target)
    mod = sys.modules[type(load_kernel_file(KERNEL_FILE).kernel).__module__]
    _fn = mod._autotune_gemm_fp8_kernel
    _fns = {
        "main": mod._autotune_gemm_fp8_kernel,
        "fused": mod._autotune_gemm_fp8_splitk_fused,
        "atomic": mod._autotune_gemm_fp8_splitk_fused,  # ATOMIC=True
        "persistent": mod._autotune_gemm_fp8_persistent,
    }


_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def compile_one(c: dict[str, Any]) -> dict[str, Any]:
    """Cross-compile one combination; return what the compiler says about its resources."""
    import torch
    import triton
    from triton import knobs
    from triton.compiler import ASTSource
    from triton.runtime.jit import create_function_from_signature
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, N, K = c["M"], c["N"], c["K"]
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    b = torch.empty(N, K, dtype=torch.float8_e4m3fn)
    if c["USE_TMA"]:
        a = TensorDescriptor(a, [M, K], [K, 1], [bm, bk])
        b = TensorDescriptor(b, [N, K], [K, 1], [bn, bk])
    out, f32 = torch.empty(M, N, dtype=torch.bfloat16), torch.empty(1)
    variant = c.get("variant", "main")
    fn = _fns[variant]
    kw: dict[str, Any] = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=c["GROUP_M"])
    if variant == "persistent":
        # the launch's specialization on an H200: 132 programs
        if c.get("TMA_STORE"):
            out = TensorDescriptor(out, [M, N], [N, 1], [bm, bn])
        args: tuple[Any, ...] = (a, b, out, f32, f32, M, N, K, N)
        kw |= dict(NUM_PROGRAMS=132, FLATTEN=bool(c["FLATTEN"]), TMA_STORE=bool(c.get("TMA_STORE")))
    else:
        counters = torch.empty(1, dtype=torch.int32)
        ws = (f32, counters) if variant in ("fused", "atomic") else (f32,)
        args = (a, b, out, *ws, f32, f32, M, N, K, K, K, N)
        kw |= dict(SPLIT_K=c["SPLIT_K"], USE_TMA=bool(c["USE_TMA"]), EVEN_K=K % bk == 0)
        if variant in ("fused", "atomic"):
            kw["ATOMIC"] = variant == "atomic"
    kw |= dict(num_stages=c["num_stages"], num_warps=c["num_warps"], debug=False, instrumentation_mode="")
    res: dict[str, Any] = {"ok": False}
    t0 = time.perf_counter()
    log = io.StringIO()
    try:
        bound, spec, options = create_function_from_signature(fn.signature, fn.params, _backend)(*args, **kw)
        options, sig, constexprs, attrs = fn._pack_args(_backend, kw, bound, spec, options)
        with knobs.nvidia.scope():
            knobs.nvidia.dump_ptxas_log = True  # Triton prints ptxas -v's log: registers and spills
            with contextlib.redirect_stdout(log):
                compiled = triton.compile(
                    ASTSource(fn, sig, constexprs, attrs), target=_target, options=options.__dict__
                )
        md = compiled.metadata
        res.update(ok=True, shared=int(md.shared))
        tdm = getattr(md, "tensordesc_meta", None)
        if tdm:
            res["tma_block"] = [list(m.get("block_size", ())) for m in tdm]
            res["tma_swizzle"] = [m.get("swizzle") for m in tdm]
    except Exception as exc:  # a failed compile is data
        res["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    res["compile_s"] = round(time.perf_counter() - t0, 3)
    text = log.getvalue()
    if m := _PTXAS_REGS.search(text):
        res["regs"] = int(m.group(1))
    if m := _PTXAS_SPILL.search(text):
        res["stack"], res["spill_stores"], res["spill_loads"] = (int(g) for g in m.groups())
    return res


def pipeline_bytes(c: dict[str, Any]) -> int:
    return c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"]


def smem_model(r: dict[str, Any]) -> int:
    """The shared-memory expressions of search_spaces/gemm_fp8.yaml, per kernel."""
    pipe = pipeline_bytes(r) + (8 * r["num_stages"] if r["USE_TMA"] else 0)
    if r.get("variant") == "persistent" and r.get("TMA_STORE"):
        return pipe + 2 * r["BLOCK_M"] * r["BLOCK_N"]  # the bf16 output tile, staged for the TMA store
    if r.get("variant") == "persistent":
        # FLATTEN adds an epilogue buffer beside the pipeline buffers: at most a bf16 tile of
        # min(BLOCK_M, 128) x min(BLOCK_N, 128) (exactly that with 8 warps; 8 KiB for most 4-warp tiles)
        return pipe + (2 * min(r["BLOCK_M"], 128) * min(r["BLOCK_N"], 128) if r["FLATTEN"] else 0)
    return max(pipe, 4 * r["BLOCK_M"] * r["BLOCK_N"] if r["SPLIT_K"] > 1 else 0)


def regs_ok(bm: int, bn: int, warps: int) -> bool:
    return bm * bn <= 4096 * warps


def variant_combos(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``--variants fused,atomic,persistent``: the kernels added with IMPL (issue 11), probed like the main
    one.

    - fused / atomic (SPLIT_REDUCE=fused / atomic, one kernel with ATOMIC on/off): BLOCK_M 64 only (the space tunes split-K with 64-row tiles), TMA on/off,
      SPLIT_K 2 (the value is a loop bound); ragged-K pointer loads at the most stages that fit;
    - persistent: every tile, FLATTEN on/off, always TMA."""
    base = {"GROUP_M": 8, **PROBLEM}
    out: list[dict[str, Any]] = []
    wanted = set(args.variants.split(","))
    for bm, bn, bk, warps in itertools.product(TILES, TILES, TILES, (4, 8)):
        if not regs_ok(bm, bn, warps):
            continue
        kinds: list[dict[str, Any]] = []
        for v in ("fused", "atomic"):
            if v in wanted and bm == 64:
                kinds += [dict(variant=v, USE_TMA=tma, SPLIT_K=2, FLATTEN=False) for tma in (False, True)]
        if "persistent" in wanted:
            kinds += [
                dict(variant="persistent", USE_TMA=True, SPLIT_K=1, FLATTEN=f, TMA_STORE=st)
                for f in (False, True)
                for st in {"both": (False, True), "on": (True,), "off": (False,)}[args.tma_store]
            ]
        for kind in kinds:
            for stages in range(2, args.max_stages + 1):
                c = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
                out.append(c | kind | {"kind": kind["variant"]})
                if pipeline_bytes(c) > args.limit:
                    break
            if kind["variant"] in ("fused", "atomic") and not kind["USE_TMA"] and args.ragged_k:
                fits = [s for s in range(2, args.max_stages + 1) if s * (bm + bn) * bk <= args.limit]
                c = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=max(fits), num_warps=warps)
                out.append(c | kind | {"K": RAGGED_K, "kind": f"{kind['variant']}_ragged_k"})
    return out


def combos(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.variants:
        return variant_combos(args)
    base = {"GROUP_M": 8, **PROBLEM}
    out: list[dict[str, Any]] = []
    for bm, bn, bk, warps, tma, sk in itertools.product(TILES, TILES, TILES, (4, 8), (False, True), (1, 2)):
        if not regs_ok(bm, bn, warps):
            continue
        for stages in range(2, args.max_stages + 1):
            c = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
            c |= dict(USE_TMA=tma, SPLIT_K=sk, kind="main")
            out.append(c)
            if pipeline_bytes(c) > args.limit:
                break  # the first count over the limit is compiled too; more stages only add buffers
    if args.rejected:
        for (bm, bn, warps), bk, stages, tma in itertools.product(
            ((128, 256, 4), (256, 128, 4), (256, 256, 8)), (64, 128), (2, 3), (False, True)
        ):
            c = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
            out.append(c | dict(USE_TMA=tma, SPLIT_K=1, kind="register_rejected"))
    if args.ragged_k:
        for bm, bn, bk, warps, sk in itertools.product(TILES, TILES, TILES, (4, 8), (1, 2)):
            if not regs_ok(bm, bn, warps):
                continue
            fits = [s for s in range(2, args.max_stages + 1) if s * (bm + bn) * bk <= args.limit]
            if fits:
                c = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=max(fits), num_warps=warps)
                out.append(c | dict(K=RAGGED_K, USE_TMA=False, SPLIT_K=sk, kind="ragged_k"))
    if args.splitk_values:
        for (bm, bn, bk, stages, warps), tma, sk in itertools.product(
            ((64, 128, 128, 4, 4), (64, 256, 64, 6, 8), (128, 128, 128, 4, 8)), (False, True), (4, 8)
        ):
            c = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
            out.append(c | dict(USE_TMA=tma, SPLIT_K=sk, kind="splitk_value"))
    return out


def summarize(rows: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    ok = [r for r in rows if r.get("ok")]
    main = [r for r in ok if r["kind"] in ("main", "fused", "atomic", "persistent")]
    s: dict[str, Any] = {
        "compiled": len(rows),
        "compile_ok": len(ok),
        "compile_failed": [r for r in rows if not r.get("ok")],
        "compile_s_total": round(sum(r.get("compile_s", 0) for r in rows), 1),
        "compile_s_median": sorted(r.get("compile_s", 0) for r in rows)[len(rows) // 2] if rows else None,
    }
    # The shared-memory model the space's constraint uses, against every compile.
    model_misses = []
    for r in main:
        model = smem_model(r)
        r["model"] = model
        if (r["shared"] <= limit) != (model <= limit) or r["shared"] > model:
            model_misses.append(r)
    s["model_misses"] = model_misses
    s["fits"] = sum(r["shared"] <= limit for r in main)
    s["spills_in_fitting"] = [
        r for r in main if r["shared"] <= limit and (r.get("spill_stores") or r.get("spill_loads"))
    ]
    s["max_regs_fitting"] = max((r.get("regs", 0) for r in main if r["shared"] <= limit), default=None)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = parser("smem_probe", __doc__)
    ap.add_argument("--max-stages", type=int, default=6)
    ap.add_argument("--limit", type=int, default=SMEM_H200, help="shared memory per block (bytes)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per compile")
    ap.add_argument("--no-rejected", dest="rejected", action="store_false")
    ap.add_argument("--no-ragged-k", dest="ragged_k", action="store_false")
    ap.add_argument("--no-splitk-values", dest="splitk_values", action="store_false")
    ap.add_argument(
        "--variants",
        default="",
        help="probe the IMPL variants instead (fused,atomic,persistent)",
    )
    ap.add_argument(
        "--tma-store",
        choices=("both", "on", "off"),
        default="both",
        help="persistent: TMA_STORE values to probe",
    )
    ap.add_argument("--only", type=int, default=0, help="probe only the first N combinations (a smoke test)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)

    todo = combos(args)
    if args.only:
        todo = todo[: args.only]
    import triton

    cache = tempfile.mkdtemp(prefix="smem_probe_cache_")
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(1, initializer=init_worker, initargs=(cache,), maxtasksperchild=200)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    out = out_dir(args, "smem_probe") / (
        "smem_probe_sm90_variants.json" if args.variants else "smem_probe_sm90.json"
    )
    try:
        for i, c in enumerate(todo):
            job = pool.apply_async(compile_one, (c,))
            try:
                r = job.get(timeout=args.timeout)
            except mp.TimeoutError:
                pool.terminate()
                pool = ctx.Pool(1, initializer=init_worker, initargs=(cache,), maxtasksperchild=200)
                r = {"ok": False, "error": f"timeout after {args.timeout:.0f} s", "compile_s": args.timeout}
            except Exception as exc:  # the worker died (e.g. killed for memory)
                pool.terminate()
                pool = ctx.Pool(1, initializer=init_worker, initargs=(cache,), maxtasksperchild=200)
                r = {"ok": False, "error": f"worker died: {type(exc).__name__}: {exc}"}
            row = {**c, **r}
            rows.append(row)
            print(
                f"[{i + 1}/{len(todo)}] {c['kind']:<17} f{int(c.get('FLATTEN', 0))} {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} "
                f"s{c['num_stages']} w{c['num_warps']} tma={int(c['USE_TMA'])} sk={c['SPLIT_K']} K={c['K']}: "
                f"shared={r.get('shared')} regs={r.get('regs')} spills={r.get('spill_stores')} "
                f"{r['compile_s']}s{' ERROR ' + r['error'][:120] if not r['ok'] else ''}",
                flush=True,
            )
            if (i + 1) % 25 == 0:  # partial results survive an interrupted run
                out.write_text(json.dumps({"partial": True, "rows": rows}, indent=1))
    finally:
        pool.terminate()
    result = {
        "triton": triton.__version__,
        "target": "cuda sm_90 (cross-compiled on CPU)",
        "problem": PROBLEM,
        "ragged_k": RAGGED_K,
        "limit_smem_per_block": args.limit,
        "wall_s": round(time.perf_counter() - t0, 1),
        "summary": summarize(rows, args.limit),
        "rows": rows,
    }
    out.write_text(json.dumps(result, indent=1))
    s = result["summary"]
    rows = [
        {"figure": "compiles (ok)", "value": f"{s['compiled']} ({s['compile_ok']})"},
        {"figure": "seconds (median a compile)", "value": f"{result['wall_s']} ({s['compile_s_median']})"},
        {"figure": "combinations that fit", "value": s["fits"]},
        {"figure": "shared-memory model misses", "value": len(s["model_misses"])},
        {"figure": "fitting combinations that spill", "value": len(s["spills_in_fitting"])},
        {"figure": "most registers, fitting", "value": s["max_regs_fitting"]},
    ]
    print(table(rows, f"smem_probe (Triton {triton.__version__}, sm_90 cross-compiled; full results: {out})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
