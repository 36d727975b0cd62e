"""Row softmax as a Helion kernel (the third kernel of bench/helion_side_by_side.py: not one the Helion
integration was developed against). A two-pass online softmax, as in Helion's own examples."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

from autotune import HelionKernel


@helion.kernel(static_shapes=True)
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        values = x[tile_n, :].to(torch.float32)
        amax = torch.amax(values, dim=1, keepdim=True)
        exp = torch.exp(values - amax)
        out[tile_n, :] = (exp / torch.sum(exp, dim=1, keepdim=True)).to(out.dtype)
    return out


class Softmax(HelionKernel):
    name = "helion_softmax"
    fn = softmax
    shape_params = ("M", "N")
    default_shapes = [{"M": 4096, "N": 4096}, {"M": 16384, "N": 1024}]
    dtypes = {"x": "float16", "out": "float16"}

    def make_inputs(self, shape, device):
        return (torch.randn(shape["M"], shape["N"], device=device, dtype=torch.float16),)

    def reference(self, inputs):
        (x,) = inputs
        return torch.softmax(x.float(), dim=-1).to(x.dtype)

    def flops(self, shape):
        return 5.0 * shape["M"] * shape["N"]

    def bytes_moved(self, shape):
        return 4.0 * shape["M"] * shape["N"]


KERNEL = Softmax()
