"""A CPU test kernel whose configs raise what a faulty CUDA kernel raises, in compile() (where a kernel file
that compiles by launching once sees its first launch's faults) or in the run: a compiler error, an
out-of-memory error (torch's own type) and the sticky CUDA errors (their text, as torch reports them).
Every result carries the worker's pid, so a test sees which process measured what."""

import os
import time

import torch

from autotune.kernel.contract import Kernel

FAULTS = {
    "compiler": lambda: RuntimeError("triton.compiler.errors.CompilationError: at 12:4: unsupported op"),
    "oom": lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 400.00 GiB"),
    "oom_text": lambda: RuntimeError("CUDA error: out of memory"),
    "illegal_address": lambda: RuntimeError(
        "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA`"
    ),
    "misaligned": lambda: RuntimeError("CUDA error: misaligned address"),
    "illegal_instruction": lambda: RuntimeError("CUDA error: an illegal instruction was encountered"),
    "assert": lambda: RuntimeError("CUDA error: device-side assert triggered"),
    "unspecified": lambda: RuntimeError("CUDA error: unspecified launch failure"),
}


class CudaFaults(Kernel):
    name = "cuda_faults"
    kernel_names = ("cuda_faults_op",)
    shape_params = ("N",)
    default_shapes = ({"N": 32},)
    # "slow": the first call returns at once, the timed ones take a while (slow, not hung); "flaky": hangs
    # while CUDA_FAULTS_HANG=1 is set (a busy moment), else fine
    space = {
        "name": "cuda_faults",
        "params": {"FAULT": ["none", "slow", "flaky", *FAULTS], "WHERE": ["compile", "run"]},
    }
    default_config = {"FAULT": "none", "WHERE": "compile"}
    dtypes = {"x": "float32"}

    def make_inputs(self, shape, device):
        return torch.randn(shape["N"], shape["N"], device=device)

    def compile(self, config, x):
        fault = FAULTS.get(config["FAULT"])
        if fault is not None and config["WHERE"] == "compile":
            raise fault()

        calls = []

        def launch():
            if fault is not None:
                raise fault()
            if config["FAULT"] == "flaky" and os.environ.get("CUDA_FAULTS_HANG") == "1":
                time.sleep(3600)
            calls.append(1)
            if config["FAULT"] == "slow" and len(calls) > 1:
                time.sleep(0.5)
            with torch.profiler.record_function("cuda_faults_op"):
                return x * 2

        return launch

    def reference(self, x):
        return x * 2

    def flops(self, shape):
        return float(shape["N"] ** 2)


KERNEL = CudaFaults()
PID = os.getpid()
