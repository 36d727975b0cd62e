"""FP8 (e4m3) GEMM for Hopper, as an autotune kernel file that compiles *or selects* an implementation.

C[M, N] = A[M, K] · B[N, K]ᵀ · (scale_a · scale_b): e4m3 inputs, fp32 accumulation, bf16 output, per-tensor
fp32 scales. Both operands are K-major (B is stored [N, K]), which is what Hopper's fp8 wgmma wants.

``IMPL`` picks the implementation; each is a candidate like any other, checked and timed by its own kernels
(``timed_kernels``), so the best stored config of a shape may be the library's:

- ``triton`` (also what a config without ``IMPL`` means, i.e. every config of the earlier spaces): one
  program per tile (and per K-split). BLOCK_M/N/K, GROUP_M (grouped tile order for L2 reuse),
  num_stages, num_warps, USE_TMA (host-side TMA descriptors for the A/B loads, else masked pointer loads)
  and SPLIT_K (each of SPLIT_K programs per tile takes a K-range and writes fp32 partials to a
  [SPLIT_K, M, N] workspace). Split-K exists for small M, where a plain tiling makes too few tiles to fill
  132 SMs (64x2112x7168: 17 tiles of 64x128). SPLIT_REDUCE says who sums the partials:
  ``kernel`` (also the meaning when absent) -- a second small kernel sums them, applies the scales and
  casts to bf16; ``fused`` -- no second launch: each program bumps a per-tile counter after writing its
  partial, and the program that arrives last sums the tile's SPLIT_K partials in split order (so the
  result is deterministic), applies the scales, casts, stores bf16 and resets the counter for the next call;
  ``atomic`` -- the same without the [SPLIT_K, M, N] partials: each program adds its partial into one
  fp32 [M, N] sum with L2 atomics, and the last one reads that single tile (1 instead of SPLIT_K),
  finishes it and zeroes it for the next call (the order of the additions varies, so the last bits may).
- ``persistent``: one program per SM (at most one per tile) loops over the tiles in grouped order, A/B
  by TMA descriptors; BLOCK_M/N/K, GROUP_M, num_stages, num_warps and FLATTEN (Triton flattens the
  tile and K loops into one software pipeline, so the next tile's loads overlap this tile's epilogue) and
  TMA_STORE (the bf16 output tile leaves by an asynchronous TMA store instead of masked pointer stores).
- ``scaled_mm``: cuBLASLt's fp8 GEMM through ``torch._scaled_mm`` (kernels ``nvjet_sm90_*``); no parameters.

Runs on CPU under TRITON_INTERPRET=1 (used by the tests; ``scaled_mm`` runs torch's CPU implementation);
importing this file initializes no CUDA."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import triton
import triton.language as tl

from autotune.kernel.contract import Kernel
from autotune.kernel.triton import Launch, compile_launches

MAIN_KERNEL = "_autotune_gemm_fp8_kernel"
REDUCE_KERNEL = "_autotune_gemm_fp8_splitk_reduce"
FUSED_KERNEL = "_autotune_gemm_fp8_splitk_fused"
PERSISTENT_KERNEL = "_autotune_gemm_fp8_persistent"
# cuBLASLt's Hopper fp8 kernels are named nvjet_sm90_<tile>_...; on the CPU the call is recorded under a
# name holding the same substring, so one timed name serves both devices.
SCALED_MM_KERNEL = "nvjet"
IMPLS = ("triton", "persistent", "scaled_mm")
FUSED_MODES = ("fused", "atomic")  # SPLIT_REDUCE values finished in the main kernel (no reduction launch)
REDUCE_BLOCK = 1024
_INT32_MAX = 2**31 - 1
# Programs of the persistent kernel in the interpreter: few, so each loops over several tiles.
_CPU_PROGRAMS = 3


@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped order: GROUP_M tile-rows walk the N tiles together, so their B tiles are reused from L2.
    num_in_group = GROUP_M * num_pid_n
    first_m = (tile // num_in_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % num_in_group) % group_rows
    pid_n = (tile % num_in_group) // group_rows
    return pid_m, pid_n


@triton.jit
def _split_acc(
    a,
    b,
    pid_m,
    pid_n,
    pid_k,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    USE_TMA: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """The fp32 [BLOCK_M, BLOCK_N] tile of A @ B.T over split ``pid_k``'s share of the K tiles (inlined into
    the one-tile and the fused split-K kernels)."""
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

    return acc


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
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    acc = _split_acc(
        a,
        b,
        pid_m,
        pid_n,
        pid_k,
        M,
        N,
        K,
        stride_am,
        stride_bn,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        SPLIT_K,
        USE_TMA,
        EVEN_K,
    )

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


@triton.jit
def _autotune_gemm_fp8_splitk_fused(
    a,  # [M, K] e4m3 pointer, or a TensorDescriptor when USE_TMA
    b,  # [N, K] e4m3 pointer, or a TensorDescriptor when USE_TMA
    c,  # [M, N] bf16 output
    ws,  # [SPLIT_K, M, N] fp32 partials; ATOMIC: [M, N] fp32 sums, zero between calls
    counters,  # [tiles] int32, zero between calls: partials written so far per tile
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
    EVEN_K: tl.constexpr,
    ATOMIC: tl.constexpr,  # add partials into one fp32 tile (L2 atomics) instead of storing each
):
    """Split-K whose last program per tile finishes the tile: no second launch."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coords(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    acc = _split_acc(
        a,
        b,
        pid_m,
        pid_n,
        pid_k,
        M,
        N,
        K,
        stride_am,
        stride_bn,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        SPLIT_K,
        USE_TMA,
        EVEN_K,
    )

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile_off = offs_m[:, None] * N + offs_n[None, :]
    if ATOMIC:
        tl.atomic_add(ws + tile_off, acc, mask=mask, sem="relaxed", scope="gpu")
    else:
        tl.store(ws + pid_k * M * N + tile_off, acc, mask=mask)  # launcher() checks SPLIT_K*M*N < 2^31
    # Every thread's partial is written before the counter moves; the release (acq_rel, GPU scope) makes
    # them visible, with the barrier, to whichever program reads the counter's final value.
    tl.debug_barrier()
    arrived = tl.atomic_add(counters + pid, 1, sem="acq_rel", scope="gpu")
    if ATOMIC and arrived == SPLIT_K - 1:
        # The last of the tile's programs reads one fp32 tile (not SPLIT_K of them) and leaves it zero
        # for the next call; the order of the additions, hence the last bits, varies from call to call.
        tot = tl.load(ws + tile_off, mask=mask, other=0.0, cache_modifier=".cg")
        tl.store(ws + tile_off, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), mask=mask)
        scale = tl.load(scale_a) * tl.load(scale_b)
        tl.store(c + offs_m[:, None] * stride_cm + offs_n[None, :], (tot * scale).to(tl.bfloat16), mask=mask)
        tl.store(counters + pid, 0)
    elif arrived == SPLIT_K - 1:
        # The last of the tile's programs: every partial is in L2 (.cg reads skip this SM's L1). Summed in
        # split order, not arrival order, so the result does not depend on which program came last.
        tot = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            tot += tl.load(ws + s * M * N + tile_off, mask=mask, other=0.0, cache_modifier=".cg")
        scale = tl.load(scale_a) * tl.load(scale_b)
        tl.store(c + offs_m[:, None] * stride_cm + offs_n[None, :], (tot * scale).to(tl.bfloat16), mask=mask)
        tl.store(counters + pid, 0)  # all SPLIT_K programs have arrived: ready for the next call


