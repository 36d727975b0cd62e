"""Kept import path (wave 2) for the conformance check; the code lives in ``autotune.kernel.conformance``."""

from autotune.kernel.conformance import Check, assert_conforms, check_kernel_file, check_kernel_file_isolated

__all__ = ["Check", "assert_conforms", "check_kernel_file", "check_kernel_file_isolated"]
