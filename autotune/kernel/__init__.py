"""Kernel files: the contract a user's kernel file meets, loading it, conformance, Triton helpers.

``from autotune.kernel import Kernel`` is what kernel files write; the Triton helpers
(``autotune.kernel.triton``) are not imported here, so this package never imports triton or torch."""

from autotune.kernel.contract import (
    Kernel,
    LoadedKernel,
    TunableKernel,
    check_metrics,
    compare_outputs,
    compare_tensors,
    load_kernel_file,
    resolve_space,
    source_hash,
)

__all__ = [
    "Kernel",
    "LoadedKernel",
    "TunableKernel",
    "check_metrics",
    "compare_outputs",
    "compare_tensors",
    "load_kernel_file",
    "resolve_space",
    "source_hash",
]