@triton.jit
def _autotune_gemm_fp8_persistent(
    a,  # TensorDescriptor over [M, K] e4m3
    b,  # TensorDescriptor over [N, K] e4m3
    c,  # [M, N] bf16 output: a pointer, or a TensorDescriptor when TMA_STORE
    scale_a,
    scale_b,
    M,
    N,
    K,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
    FLATTEN: tl.constexpr,
    TMA_STORE: tl.constexpr,  # the output tile leaves by an asynchronous TMA store (clipped at M, N)
):
    """Persistent: program p computes tiles p, p + NUM_PROGRAMS, ... (the tutorial's TMA design)."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    scale = tl.load(scale_a) * tl.load(scale_b)
    # The epilogue derives its tile from its own counter: with FLATTEN the tile and K loops become one
    # pipelined loop, and sharing the prologue's values would keep them alive across it.
    tile_c = start - NUM_PROGRAMS
    for tile in tl.range(start, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_am = pid_m * BLOCK_M
        off_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            # The descriptors' bounds zero-fill ragged M, N and K edges.
            a_tile = a.load([off_am, kt * BLOCK_K])
            b_tile = b.load([off_bn, kt * BLOCK_K])
            acc = tl.dot(a_tile, b_tile.T, acc)
        tile_c += NUM_PROGRAMS
        pid_cm, pid_cn = _tile_coords(tile_c, num_pid_m, num_pid_n, GROUP_M)
        if TMA_STORE:
            c.store([pid_cm * BLOCK_M, pid_cn * BLOCK_N], (acc * scale).to(tl.bfloat16))
        else:
            offs_m = pid_cm * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_cn * BLOCK_N + tl.arange(0, BLOCK_N)
            mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
            c_ptrs = c + offs_m[:, None] * stride_cm + offs_n[None, :]
            tl.store(c_ptrs, (acc * scale).to(tl.bfloat16), mask=mask)


@dataclass
class GemmInputs:
    a: Any  # [M, K] float8_e4m3fn
    b: Any  # [N, K] float8_e4m3fn
    scale_a: Any  # fp32, one element
    scale_b: Any  # fp32, one element

    @property
    def shape(self) -> dict[str, int]:
        return {"M": self.a.shape[0], "N": self.b.shape[0], "K": self.a.shape[1]}


def impl_of(config: Mapping[str, Any]) -> str:
    """The implementation a config runs: its ``IMPL``, ``triton`` without one (configs of earlier spaces)."""
    return str(config.get("IMPL", "triton"))


def _fused(config: Mapping[str, Any]) -> bool:
    """Split-K finished by the tile's last program (SPLIT_REDUCE fused or atomic): one launch."""
    return impl_of(config) == "triton" and config["SPLIT_K"] > 1 and config.get("SPLIT_REDUCE") in FUSED_MODES


