"""The exception tree. Every failure a user can cause is an ``AutotuneError``; the CLI turns one into a
single line on stderr and exit code 2. Candidate failures (a config that does not compile, crashes or
is wrong) are *not* exceptions at this level: they are trial statuses (see ``autotune.engine.worker``)."""

from __future__ import annotations


class AutotuneError(Exception):
    """Root of every error autotune raises on purpose."""


class BenchError(AutotuneError):
    """The bench could not time what it was asked to time."""


class KernelNotFoundError(BenchError):
    """A kernel name matched no kernel launched by the timed function."""


class AmbiguousKernelError(BenchError):
    """A kernel name matched several distinct kernels and ``with_multiple_kernels`` was not set."""


class SpaceError(AutotuneError):
    """A search-space file or definition is invalid."""


class KernelFileError(AutotuneError):
    """A kernel file is missing, does not import, or does not declare what the contract asks for."""


class KernelHookError(KernelFileError):
    """An optional hook of a kernel file (``flops``, ``bytes_moved``) raised: the measurement stands, the
    figure the hook feeds (TFLOP/s, GB/s) is not shown, and this says why."""


class ShapeError(AutotuneError):
    """A shape string or shape mapping is malformed or does not fit the kernel."""


class SettingsError(AutotuneError):
    """A CLI flag or ``AUTOTUNE_*`` variable has a value autotune cannot use."""


class StoreError(AutotuneError):
    """The results database could not be used."""


class DatabaseUnreachableError(StoreError):
    """The database URL cannot be opened or connected to."""


class SchemaOutOfDateError(StoreError):
    """The database schema is missing or older than this autotune; run ``autotune db upgrade``."""


class NotFoundError(AutotuneError):
    """Nothing is stored for what was asked (e.g. ``autotune best`` for an untuned shape)."""
