"""Kept import path (wave 2) for the ``@triton.autotune`` drop-in; the code lives in
``autotune.runtime.triton_autotune``."""

from autotune.runtime.triton_autotune import DatabaseAutotuner, autotune

__all__ = ["DatabaseAutotuner", "autotune"]