def _partials_numel(config: Mapping[str, Any], M: int, N: int) -> int:
    return M * N if config.get("SPLIT_REDUCE") == "atomic" else config["SPLIT_K"] * M * N


def check_config(config: Mapping[str, Any], M: int, N: int, K: int) -> str | None:
    """Why ``config`` cannot run this shape (None if it can): limits of this kernel, not of the space."""
    impl = impl_of(config)
    if impl not in IMPLS:
        return f"unknown IMPL {impl!r} (expected one of {', '.join(IMPLS)})"
    if impl == "scaled_mm":
        if M % 16 or N % 16 or K % 16:
            return f"IMPL=scaled_mm (cuBLASLt's fp8 GEMM) needs M, N and K divisible by 16; got {M}x{N}x{K}"
        return None
    if (impl == "persistent" or config["USE_TMA"]) and K % 16:
        return f"{'IMPL=persistent' if impl == 'persistent' else 'USE_TMA'} needs K % 16 == 0 (TMA row strides are 16-byte aligned); K={K}"
    if impl == "persistent" and config.get("TMA_STORE") and N % 8:
        return f"TMA_STORE needs N % 8 == 0 (16-byte aligned bf16 output rows); N={N}"
    split_k = config["SPLIT_K"] if impl == "triton" else 1
    if max(M, N) * K > _INT32_MAX or split_k * M * N > _INT32_MAX:
        return "shape too large for the kernel's int32 offsets"
    return None


