"""A tunable CPU kernel: a cache-blocked matmul, C = A @ B in float32.

Its config picks the tile sizes and the tile loop order, and its speed really depends on them: small
tiles pay Python and dispatch overhead per tile, large tiles spill out of the caches, and the loop order
decides which operand stays hot. It runs inside ``record_function("matmul_cpu_blocked")`` so
``bench_kineto`` times it by name on the CPU, which lets the whole pipeline (search, store, lookup) run
and be tested on a machine without a GPU.

    autotune search examples/matmul_cpu.py --device cpu
"""

from __future__ import annotations

import torch

from autotune.kernel.contract import Kernel


def matmul_blocked(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: dict) -> torch.Tensor:
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    m, k = a.shape
    n = b.shape[1]
    rows, cols = range(0, m, bm), range(0, n, bn)
    tiles = (
        [(i, j) for i in rows for j in cols]
        if config["ORDER"] == "mn"
        else [(i, j) for j in cols for i in rows]
    )
    with torch.profiler.record_function("matmul_cpu_blocked"):
        out.zero_()
        for i, j in tiles:
            c = out[i : i + bm, j : j + bn]
            for p in range(0, k, bk):
                c.addmm_(a[i : i + bm, p : p + bk], b[p : p + bk, j : j + bn])
    return out


class MatmulCPU(Kernel):
    name = "matmul_cpu"
    kernel_names = ("matmul_cpu_blocked",)
    space = "matmul_cpu"
    default_config = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "ORDER": "mn"}
    default_shapes = ({"M": 256, "N": 256, "K": 256}, {"M": 128, "N": 512, "K": 256})
    shape_params = ("M", "N", "K")
    dtypes = {"a": "float32", "b": "float32", "out": "float32"}
    rtol = 1e-4
    atol = 1e-3

    def make_inputs(self, shape, device):
        a = torch.randn(shape["M"], shape["K"], device=device)
        b = torch.randn(shape["K"], shape["N"], device=device)
        return {"a": a, "b": b}

    def compile(self, config, inputs):
        # Nothing to compile on the CPU; the output is allocated here so the launcher does no allocation.
        out = torch.empty(inputs["a"].shape[0], inputs["b"].shape[1], dtype=inputs["a"].dtype)
        cfg = dict(config)
        return lambda: matmul_blocked(inputs["a"], inputs["b"], out, cfg)

    def reference(self, inputs):
        return inputs["a"] @ inputs["b"]

    def flops(self, shape):
        return 2.0 * shape["M"] * shape["N"] * shape["K"]

    def bytes_moved(self, shape):
        return 4.0 * (shape["M"] * shape["K"] + shape["K"] * shape["N"] + shape["M"] * shape["N"])


KERNEL = MatmulCPU()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What kernel code calls: the tuned config for this shape on this machine, else the default."""
    import autotune

    config = autotune.best_config(
        "matmul_cpu", M=a.shape[0], N=b.shape[1], K=a.shape[1], default=KERNEL.default_config, device="cpu"
    )
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    return matmul_blocked(a, b, out, config)
