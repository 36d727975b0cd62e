"""On a GPU: compile, launch and check every valid config of search_spaces/gemm_fp8.yaml (no timing).

For each config the space admits on this device's facts, and each of two shapes (one where every tile
and K divide, one ragged against every tile and K), run examples/gemm_fp8.py's launcher, compare with
the reference, and read back what the driver reports for the compiled main kernel (registers, spills,
shared memory). Any failure means a constraint admits something it should not. Work is spread over
``--procs`` processes sharing the GPU (compiles dominate); correctness only, so sharing is harmless.

    PYTHONPATH=. python bench/gpu_space_check.py --out $OUT/gpu_space_check.json [--procs 12]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KERNEL_FILE = ROOT / "examples" / "gemm_fp8.py"
SPACE_FILE = ROOT / "search_spaces" / "gemm_fp8.yaml"
SHAPES = ({"M": 512, "N": 768, "K": 2048}, {"M": 1000, "N": 1100, "K": 1040})  # even; ragged (K % 16 == 0)


def _worker(job: tuple[int, list[dict[str, Any]], str]) -> list[dict[str, Any]]:
    wid, configs, cache = job
    os.environ["TRITON_CACHE_DIR"] = cache
    sys.path.insert(0, str(ROOT))
    import torch

    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]

    def jit_fn(cfg: dict[str, Any]) -> Any:
        """The Triton function whose compiled kernel the config launches (None: the library's)."""
        impl = cfg.get("IMPL", "triton")
        if impl == "persistent":
            return mod._autotune_gemm_fp8_persistent
        if impl == "triton" and cfg["SPLIT_K"] > 1 and cfg.get("SPLIT_REDUCE") == "fused":
            return mod._autotune_gemm_fp8_splitk_fused
        return mod._autotune_gemm_fp8_kernel if impl == "triton" else None

    torch.manual_seed(wid)
    data = []
    for s in SHAPES:
        inp = kernel.make_inputs(s, "cuda")
        data.append((s, inp, kernel.reference(inp)))
    rows = []
    for cfg in configs:
        for shape, inp, ref in data:
            row: dict[str, Any] = {"config": cfg, "shape": shape}
            dev = torch.cuda.current_device()
            fn = jit_fn(cfg)
            caches = fn.device_caches if fn is not None else {}
            cache_before = set(caches[dev][0]) if dev in caches else set()
            t0 = time.perf_counter()
            try:
                out = kernel.compile(cfg, inp)()  # compiles and runs once, then again (fused: counters reset)
                torch.cuda.synchronize()
                row["wrong_result"] = kernel.compare(out, ref)
                row["ok"] = row["wrong_result"] is None
                new = [k for key, k in caches[dev][0].items() if key not in cache_before] if fn else []
                if new:
                    k = new[0]
                    row |= {"n_regs": k.n_regs, "n_spills": k.n_spills, "shared": int(k.metadata.shared)}
            except Exception as exc:
                row |= {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
            row["s"] = round(time.perf_counter() - t0, 3)
            rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--procs", type=int, default=12)
    ap.add_argument("--limit", type=int, default=0, help="only every k-th config, to cap the run (0: all)")
    ap.add_argument(
        "--impl", default="", help="only configs of these IMPLs (comma-separated), e.g. persistent"
    )
    ap.add_argument(
        "--split-reduce", default="", help="only split-K configs reduced this way (kernel, fused)"
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from autotune.env import device_facts
    from autotune.space import Space

    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as p:  # facts from a child: the parent never initializes CUDA before forking workers
        facts = p.apply(device_facts, ("cuda",))
    configs = list(Space.from_yaml(SPACE_FILE).enumerate(facts))
    if args.impl:
        configs = [c for c in configs if c.get("IMPL", "triton") in args.impl.split(",")]
    if args.split_reduce:
        configs = [c for c in configs if c.get("SPLIT_REDUCE") == args.split_reduce]
    if args.limit and len(configs) > args.limit:
        step = len(configs) / args.limit
        configs = [configs[int(i * step)] for i in range(args.limit)]
    cache = tempfile.mkdtemp(prefix="gpu_space_check_")
    jobs = [(i, configs[i :: args.procs], cache) for i in range(args.procs)]
    t0 = time.perf_counter()
    with ctx.Pool(args.procs) as pool:
        rows = [r for part in pool.map(_worker, jobs) for r in part]
    wall = time.perf_counter() - t0
    bad = [r for r in rows if not r["ok"]]
    spills = [r for r in rows if r.get("n_spills")]
    over = [r for r in rows if r.get("shared", 0) > facts["smem_per_block"]]
    regs = [r["n_regs"] for r in rows if "n_regs" in r]
    res = {
        "facts": facts,
        "n_configs": len(configs),
        "runs": len(rows),
        "failed": bad,
        "spilling": spills,
        "over_smem": over,
        "max_regs": max(regs, default=None),
        "wall_s": round(wall, 1),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, default=str))
    print(
        f"{len(configs)} configs x {len(SHAPES)} shapes = {len(rows)} runs in {wall:.0f} s: "
        f"{len(bad)} failed, {len(spills)} spill, {len(over)} over smem, max regs {res['max_regs']}"
    )
    for r in bad[:20]:
        print("  FAIL", r["config"], r["shape"], r.get("error") or r.get("wrong_result"))


if __name__ == "__main__":
    main()