def workspace_numel(config: Mapping[str, Any], M: int, N: int) -> int:
    """float32 elements of the workspace ``config`` needs (0: none): [SPLIT_K, M, N] partials (SPLIT_REDUCE
    atomic: one [M, N] sum, zero before the first call), and for fused/atomic one int32 counter per tile
    after them, zero before the first call (the kernel leaves sums and counters zero again)."""
    if impl_of(config) != "triton" or config["SPLIT_K"] == 1:
        return 0
    n = _partials_numel(config, M, N)
    if _fused(config):
        n += triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    return n


def make_workspace(config: Mapping[str, Any], M: int, N: int, device: Any) -> Any:
    """The workspace ``launcher`` needs for ``config`` (None if none), ready for its first call."""
    import torch

    n = workspace_numel(config, M, N)
    if not n:
        return None
    if config.get("SPLIT_REDUCE") == "atomic":
        return torch.zeros(n, dtype=torch.float32, device=device)
    ws = torch.empty(n, dtype=torch.float32, device=device)
    ws[config["SPLIT_K"] * M * N :].zero_()  # the fused counters (float 0.0 and int32 0 share their bits)
    return ws


def launcher(
    config: Mapping[str, Any], a: Any, b: Any, scale_a: Any, scale_b: Any, out: Any, workspace: Any = None
) -> Callable[[], Any]:
    """A zero-arg callable running ``config`` into ``out`` (and ``workspace``, from ``make_workspace``, for
    split-K); nothing allocated."""
    M, K = a.shape
    N = b.shape[0]
    why = check_config(config, M, N, K)
    if why:
        raise ValueError(why)
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError("A and B must be contiguous along K")
    impl = impl_of(config)
    if impl == "scaled_mm":
        return _scaled_mm_launcher(a, b, scale_a, scale_b, out)
    if impl == "persistent":
        return _persistent_launcher(config, a, b, scale_a, scale_b, out)
    bm, bn, bk, split_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"], config["SPLIT_K"]
    use_tma = bool(config["USE_TMA"])
    need = workspace_numel(config, M, N)
    if need and (workspace is None or workspace.numel() < need):
        raise ValueError(f"SPLIT_K={split_k} needs a float32 workspace of {need} elements (make_workspace)")
    if use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        a_arg: Any = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
        b_arg: Any = TensorDescriptor(b, [N, K], [b.stride(0), 1], [bn, bk])
    else:
        a_arg, b_arg = a, b
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
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split_k)
    if _fused(config):
        if not out.is_contiguous():
            raise ValueError("split-K writes a contiguous output")
        fused = _autotune_gemm_fp8_splitk_fused[grid]
        if not a.is_cuda:
            fused = _named(FUSED_KERNEL, fused)
        part = _partials_numel(config, M, N)
        ws, counters = workspace[:part], workspace[part:need].view(_int32())
        fargs = (
            a_arg,
            b_arg,
            out,
            ws,
            counters,
            scale_a,
            scale_b,
            M,
            N,
            K,
            a.stride(0),
            b.stride(0),
            out.stride(0),
        )

        atomic = config["SPLIT_REDUCE"] == "atomic"

        def run_fused() -> Any:
            fused(*fargs, **meta, ATOMIC=atomic)
            return out

        fused_launch = Launch(_autotune_gemm_fp8_splitk_fused, grid, fargs, {**meta, "ATOMIC": atomic})
        return _with_launches(run_fused, fused_launch)
    # The original kernel, launched exactly as before IMPL existed.
    ws = workspace if split_k > 1 else out  # an unused pointer argument still needs a tensor
    main = _autotune_gemm_fp8_kernel[grid]
    if not a.is_cuda:
        # The interpreter launches no device kernel: name the CPU work so bench_kineto can time it by name,
        # which lets the whole search pipeline run on a CPU (the times say nothing about a GPU).
        main = _named(MAIN_KERNEL, main)
    args = (a_arg, b_arg, out, ws, scale_a, scale_b, M, N, K, a.stride(0), b.stride(0), out.stride(0))
    main_launch = Launch(_autotune_gemm_fp8_kernel, grid, args, meta)
    if split_k == 1:

        def run() -> Any:
            main(*args, **meta)
            return out

        return _with_launches(run, main_launch)
    reduce = _autotune_gemm_fp8_splitk_reduce[(triton.cdiv(M * N, REDUCE_BLOCK),)]
    if not a.is_cuda:
        reduce = _named(REDUCE_KERNEL, reduce)
    if not out.is_contiguous():
        raise ValueError("split-K writes a contiguous output")

    reduce_args = (workspace, out, scale_a, scale_b, M * N)
    reduce_meta = dict(SPLIT_K=split_k, BLOCK=REDUCE_BLOCK, num_warps=4)

    def run_split() -> Any:
        main(*args, **meta)
        reduce(*reduce_args, **reduce_meta)
        return out

    reduce_grid = (triton.cdiv(M * N, REDUCE_BLOCK),)
    return _with_launches(
        run_split,
        main_launch,
        Launch(_autotune_gemm_fp8_splitk_reduce, reduce_grid, reduce_args, reduce_meta),
    )


