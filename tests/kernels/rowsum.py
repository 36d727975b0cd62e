"""A CPU row-sum with no FLOP count: a kernel file without ``flops()`` or ``bytes_moved()``, as many
non-GEMM kernels are (issue 43, item 5). ROWSUM_HOOK=raise gives it a ``flops()`` that raises, the case of
a kernel file's optional hook with a bug."""

import os

import torch

from autotune.kernel.contract import Kernel


class RowSum(Kernel):
    name = "rowsum"
    kernel_names = ("rowsum_op",)
    shape_params = ("R", "C")
    default_shapes = ({"R": 64, "C": 256},)
    space = {"name": "rowsum", "params": {"CHUNK": [16, 32, 64, 128]}}
    default_config = {"CHUNK": 16}
    dtypes = {"x": "float32"}
    rtol = 1e-4
    atol = 1e-3

    def make_inputs(self, shape, device):
        return torch.randn(shape["R"], shape["C"], device=device)

    def compile(self, config, x):
        chunk = config["CHUNK"]

        def launch():
            with torch.profiler.record_function("rowsum_op"):
                out = torch.zeros(x.shape[0])
                for i in range(0, x.shape[0], chunk):
                    out[i : i + chunk] = x[i : i + chunk].sum(dim=1)
            return out

        return launch

    def reference(self, x):
        return x.sum(dim=1)


class RowSumBadHook(RowSum):
    def flops(self, shape):
        return shape["rows"] * shape["C"]  # a bug: no dimension "rows"


KERNEL = RowSumBadHook() if os.environ.get("ROWSUM_HOOK") == "raise" else RowSum()
