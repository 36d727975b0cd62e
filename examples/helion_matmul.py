"""An fp16 GEMM as a Helion kernel, tuned by autotune: ``autotune search examples/helion_matmul.py``.

Everything but the inputs comes from Helion (``autotune.HelionKernel``): the space from its ConfigSpec
(block sizes, loop order, L2 grouping, pid type, indexing, warps, stages, range knobs), the default
config and the generated Triton kernel's name. fp16, not bf16: Triton's CPU interpreter computes bf16
dots wrongly, and the CPU tests run this file under ``TRITON_INTERPRET=1``."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

from autotune import HelionKernel


@helion.kernel(static_shapes=True)
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


class Matmul(HelionKernel):
    name = "helion_matmul"
    fn = matmul
    shape_params = ("M", "N", "K")
    default_shapes = [{"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 2048}]
    dtypes = {"x": "float16", "y": "float16", "out": "float16"}

    def make_inputs(self, shape, device):
        x = torch.randn(shape["M"], shape["K"], device=device, dtype=torch.float16)
        y = torch.randn(shape["K"], shape["N"], device=device, dtype=torch.float16)
        return (x, y)

    def reference(self, inputs):
        # fp32 on the inputs' device (Helion's ref mode would run a fp16 addmm, which CPUs lack)
        x, y = inputs
        return (x.float() @ y.float()).to(x.dtype)

    def flops(self, shape):
        return 2.0 * shape["M"] * shape["N"] * shape["K"]

    def bytes_moved(self, shape):
        return 2.0 * (shape["M"] * shape["K"] + shape["K"] * shape["N"] + shape["M"] * shape["N"])


KERNEL = Matmul()