def _persistent_launcher(
    config: Mapping[str, Any], a: Any, b: Any, scale_a: Any, scale_b: Any, out: Any
) -> Callable[[], Any]:
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = a.shape
    N = b.shape[0]
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    programs = min(tiles, sm_count(a.device.index or 0) if a.is_cuda else _CPU_PROGRAMS)
    kern = _autotune_gemm_fp8_persistent[(programs,)]
    if not a.is_cuda:
        kern = _named(PERSISTENT_KERNEL, kern)
    tma_store = bool(config.get("TMA_STORE", False))
    if tma_store and (out.stride(1) != 1 or (out.stride(0) * out.element_size()) % 16):
        raise ValueError("TMA_STORE needs an output with 16-byte aligned rows")
    args = (
        TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk]),
        TensorDescriptor(b, [N, K], [b.stride(0), 1], [bn, bk]),
        TensorDescriptor(out, [M, N], [out.stride(0), 1], [bm, bn]) if tma_store else out,
        scale_a,
        scale_b,
        M,
        N,
        K,
        out.stride(0),
    )
    meta = dict(
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=config["GROUP_M"],
        NUM_PROGRAMS=programs,
        FLATTEN=bool(config["FLATTEN"]),
        TMA_STORE=tma_store,
        num_stages=config["num_stages"],
        num_warps=config["num_warps"],
    )

    def run() -> Any:
        kern(*args, **meta)
        return out

    return _with_launches(run, Launch(_autotune_gemm_fp8_persistent, (programs,), args, meta))


def _with_launches(run: Callable[[], Any], *launches: Launch) -> Callable[[], Any]:
    """``run``, carrying the Triton launches it makes (``run.launches``): ``GemmFP8.compile`` compiles them
    ahead without launching."""
    run.launches = launches  # type: ignore[attr-defined]
    return run


def _scaled_mm_launcher(a: Any, b: Any, scale_a: Any, scale_b: Any, out: Any) -> Callable[[], Any]:
    import torch

    bt = b.t()
    sa, sb = scale_a.reshape(()), scale_b.reshape(())

    def run() -> Any:
        torch._scaled_mm(a, bt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=out)
        return out

    # cuBLASLt: nothing to compile ahead
    return _with_launches(run if a.is_cuda else _named("nvjet_cpu_scaled_mm", run))


@cache
def sm_count(device_index: int) -> int:
    import torch

    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)


def _int32() -> Any:
    import torch

    return torch.int32


