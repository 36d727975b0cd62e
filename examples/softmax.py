"""Row-wise fused softmax in Triton (in the spirit of Triton's tutorial, written anew), as a kernel file.

One program per row: a first pass keeps a running max and a rescaled running sum over BLOCK_SIZE
chunks (online softmax), a second writes exp(x - max) / sum; a row that fits one block is read once.
fp16 or fp32 in, the same dtype out, fp32 math. The kernel file below is the ``TritonKernel`` helper
over the same ``triton.Config`` list that ``@triton.autotune`` would take: ``autotune search
examples/softmax.py`` searches exactly these configs (the space is derived from the list).

``softmax(x)`` launches through the drop-in ``@autotune`` (the database's config for the shape);
``softmax_triton(x)`` through plain ``@triton.autotune`` over the same configs, for comparison.
Runs on a CPU under TRITON_INTERPRET=1."""

import os

import torch
import triton
import triton.language as tl

from autotune.kernel.triton import TritonKernel
from autotune.runtime.triton_autotune import autotune, wall_clock_bench

# 1 to 32 elements per thread per chunk; warps x stages not a full product of the values
CONFIGS = [
    triton.Config({"BLOCK_SIZE": b}, num_warps=w, num_stages=s)
    for b in (256, 512, 1024, 2048, 4096, 8192)
    for w in (1, 2, 4, 8, 16)
    for s in (1, 2, 3)
    if 32 * w <= b <= 1024 * w
]


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    src, dst = in_ptr + row * in_stride, out_ptr + row * out_stride
    cols = tl.arange(0, BLOCK_SIZE)
    if n_cols <= BLOCK_SIZE:  # the whole row in registers: one read
        x = tl.load(src + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, 0))
        tl.store(dst + cols, (e / tl.sum(e, 0)).to(out_ptr.dtype.element_ty), mask=cols < n_cols)
    else:
        m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)  # per-lane running max and sum
        s = tl.zeros([BLOCK_SIZE], tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            x = tl.load(src + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            # a lane that has seen only padding keeps m = -inf: exp(-inf - -inf) would be NaN
            s = tl.where(m_new == float("-inf"), 0.0, s * tl.exp(m - m_new) + tl.exp(x - m_new))
            m = m_new
        row_max = tl.max(m, 0)
        total = tl.sum(s * tl.exp(m - row_max), 0)
        for start in range(0, n_cols, BLOCK_SIZE):
            mask = start + cols < n_cols
            x = tl.load(src + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
            tl.store(
                dst + start + cols, (tl.exp(x - row_max) / total).to(out_ptr.dtype.element_ty), mask=mask
            )


softmax_dropin = autotune(configs=CONFIGS, key=["n_rows", "n_cols"], kernel="softmax")(softmax_kernel)
# Triton's own benchmarker needs a GPU driver: in its CPU interpreter, time the configs by wall clock.
_bench = wall_clock_bench if os.environ.get("TRITON_INTERPRET") == "1" else None
softmax_autotuned = triton.autotune(configs=CONFIGS, key=["n_rows", "n_cols"], do_bench=_bench)(
    softmax_kernel
)


def _launch(tuned, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    tuned[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[0], x.shape[1])
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D tensor, with the tuned config for its shape (else the first)."""
    return _launch(softmax_dropin, x)


def softmax_triton(x: torch.Tensor) -> torch.Tensor:
    """The same, tuned by ``@triton.autotune`` in this process (every listed config benchmarked on the first
    call of a shape; under TRITON_INTERPRET=1 on a CPU by wall clock, which takes seconds)."""
    return _launch(softmax_autotuned, x)


KERNEL = TritonKernel(
    softmax_kernel,
    name="softmax",
    configs=CONFIGS,
    inputs=lambda shape, device: {
        "x": 4 * torch.randn(shape["n_rows"], shape["n_cols"], device=device, dtype=torch.float16)
    },
    output=lambda i: torch.empty_like(i["x"]),
    args=lambda i, out: (out, i["x"], i["x"].stride(0), out.stride(0), *i["x"].shape),
    grid=lambda meta: (meta["n_rows"],),
    reference=lambda i: torch.softmax(i["x"].float(), dim=-1).to(i["x"].dtype),
    shapes=[{"n_rows": 4096, "n_cols": 8192}, {"n_rows": 16384, "n_cols": 1024}],
    flops=lambda shape: 5.0 * shape["n_rows"] * shape["n_cols"],  # max, sub, exp, sum, div per element
    dtypes={"x": "float16", "out": "float16"},
    rtol=1e-2,
    atol=1e-3,
    bytes_moved=lambda shape: 2 * 2 * shape["n_rows"] * shape["n_cols"],
)
