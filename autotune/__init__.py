"""autotune: find the fastest correct config of a GPU kernel, keep it in a database, read it at run time.

The public API is small and loaded lazily, so ``import autotune`` (and the runtime lookup) stays light:
it imports no optuna, typer, alembic or torch and never initializes CUDA."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError

__version__ = "0.1.0"

__all__ = [
    "AutotuneError",
    "BenchResult",
    "HelionKernel",
    "Kernel",
    "Space",
    "TunableKernel",
    "__version__",
    "bench_kineto",
    "bench_kineto_detailed",
    "best_config",
]

_LAZY = {
    "bench_kineto": ".bench",
    "bench_kineto_detailed": ".bench",
    "BenchResult": ".bench",
    "best_config": ".runtime.lookup",
    "Kernel": ".kernel.contract",
    "HelionKernel": ".kernel.helion",
    "TunableKernel": ".kernel.contract",
    "Space": ".space",
}

if TYPE_CHECKING:
    from autotune.bench import BenchResult, bench_kineto, bench_kineto_detailed
    from autotune.kernel.contract import Kernel, TunableKernel
    from autotune.kernel.helion import HelionKernel
    from autotune.runtime.lookup import best_config
    from autotune.space import Space


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