def _named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def call(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(name):
            return fn(*args, **kwargs)

    return call


class GemmFP8(Kernel):
    name = "gemm_fp8"
    kernel_names = (MAIN_KERNEL,)  # of the default config; timed_kernels names each implementation's
    space = "gemm_fp8"
    shape_params = ("M", "N", "K")
    dtypes = {"a": "float8_e4m3fn", "b": "float8_e4m3fn", "out": "bfloat16"}
    # The shared check (autotune.kernel.compare_outputs, the base class's compare): every element within
    # check_ulps bf16 ulps of the reference (relative to max(|ref|, RMS)) and the global similarity within
    # eps^2. fp32 accumulation differs from cuBLASLt's only in summation order and both round to bf16, so
    # a correct config is within 1-2 ulps; a dropped K tile, split or scale is far outside. No extra slack.
    rtol = 0.0
    atol = 0.0
    default_config = {
        "IMPL": "triton",
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
        ws = make_workspace(config, M, N, inputs.a.device)
        run = launcher(config, inputs.a, inputs.b, inputs.scale_a, inputs.scale_b, out, ws)
        if inputs.a.is_cuda:
            # compiled (or loaded from Triton's cache) without a launch: a compile error surfaces here, a
            # fault of the first launch in the timing worker's run, where it is typed
            compile_launches(run.launches)  # type: ignore[attr-defined]
        else:
            run()  # the interpreter compiles nothing: a launch is the only check
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
        impl = impl_of(config)
        if impl == "scaled_mm":
            return (SCALED_MM_KERNEL,)
        if impl == "persistent":
            return (PERSISTENT_KERNEL,)
        if config["SPLIT_K"] == 1:
            return (MAIN_KERNEL,)
        return (FUSED_KERNEL,) if _fused(config) else (MAIN_KERNEL, REDUCE_KERNEL)


def gemm_features(
    config: Mapping[str, Any], shape: Mapping[str, int], facts: Mapping[str, int]
) -> dict[str, float]:
    """Tiles, waves over the SMs and how full the last one is, shared memory per CTA and CTAs per SM,
    K iterations per tile, padding waste, operand reuse (arithmetic intensity of a tile): the features of
    data/kernels/gemm_fp8_wave2.py, the same keys for every implementation. The library's config has no
    tile: it is described as a 128x128x128 tiling with 4 stages and 8 warps (what cuBLASLt's nvjet kernels
    use for most of these shapes); its IMPL value tells it apart."""
    if impl_of(config) == "scaled_mm":
        config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 4, "num_warps": 8}
    M, N, K = shape["M"], shape["N"], shape["K"]
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    sk, stages, warps = config.get("SPLIT_K", 1), config["num_stages"], config["num_warps"]
    sms = max(1, int(facts.get("sm_count", 132)))
    tm, tn = math.ceil(M / bm), math.ceil(N / bn)
    tiles = tm * tn * sk
    waves = tiles / sms
    smem = stages * (bm + bn) * bk + (2 * bm * bn if config.get("TMA_STORE") else 0)  # e4m3: 1 B/element
    per_sm_smem = max(1, int(facts.get("smem_per_block", 232448)) // max(1, smem))
    per_sm_threads = max(1, 2048 // (warps * 32))
    ctas = min(per_sm_smem, per_sm_threads)
    k_iters = math.ceil(K / bk / sk)
    # fp32 partials beyond the first split's (one [M, N] sum for the atomic reduction)
    partial_bytes = (1 if config.get("SPLIT_REDUCE") == "atomic" else sk - 1) * M * N * 4 if sk > 1 else 0
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
        "split_k_bytes": math.log2(1 + partial_bytes),
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

    Without ``config``, the tuned config for this shape (``autotune.best_config``), else the default;
    whichever implementation (``IMPL``) it names runs."""
    import torch

    M, K = a.shape
    N = b.shape[0]
    if config is None:
        from autotune import best_config  # cached in-process after the first lookup of a shape

        config = best_config("gemm_fp8", M=M, N=N, K=K, default=KERNEL.default_config)
    cfg = dict(config)
    if impl_of(cfg) == "triton" and cfg["USE_TMA"] and K % 16:
        cfg["USE_TMA"] = False  # a config tuned on a nearby shape may not suit this K; fall back, don't fail
    if check_config(cfg, M, N, K) and impl_of(cfg) != "triton":
        cfg = dict(KERNEL.default_config)  # e.g. the library's config for a nearby shape, here unaligned
    out = torch.empty(M, N, dtype=torch.bfloat16, device=a.device)
    ws = make_workspace(cfg, M, N, a.device)
    return launcher(cfg, a.contiguous(), b.contiguous(), scale_a, scale_b, out, ws)()
