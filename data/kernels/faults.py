"""A Triton kernel file whose 8 configs fail in every way a real kernel can on a GPU (issue 24):

    good, good_wide  correct (BLOCK 1024 / 4096)        -> ok
    hang             spins on a flag nobody sets          -> timeout (the run bound, then the worker is killed)
    oom              its workspace asks for 400 GiB       -> launch_failed (out of memory)
    illegal_address  reads 2**40 elements past its input  -> crashed (illegal address); the worker is replaced
    compile_error    a static assert fails                -> compile_failed
    nan              writes NaN                           -> wrong_result
    wrong            writes x * 2 + 1                     -> wrong_result

``compile()`` compiles ahead without launching (``autotune.kernel.triton.compile_ahead``), so a run-time
fault surfaces in the timing worker's run, typed; the compile pool never launches. The default config is
listed 5th: the search measures it first anyway. ``python -m bench faults`` runs the exhaustive search."""

import torch
import triton
import triton.language as tl

from autotune.kernel.contract import Kernel
from autotune.kernel.triton import compile_ahead

CASES = ["hang", "oom", "illegal_address", "compile_error", "good", "good_wide", "nan", "wrong"]


@triton.jit
def faults_kernel(x_ptr, out_ptr, flag_ptr, n, CASE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if CASE == 0:  # hang: a volatile load of a flag that stays 0, so the loop is never optimised away
        i = 0
        while tl.load(flag_ptr, volatile=True) == 0:
            i += 1
    if CASE == 3:
        tl.static_assert(CASE != 3, "compile_error: a config the compiler rejects")
    src = offs.to(tl.int64)
    if CASE == 2:  # far outside any allocation
        src = src + (1 << 40)
    y = tl.load(x_ptr + src, mask=mask) * 2
    if CASE == 6:
        y = y * float("nan")
    if CASE == 7:
        y = y + 1
    tl.store(out_ptr + offs, y, mask=mask)


class Faults(Kernel):
    name = "bench_faults"
    kernel_names = ("faults_kernel",)
    shape_params = ("N",)
    default_shapes = ({"N": 1 << 22},)
    space = {"name": "bench_faults", "params": {"CASE": CASES}}
    default_config = {"CASE": "good"}
    dtypes = {"x": "float32", "out": "float32"}

    def make_inputs(self, shape, device):
        x = torch.randn(shape["N"], device=device)
        return x, torch.zeros(1, dtype=torch.int32, device=device)

    def compile(self, config, inputs):
        x, flag = inputs
        case = config["CASE"]
        if case == "oom":
            torch.empty(400 << 30, dtype=torch.uint8, device=x.device)  # a workspace no GPU has
        out = torch.empty_like(x)
        n = x.numel()
        block = 4096 if case == "good_wide" else 1024
        grid = (triton.cdiv(n, block),)
        meta = dict(CASE=CASES.index(case), BLOCK=block)
        compile_ahead(faults_kernel, grid, x, out, flag, n, **meta)

        def run():
            faults_kernel[grid](x, out, flag, n, **meta)
            return out

        return run

    def reference(self, inputs):
        return inputs[0] * 2

    def flops(self, shape):
        return float(shape["N"])

    def bytes_moved(self, shape):
        return 8.0 * shape["N"]


KERNEL = Faults()
