"""Any kernel file with chosen configs made really slower, through environment variables: what the nightly
benchmark (``python -m bench nightly_noise``) uses to check that a real slowdown of a stored best is called
a regression and an unchanged machine is not.

- ``AUTOTUNE_SLOWED_KERNEL``: the kernel file wrapped (required), e.g. ``examples/matmul_cpu.py``;
- ``AUTOTUNE_SLOWED_CONFIGS``: a JSON list of configs to slow (unset or empty: nothing is slowed, and the
  file behaves exactly as the wrapped one);
- ``AUTOTUNE_SLOWED_FACTOR``: how much slower (default 1.3).

A slowed config launches the wrapped kernel once more on a share (factor - 1) of its calls, spread evenly
(every window of calls holds its share): the timed kernel's launches per call, hence its measured time,
grow by that factor on any device, through the same timing path as every measurement. The extra launch
re-runs the same launcher on the same inputs (its output is discarded): the wrapped kernel's launch must be
idempotent (no accumulation into its output across launches)."""

import json
import math
import os

from autotune.kernel.contract import load_kernel_file

_LOADED = load_kernel_file(os.environ["AUTOTUNE_SLOWED_KERNEL"])
_SLOWED = [dict(c) for c in json.loads(os.environ.get("AUTOTUNE_SLOWED_CONFIGS") or "[]")]
_FACTOR = float(os.environ.get("AUTOTUNE_SLOWED_FACTOR", "1.3"))


class Slowed:
    """The wrapped kernel object, every attribute passed through, but ``compile`` of a slowed config."""

    def __init__(self, loaded):
        self._inner = loaded.kernel
        self.space = loaded.space_def  # resolved where the wrapped file lives

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def compile(self, config, inputs):
        launch = self._inner.compile(config, inputs)
        if dict(config) not in _SLOWED or _FACTOR <= 1.0:
            return launch
        extra, calls = _FACTOR - 1.0, [0]

        def slowed():
            out = launch()
            n = calls[0] = calls[0] + 1
            for _ in range(math.floor(n * extra) - math.floor((n - 1) * extra)):
                launch()
            return out

        return slowed


KERNEL = Slowed(_LOADED)
