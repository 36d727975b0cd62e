"""One typed settings object for a search: CLI flag > ``AUTOTUNE_*`` environment variable > default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import SettingsError

SAMPLERS = ("tpe", "random", "grid", "exhaustive")


def _env(name: str, cast: type, default: Any) -> Any:
    raw = os.environ.get(f"AUTOTUNE_{name.upper()}")
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        raise SettingsError(f"AUTOTUNE_{name.upper()}={raw!r} is not a valid {cast.__name__}") from None


def _default(name: str, cast: type, default: Any) -> Any:
    return field(default_factory=lambda: _env(name, cast, default))


@dataclass
class SearchSettings:
    #: new evaluations per shape (configs compiled and timed); reused and invalid ones do not count
    trials: int = _default("trials", int, 40)
    #: wall-clock budget per shape in seconds (0 = none); an evaluation in flight still finishes
    timeout_s: float = _default("timeout", float, 0.0)
    sampler: str = _default("sampler", str, "tpe")
    seed: int | None = _default("seed", int, None)
    #: "cuda", "cuda:N" or "cpu"; "" picks cuda when the worker sees a GPU, else cpu
    device: str = _default("device", str, "")
    num_tests: int = _default("num_tests", int, 30)
    compile_timeout_s: float = _default("compile_timeout", float, 180.0)
    run_timeout_s: float = _default("run_timeout", float, 120.0)
    #: seconds the worker may take to start and import the kernel file
    start_timeout_s: float = _default("start_timeout", float, 300.0)
    #: processes that compile an exhaustive search's configs ahead of timing (0 = compile while timing)
    compile_workers: int = _default("compile_workers", int, 0)
    #: extra environment for the worker process (e.g. TRITON_INTERPRET=1)
    worker_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sampler = self.sampler.lower()
        if self.sampler not in SAMPLERS:
            raise SettingsError(f"unknown sampler {self.sampler!r}: choose one of {', '.join(SAMPLERS)}")
        if self.trials < 1:
            raise SettingsError(f"--trials must be at least 1 (got {self.trials})")
        if self.timeout_s < 0:
            raise SettingsError(f"--timeout must be >= 0 (got {self.timeout_s})")
        if self.compile_workers < 0:
            raise SettingsError(f"--compile-workers must be >= 0 (got {self.compile_workers})")
        if self.num_tests < 1:
            raise SettingsError(f"--num-tests must be at least 1 (got {self.num_tests})")
        if self.device and not (
            self.device == "cpu" or self.device == "cuda" or self.device.startswith("cuda:")
        ):
            raise SettingsError(f"unknown device {self.device!r}: expected cpu, cuda or cuda:N")

    @classmethod
    def from_options(cls, **options: Any) -> SearchSettings:
        """Build from CLI options, where ``None`` means "not given" (fall back to env, then default)."""
        names = {f.name for f in fields(cls)}
        unknown = set(options) - names
        if unknown:
            raise SettingsError(f"unknown settings: {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in options.items() if v is not None})
