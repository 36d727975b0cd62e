"""An fp16 GEMM in Triton with a wide config list, as a kernel file: the held-out kernel of issue 19's live check.

C[M, N] = A[M, K] · B[K, N], fp16 in, fp32 accumulation, fp16 out, both operands row-major. One program per
C tile, tiles visited in groups of GROUP_M rows (L2 reuse), masked pointer loads, no TMA, no split-K: a
different kernel from gemm_fp8 (another dtype, another operand layout, another space), written for this check
and never used to develop the search (bench/RESULTS.md section 26).

The space is the product of BLOCK_M, BLOCK_N in 16..256, BLOCK_K in 32..128, GROUP_M 1 or 8, 2 to 5 stages and
2, 4 or 8 warps, less the configs whose pipelined tiles exceed the H200's 227 KiB of shared memory per block or
that leave a warp fewer than 8 elements of C: ~1,000 configs. Runs on a CPU under TRITON_INTERPRET=1."""

import torch
import triton
import triton.language as tl

from autotune.kernel.triton import TritonKernel

#: shared memory per block on Hopper (sm_90): a config whose staged A and B tiles need more cannot launch
_SMEM_BYTES = 232448


def _fits(bm: int, bn: int, bk: int, stages: int, warps: int) -> bool:
    staged = stages * (bm * bk + bk * bn) * 2  # fp16 A and B tiles, one per pipeline stage
    return staged <= _SMEM_BYTES and bm * bn >= 8 * 32 * warps


CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_stages=s, num_warps=w)
    for bm in (128, 16, 32, 64, 256)  # 128x128x64 first: the config listed first is the default
    for bn in (128, 16, 32, 64, 256)
    for bk in (64, 32, 128)
    for g in (8, 1)
    for s in (3, 2, 4, 5)
    for w in (4, 2, 8)
    if _fits(bm, bn, bk, s, w)
]


@triton.jit
def matmul_fp16_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # grouped order: GROUP_M tile rows are walked column by column, so their A rows stay in L2
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        x = tl.load(a, mask=(offs_m[:, None] < M) & (offs_k[None, :] < left), other=0.0)
        y = tl.load(b, mask=(offs_k[:, None] < left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc)
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _inputs(shape, device):
    a = torch.randn(shape["M"], shape["K"], device=device, dtype=torch.float16)
    b = torch.randn(shape["K"], shape["N"], device=device, dtype=torch.float16)
    return {"a": a, "b": b}


def _args(i, out):
    a, b = i["a"], i["b"]
    return (a, b, out, a.shape[0], b.shape[1], a.shape[1], *a.stride(), *b.stride(), *out.stride())


KERNEL = TritonKernel(
    matmul_fp16_kernel,
    name="matmul_fp16",
    configs=CONFIGS,
    inputs=_inputs,
    output=lambda i: torch.empty(i["a"].shape[0], i["b"].shape[1], device=i["a"].device, dtype=torch.float16),
    args=_args,
    grid=lambda meta: (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),),
    # fp32 accumulation in both; the reference sums in another order, so a K of thousands differs by ~1e-2
    reference=lambda i: (i["a"].float() @ i["b"].float()).to(torch.float16),
    shapes=[{"M": 4096, "N": 4096, "K": 4096}],
    flops=lambda shape: 2.0 * shape["M"] * shape["N"] * shape["K"],
    dtypes={"a": "float16", "b": "float16", "out": "float16"},
    rtol=2e-2,
    atol=5e-2,
    bytes_moved=lambda s: 2 * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"]),
)
