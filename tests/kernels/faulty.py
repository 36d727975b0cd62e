"""A CPU test kernel whose MODE parameter makes a candidate fail in every way a real one can."""

import ctypes
import os
import time

import torch

from autotune.kernel.contract import Kernel

MODES = [
    "ok",
    "slow",
    "compile_error",
    "launch_error",
    "wrong",
    "exit",
    "segfault",
    "hang_compile",
    "hang_run",
]


class Faulty(Kernel):
    name = "faulty"
    kernel_names = ("faulty_op",)
    shape_params = ("N",)
    default_shapes = ({"N": 64},)
    space = {"name": "faulty", "params": {"MODE": MODES}}
    default_config = {"MODE": "slow"}
    dtypes = {"x": "float32"}

    def make_inputs(self, shape, device):
        if shape["N"] == 13:
            raise ValueError("N=13 is unlucky")  # a bug in the kernel file, not a candidate's failure
        return torch.randn(shape["N"], shape["N"], device=device)

    def compile(self, config, x):
        mode = config["MODE"]
        if mode == "compile_error":
            raise RuntimeError("synthetic compile error")
        if mode == "hang_compile":
            time.sleep(3600)

        def launch():
            if mode == "launch_error":
                raise RuntimeError("synthetic launch failure")
            if mode == "exit":
                os._exit(13)
            if mode == "segfault":
                ctypes.string_at(0)
            if mode == "hang_run":
                time.sleep(3600)
            with torch.profiler.record_function("faulty_op"):
                y = x * 2
                if mode == "slow":
                    for _ in range(200):
                        y = (y * 1.0).contiguous()
            return y + 1 if mode == "wrong" else y

        return launch

    def reference(self, x):
        return x * 2

    def flops(self, shape):
        return float(shape["N"] ** 2)


KERNEL = Faulty()
