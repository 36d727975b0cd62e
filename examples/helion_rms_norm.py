"""RMS norm as a Helion kernel, tuned by autotune: ``autotune search examples/helion_rms_norm.py``.

Everything but the inputs comes from Helion (``autotune.HelionKernel``): the space from its ConfigSpec,
the default config, the generated Triton kernel's name. ``1 / torch.sqrt`` rather than ``torch.rsqrt``:
rsqrt lowers to libdevice, which Triton's CPU interpreter (``TRITON_INTERPRET=1``) lacks."""

from __future__ import annotations

import helion
import helion.language as hl
import torch

from autotune import HelionKernel


@helion.kernel(static_shapes=True)
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        row = x[tile_m, :].to(torch.float32)
        inv_rms = 1.0 / torch.sqrt(torch.mean(row * row, dim=-1) + eps)
        out[tile_m, :] = (row * inv_rms[:, None] * weight[None, :].to(torch.float32)).to(out.dtype)
    return out


class RmsNorm(HelionKernel):
    name = "helion_rms_norm"
    fn = rms_norm
    shape_params = ("M", "N")
    default_shapes = [{"M": 4096, "N": 4096}, {"M": 16384, "N": 2048}]
    dtypes = {"x": "float16", "out": "float16"}

    def make_inputs(self, shape, device):
        x = torch.randn(shape["M"], shape["N"], device=device, dtype=torch.float16)
        weight = torch.randn(shape["N"], device=device, dtype=torch.float16)
        return (x, weight)

    def flops(self, shape):
        return 4.0 * shape["M"] * shape["N"]

    def bytes_moved(self, shape):
        return 2.0 * (2 * shape["M"] * shape["N"] + shape["N"])


KERNEL = RmsNorm()
