"""FP8 (e4m3) GEMM for Hopper in Triton, as an autotune kernel file.

A frozen copy of examples/gemm_fp8.py as of wave 2 (with the wave-2 check), kept so the recorded
landscapes in bench/landscapes/ stay reproducible while the example evolves.

C[M, N] = A[M, K] · B[N, K]ᵀ · (scale_a · scale_b): e4m3 inputs, fp32 accumulation, bf16 output, per-tensor
fp32 scales. Both operands are K-major (B is stored [N, K]), which is what Hopper's fp8 wgmma wants.

Config: BLOCK_M/N/K (the tile), GROUP_M (grouped tile order for L2 reuse), num_stages, num_warps,
USE_TMA (host-side TMA descriptors for the A/B loads, else masked pointer loads) and SPLIT_K (each of
SPLIT_K programs per tile takes a K-range and writes fp32 partials to a [SPLIT_K, M, N] workspace; a
second small kernel sums them, applies the scales and casts to bf16). Split-K exists for small M, where
a plain tiling makes too few tiles to fill 132 SMs (64x2112x7168: 17 tiles of 64x128).

Runs on CPU under TRITON_INTERPRET=1 (used by the tests); importing this file initializes no CUDA."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl

from autotune.kernel.contract import Kernel

MAIN_KERNEL = "_autotune_gemm_fp8_kernel"
REDUCE_KERNEL = "_autotune_gemm_fp8_splitk_reduce"
REDUCE_BLOCK = 1024
_INT32_MAX = 2**31 - 1


@triton.jit
def _autotune_gemm_fp8_kernel(
    a,  # [M, K] e4m3 pointer, or a TensorDescriptor when USE_TMA
    b,  # [N, K] e4m3 pointer, or a TensorDescriptor when USE_TMA
    c,  # [M, N] bf16 output (SPLIT_K == 1)
    ws,  # [SPLIT_K, M, N] fp32 partials (SPLIT_K > 1)
    scale_a,
    scale_b,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    USE_TMA: tl.constexpr,
    EVEN_K: tl.constexpr,  # K % BLOCK_K == 0: pointer loads need no K mask
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: GROUP_M tile-rows walk the N tiles together, so their B tiles are reused from L2.
    num_in_group = GROUP_M * num_pid_n
    first_m = (pid // num_in_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % num_in_group) % group_rows
    pid_n = (pid % num_in_group) // group_rows

    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    k_lo = pid_k * per_split
    k_hi = min(k_lo + per_split, k_tiles)  # a split past the end runs no iteration and writes zeros

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if USE_TMA:
        # The descriptors' bounds zero-fill ragged M, N and K edges.
        off_am = pid_m * BLOCK_M
        off_bn = pid_n * BLOCK_N
        for kt in tl.range(k_lo, k_hi):
            a_tile = a.load([off_am, kt * BLOCK_K])
            b_tile = b.load([off_bn, kt * BLOCK_K])
            acc = tl.dot(a_tile, b_tile.T, acc)
    else:
        # Rows past M / N wrap around instead of being masked (their results are never stored), so only K
        # needs a mask, and only when K is ragged.
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a + offs_am[:, None] * stride_am + (k_lo * BLOCK_K + offs_k)[None, :]
        # B as a [BLOCK_K, BLOCK_N] view, K contiguous
        b_ptrs = b + offs_bn[None, :] * stride_bn + (k_lo * BLOCK_K + offs_k)[:, None]
        for kt in tl.range(k_lo, k_hi):
            if EVEN_K:
                a_tile = tl.load(a_ptrs)
                b_tile = tl.load(b_ptrs)
            else:
                k_left = K - kt * BLOCK_K
                a_tile = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                b_tile = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a_tile, b_tile, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K == 1:
        scale = tl.load(scale_a) * tl.load(scale_b)
        tl.store(c + offs_m[:, None] * stride_cm + offs_n[None, :], (acc * scale).to(tl.bfloat16), mask=mask)
    else:
        part = ws + pid_k * M * N  # launcher() checks that SPLIT_K*M*N fits in int32
        tl.store(part + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def _autotune_gemm_fp8_splitk_reduce(ws, c, scale_a, scale_b, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.load(ws + offs, mask=mask, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        acc += tl.load(ws + s * MN + offs, mask=mask, other=0.0)
    scale = tl.load(scale_a) * tl.load(scale_b)
    tl.store(c + offs, (acc * scale).to(tl.bfloat16), mask=mask)


@dataclass
class GemmInputs:
    a: Any  # [M, K] float8_e4m3fn
    b: Any  # [N, K] float8_e4m3fn
    scale_a: Any  # fp32, one element
    scale_b: Any  # fp32, one element

    @property
    def shape(self) -> dict[str, int]:
        return {"M": self.a.shape[0], "N": self.b.shape[0], "K": self.a.shape[1]}


def check_config(config: Mapping[str, Any], M: int, N: int, K: int) -> str | None:
    """Why ``config`` cannot run this shape (None if it can): limits of this kernel, not of the space."""
    if config["USE_TMA"] and K % 16:
        return f"USE_TMA needs K % 16 == 0 (TMA row strides are 16-byte aligned); K={K}"
    if max(M, N) * K > _INT32_MAX or config["SPLIT_K"] * M * N > _INT32_MAX:
        return "shape too large for the kernel's int32 offsets"
    return None


def launcher(
    config: Mapping[str, Any], a: Any, b: Any, scale_a: Any, scale_b: Any, out: Any, workspace: Any = None
) -> Callable[[], Any]:
    """A zero-arg callable running ``config`` into ``out`` (and ``workspace`` for split-K); nothing allocated."""
    M, K = a.shape
    N = b.shape[0]
    bm, bn, bk, split_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"], config["SPLIT_K"]
    use_tma = bool(config["USE_TMA"])
    why = check_config(config, M, N, K)
    if why:
        raise ValueError(why)
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError("A and B must be contiguous along K")
    if split_k > 1 and (workspace is None or workspace.numel() < split_k * M * N):
        raise ValueError(f"SPLIT_K={split_k} needs a float32 workspace of {split_k}*M*N elements")
    if use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        a_arg: Any = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
        b_arg: Any = TensorDescriptor(b, [N, K], [b.stride(0), 1], [bn, bk])
    else:
        a_arg, b_arg = a, b
    ws = workspace if split_k > 1 else out  # an unused pointer argument still needs a tensor
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split_k)
    main = _autotune_gemm_fp8_kernel[grid]
    if not a.is_cuda:
        # The interpreter launches no device kernel: name the CPU work so bench_kineto can time it by name,
        # which lets the whole search pipeline run on a CPU (the times say nothing about a GPU).
        main = _named(MAIN_KERNEL, main)
    meta = dict(
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=config["GROUP_M"],
        SPLIT_K=split_k,
        USE_TMA=use_tma,
        EVEN_K=K % bk == 0,
        num_stages=config["num_stages"],
        num_warps=config["num_warps"],
    )
    args = (a_arg, b_arg, out, ws, scale_a, scale_b, M, N, K, a.stride(0), b.stride(0), out.stride(0))
    if split_k == 1:

        def run() -> Any:
            main(*args, **meta)
            return out

        return run
    reduce = _autotune_gemm_fp8_splitk_reduce[(triton.cdiv(M * N, REDUCE_BLOCK),)]
    if not a.is_cuda:
        reduce = _named(REDUCE_KERNEL, reduce)
    if not out.is_contiguous():
        raise ValueError("split-K writes a contiguous output")

    def run_split() -> Any:
        main(*args, **meta)
        reduce(workspace, out, scale_a, scale_b, M * N, SPLIT_K=split_k, BLOCK=REDUCE_BLOCK, num_warps=4)
        return out

    return run_split


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def call(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(name):
            return fn(*args, **kwargs)

    return call


class GemmFP8(Kernel):
    name = "gemm_fp8"
    kernel_names = (MAIN_KERNEL,)
    space = "gemm_fp8_wave2.yaml"  # frozen copy of the wave-2 space (bench landscapes)
    shape_params = ("M", "N", "K")
    dtypes = {"a": "float8_e4m3fn", "b": "float8_e4m3fn", "out": "bfloat16"}
    # The default check (autotune.kernel.compare_outputs): 2 bf16 ulps per element, globally eps^2.
    rtol = 0.0
    atol = 0.0
    default_config = {
        "BLOCK_M": 128,
        "BLOCK_N": 128,
        "BLOCK_K": 128,
        "GROUP_M": 8,
        "num_stages": 3,
        "num_warps": 8,
        "USE_TMA": False,
        "SPLIT_K": 1,
    }
    # DeepSeek-V3's GEMMs, as in DeepGEMM's tests.
    default_shapes = tuple(
        {"M": m, "N": n, "K": k}
        for m in (64, 128, 4096)
        for n, k in ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048))
    )

    def make_inputs(self, shape: Mapping[str, int], device: str) -> GemmInputs:
        import torch

        if not str(device).startswith("cuda") and os.environ.get("TRITON_INTERPRET") != "1":
            # Without the interpreter every config would just fail to compile: say what to do instead.
            raise RuntimeError(
                "gemm_fp8 runs on the CPU only in Triton's interpreter: set TRITON_INTERPRET=1"
            )
        M, N, K = shape["M"], shape["N"], shape["K"]
        # N(0, 1) entries sit well inside e4m3's range (max 448); scales of K^-1/4 each make the output
        # ~N(0, 1) and are not 1, so a dropped scale shows.
        a = torch.randn(M, K, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device=device).to(torch.float8_e4m3fn)
        s = torch.tensor(K**-0.25, dtype=torch.float32, device=device)
        return GemmInputs(a, b, s, s.clone())

    def compile(self, config: Mapping[str, Any], inputs: GemmInputs) -> Callable[[], Any]:
        import torch

        M, N = inputs.a.shape[0], inputs.b.shape[0]
        out = torch.empty(M, N, dtype=torch.bfloat16, device=inputs.a.device)
        ws = None
        if config["SPLIT_K"] > 1:
            ws = torch.empty(config["SPLIT_K"], M, N, dtype=torch.float32, device=inputs.a.device)
        run = launcher(config, inputs.a, inputs.b, inputs.scale_a, inputs.scale_b, out, ws)
        run()  # compiles (or loads from Triton's cache); a compile error surfaces here, not in timing
        return run

    def reference(self, inputs: GemmInputs) -> Any:
        import torch

        a, b = inputs.a, inputs.b
        # cuBLASLt's fp8 GEMM needs every dim divisible by 16; ragged test shapes use the fp32 path.
        if a.is_cuda and all(d % 16 == 0 for d in (*a.shape, b.shape[0])):
            sa, sb = inputs.scale_a.reshape(()), inputs.scale_b.reshape(())
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        ref = (a.float() @ b.float().t()) * (inputs.scale_a.float() * inputs.scale_b.float()).reshape(())
        return ref.to(torch.bfloat16)

    def features(
        self, config: Mapping[str, Any], shape: Mapping[str, int], facts: Mapping[str, int]
    ) -> dict[str, float]:
        """Analytic features for the auto strategy's models: how the tiling fills the GPU and moves data."""
        return gemm_features(config, shape, facts)

    def flops(self, shape: Mapping[str, int]) -> float:
        return 2.0 * shape["M"] * shape["N"] * shape["K"]

    def bytes_moved(self, shape: Mapping[str, int]) -> float:
        return float(shape["M"] * shape["K"] + shape["N"] * shape["K"] + 2 * shape["M"] * shape["N"])

    def timed_kernels(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        return (MAIN_KERNEL, REDUCE_KERNEL) if config["SPLIT_K"] > 1 else (MAIN_KERNEL,)


def gemm_features(
    config: Mapping[str, Any], shape: Mapping[str, int], facts: Mapping[str, int]
) -> dict[str, float]:
    """Tiles, waves over the SMs and how full the last one is, shared memory per CTA and CTAs per SM,
    K iterations per tile, padding waste, operand reuse (arithmetic intensity of a tile)."""
    M, N, K = shape["M"], shape["N"], shape["K"]
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    sk, stages, warps = config.get("SPLIT_K", 1), config["num_stages"], config["num_warps"]
    sms = max(1, int(facts.get("sm_count", 132)))
    tm, tn = math.ceil(M / bm), math.ceil(N / bn)
    tiles = tm * tn * sk
    waves = tiles / sms
    smem = stages * (bm + bn) * bk  # e4m3: one byte per element
    per_sm_smem = max(1, int(facts.get("smem_per_block", 232448)) // max(1, smem))
    per_sm_threads = max(1, 2048 // (warps * 32))
    ctas = min(per_sm_smem, per_sm_threads)
    k_iters = math.ceil(K / bk / sk)
    return {
        "log_tiles": math.log2(tiles),
        "waves": waves,
        "wave_eff": tiles / (math.ceil(waves) * sms),
        "resident_waves": tiles / (sms * ctas),
        "log_smem": math.log2(smem),
        "ctas_per_sm": float(ctas),
        "log_k_iters": math.log2(k_iters),
        "pad_waste": tm * bm * tn * bn / (M * N) - 1.0,
        "intensity": bm * bn / (bm + bn),
        "split_k_bytes": math.log2(1 + (sk - 1) * M * N * 4),
    }


KERNEL = GemmFP8()


def scaled_mm_baseline(inputs: GemmInputs) -> Callable[[], Any]:
    """A launcher for cuBLASLt's fp8 GEMM (``torch._scaled_mm``; kernels named ``nvjet_*``) on ``inputs``."""
    import torch

    a, bt = inputs.a, inputs.b.t()
    sa, sb = inputs.scale_a.reshape(()), inputs.scale_b.reshape(())
    return lambda: torch._scaled_mm(a, bt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def gemm_fp8(a: Any, b: Any, scale_a: Any, scale_b: Any, config: Mapping[str, Any] | None = None) -> Any:
    """C = A·Bᵀ·(scale_a·scale_b) in bf16, for A [M, K] and B [N, K] e4m3 (row-major), fp32 scales.

    Without ``config``, the tuned config for this shape (``autotune.best_config``), else the default."""
    import torch

    M, K = a.shape
    N = b.shape[0]
    if config is None:
        from autotune import best_config  # cached in-process after the first lookup of a shape

        config = best_config("gemm_fp8", M=M, N=N, K=K, default=KERNEL.default_config)
    cfg = dict(config)
    if cfg["USE_TMA"] and K % 16:
        cfg["USE_TMA"] = False  # a config tuned on a nearby shape may not suit this K; fall back, don't fail
    out = torch.empty(M, N, dtype=torch.bfloat16, device=a.device)
    ws = None
    if cfg["SPLIT_K"] > 1:
        ws = torch.empty(cfg["SPLIT_K"], M, N, dtype=torch.float32, device=a.device)
    return launcher(cfg, a.contiguous(), b.contiguous(), scale_a, scale_b, out, ws)()
