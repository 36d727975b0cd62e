"""A fast CPU test kernel with a small space (24 configs): for concurrency and fault tests of the engine.

TINY_FIRST_RUN_SLEEP=S makes the first launch in each worker process sleep S seconds (room to kill it from
outside); TINY_COMPILE_SLEEP=S makes every compile sleep S seconds (room to kill a whole search);
TINY_GATE=PATH holds every compile but the default config's until PATH exists (a test sees the search
mid-way, whatever the machine's load)."""

import os
import time

import torch

from autotune.kernel.contract import Kernel

_slept = False


class Tiny(Kernel):
    name = "tiny"
    kernel_names = ("tiny_op",)
    shape_params = ("N",)
    default_shapes = ({"N": 32},)
    space = {"name": "tiny", "params": {"REPS": [1, 2, 3, 4, 5, 6, 7, 8], "MODE": ["a", "b", "c"]}}
    default_config = {"REPS": 1, "MODE": "a"}
    dtypes = {"x": "float32"}

    def make_inputs(self, shape, device):
        return torch.randn(shape["N"], shape["N"], device=device)

    def compile(self, config, x):
        time.sleep(float(os.environ.get("TINY_COMPILE_SLEEP", "0")))
        gate = os.environ.get("TINY_GATE")
        while gate and config != self.default_config and not os.path.exists(gate):
            time.sleep(0.05)
        reps = config["REPS"] * (2 if config["MODE"] == "b" else 1)

        def launch():
            global _slept
            if not _slept:
                _slept = True
                time.sleep(float(os.environ.get("TINY_FIRST_RUN_SLEEP", "0")))
            with torch.profiler.record_function("tiny_op"):
                y = x
                for _ in range(reps):
                    y = (y * 1.0).contiguous()
            return y

        return launch

    def reference(self, x):
        return x

    def flops(self, shape):
        return float(shape["N"] ** 2)

    def features(self, config, shape, facts):
        # work per call, in the units the auto strategy's models see
        return {"work": config["REPS"] * (2 if config["MODE"] == "b" else 1) * shape["N"] ** 2}


KERNEL = Tiny()
