"""Kept import path (wave 2) for kernel files; the code lives in ``autotune.kernel.triton``."""

from autotune.kernel.triton import TritonKernel, jit_function

__all__ = ["TritonKernel", "jit_function"]
