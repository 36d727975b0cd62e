"""Compiling ahead without launching (``autotune.kernel.triton.compile_ahead``): on a CPU, Triton's real
sm_90 pipeline compiles the launches of examples/softmax.py (through ``TritonKernel``) and of every
implementation of examples/gemm_fp8.py (``run.launches``) for an H200 target; on a GPU, ``compile()`` of
those kernel files launches no kernel of theirs and the launcher it returns still matches the reference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[1]

GEMM_CONFIGS = {
    "default": {},
    "tma": {"USE_TMA": True},
    "split_kernel": {"SPLIT_K": 2, "SPLIT_REDUCE": "kernel", "BLOCK_K": 64},
    "split_fused": {"SPLIT_K": 2, "SPLIT_REDUCE": "fused", "BLOCK_K": 64},
    "persistent": {"IMPL": "persistent", "FLATTEN": True, "TMA_STORE": True, "num_stages": 3},
    "scaled_mm": "scaled_mm",
}


def _target():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("compiles real Triton code: run without TRITON_INTERPRET")
    pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    target = GPUTarget("cuda", 90, 32)
    try:
        make_backend(target)
    except Exception as exc:  # a triton build without the CUDA backend
        pytest.skip(f"no CUDA backend to cross-compile with: {exc}")
    return target


def _gemm():
    from autotune.kernel.contract import load_kernel_file

    loaded = load_kernel_file(str(ROOT / "examples" / "gemm_fp8.py"))
    import sys

    return loaded.kernel, sys.modules[type(loaded.kernel).__module__]


def _gemm_config(kernel, over):
    if over == "scaled_mm":
        return {"IMPL": "scaled_mm"}
    return {**kernel.default_config, **over}


def test_softmax_compiles_ahead_for_sm90_and_a_compile_error_raises():
    target = _target()
    import torch
    from triton.compiler.errors import CompilationError

    from autotune.kernel.triton import compile_ahead
    from autotune.space.triton import config_dict
    from examples.softmax import CONFIGS, KERNEL, softmax_kernel

    x = torch.empty(64, 1000, dtype=torch.float16)
    out = torch.empty_like(x)
    config = config_dict(CONFIGS[0])
    pos, kwargs, grid = KERNEL._call(config, {"x": x}, out)
    compiled = compile_ahead(KERNEL.fn, grid, *pos, target=target, **kwargs)
    assert compiled.metadata.num_warps == config["num_warps"] and compiled.asm["cubin"]
    with pytest.raises(CompilationError, match="power of 2"):
        compile_ahead(softmax_kernel, grid, *pos, target=target, **{**kwargs, "BLOCK_SIZE": 1000})


@pytest.mark.parametrize("case", list(GEMM_CONFIGS))
def test_gemm_fp8_launches_compile_ahead_for_sm90(case):
    target = _target()
    import torch

    from autotune.kernel.triton import compile_launches

    kernel, mod = _gemm()
    config = _gemm_config(kernel, GEMM_CONFIGS[case])
    M, N, K = 128, 256, 512
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    b = torch.empty(N, K, dtype=torch.float8_e4m3fn)
    s = torch.ones((), dtype=torch.float32)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    run = mod.launcher(config, a, b, s, s, out, mod.make_workspace(config, M, N, "cpu"))
    compiled = compile_launches(run.launches, target)
    expected = {"split_kernel": 2, "scaled_mm": 0}.get(case, 1)  # + the reduce kernel; cuBLASLt: none
    assert len(compiled) == expected and all(c.asm["cubin"] for c in compiled)


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(GEMM_CONFIGS))
def test_gemm_fp8_compile_launches_nothing_on_the_gpu(case):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from torch.profiler import ProfilerActivity, profile

    kernel, _ = _gemm()
    config = _gemm_config(kernel, GEMM_CONFIGS[case])
    inputs = kernel.make_inputs({"M": 128, "N": 256, "K": 512}, "cuda")
    ref = kernel.reference(inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run = kernel.compile(config, inputs)
        torch.cuda.synchronize()
    ours = [e.name for e in prof.events() if "gemm_fp8" in e.name or "nvjet" in e.name or "gemm" in e.name]
    assert ours == [], ours
    assert kernel.compare(run(), ref) is None
