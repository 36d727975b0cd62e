"""Every setting autotune reads, in one place: CLI flag > ``AUTOTUNE_*`` environment variable > default.

Typed env helpers (as Helion's ``runtime/settings.py``) parse a value once and fail with one line naming
the variable; ``check_environment()`` parses every variable at start-up, so a bad ``AUTOTUNE_FLUSH_BYTES``
stops the command (exit 2) instead of making every trial ``launch_failed`` in the worker. ``ENV_VARS``
is the documented list (the README's table mirrors it; a test keeps them in step)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from autotune.devices import parse_devices
from autotune.errors import SettingsError

T = TypeVar("T")

#: every AUTOTUNE_* variable the code reads, with what it does
ENV_VARS: dict[str, str] = {
    "AUTOTUNE_DB": "database URL or SQLite path (default: $AUTOTUNE_HOME/autotune.db)",
    "AUTOTUNE_HOME": "folder of the default SQLite database",
    "AUTOTUNE_TRIALS": "new evaluations per shape (default 40)",
    "AUTOTUNE_TIMEOUT": "wall-clock seconds per shape, 0 = none (default 0)",
    "AUTOTUNE_STRATEGY": "search strategy: auto, tpe, random, exhaustive (grid) (default auto)",
    "AUTOTUNE_RETIME_TOP": "finalists re-timed before a best is declared (default 3; 0 = none)",
    "AUTOTUNE_RETIME_ROUNDS": "interleaved rounds of re-timing the finalists (default 3)",
    "AUTOTUNE_SEED": "strategy seed",
    "AUTOTUNE_DEVICES": "devices to time on: cuda, cuda:0,cuda:1, all or cpu (default: cuda if present)",
    "AUTOTUNE_NUM_TESTS": "timed calls per measurement (default 30)",
    "AUTOTUNE_COMPILE_TIMEOUT": "seconds a config may take to compile (default 180)",
    "AUTOTUNE_RUN_TIMEOUT": "seconds a config may take to check and time (default 120)",
    "AUTOTUNE_START_TIMEOUT": "seconds a worker may take to start and import the kernel file (default 120)",
    "AUTOTUNE_COMPILE_WORKERS": "processes compiling ahead of the timing workers (default: cores - 1)",
    "AUTOTUNE_LEASE": "seconds a claim stays valid without renewal (default 30)",
    "AUTOTUNE_FLUSH_BYTES": "bytes written to flush the caches before each timed call (default: 2x L2 on a GPU; 2x the last-level cache, at most 128 MiB, on a CPU)",
    "AUTOTUNE_USE_NVIDIA_TOOLS": "1 under Nsight/Compute Sanitizer: the bench returns placeholders",
    "AUTOTUNE_SPACES_DIR": "extra folder searched for search_spaces/*.yaml",
    "AUTOTUNE_LOOKUP_TIMEOUT": "seconds best_config's first call waits for the database (default 1)",
    "AUTOTUNE_LOOKUP_RETRY": "seconds best_config remembers a failed database before retrying (default 60)",
    "AUTOTUNE_RECORD": "1: best_config records shapes it had no tuned config for (nightly jobs tune them); or a database URL to record into",
}


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return None if raw is None or raw.strip() == "" else raw.strip()


def _bad(name: str, raw: str, what: str) -> SettingsError:
    return SettingsError(f"{name}={raw[:60]!r} is not {what}")


def env_int(name: str, default: T, *, minimum: int | None = None) -> int | T:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, "an integer") from None
    if minimum is not None and value < minimum:
        raise _bad(name, raw, f"an integer >= {minimum}")
    return value


def env_float(name: str, default: T, *, minimum: float = 0.0, positive: bool = False) -> float | T:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise _bad(name, raw, "a number") from None
    check_number(name, value, minimum=minimum, positive=positive)
    return value


def env_str(name: str, default: T) -> str | T:
    raw = _raw(name)
    return default if raw is None else raw


def env_bool(name: str, default: bool = False) -> bool:
    raw = _raw(name)
    return default if raw is None else raw.lower() not in ("0", "false", "no", "off")


def check_number(what: str, value: float, *, minimum: float = 0.0, positive: bool = False) -> float:
    """Refuse NaN, infinities and out-of-range values with one line."""
    if math.isnan(value) or math.isinf(value):
        raise SettingsError(f"{what} must be a finite number (got {value})")
    if positive and value <= 0:
        raise SettingsError(f"{what} must be > 0 (got {value})")
    if value < minimum:
        raise SettingsError(f"{what} must be >= {minimum} (got {value})")
    return value


def flush_bytes() -> int | None:
    """``AUTOTUNE_FLUSH_BYTES`` as a positive int (``1e9`` accepted), or None for the device default."""
    raw = _raw("AUTOTUNE_FLUSH_BYTES")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise _bad("AUTOTUNE_FLUSH_BYTES", raw, "a number of bytes") from None
    if math.isnan(value) or math.isinf(value) or value < 1 or value > 2**40:
        raise _bad("AUTOTUNE_FLUSH_BYTES", raw, "a number of bytes between 1 and 2**40")
    return int(value)


def default_compile_workers() -> int:
    """Cores - 1: one core stays with the orchestrator and the timing workers."""
    return max(1, (os.cpu_count() or 2) - 1)


def _default(env: str, getter: Callable[..., Any], default: Any, **kw: Any) -> Any:
    return field(default_factory=lambda: getter(env, default, **kw))


@dataclass
class SearchSettings:
    #: new evaluations per shape (configs compiled and timed); reused and invalid ones do not count
    trials: int = _default("AUTOTUNE_TRIALS", env_int, 40, minimum=1)
    #: wall-clock budget per shape in seconds (0 = none); evaluations in flight still finish
    timeout_s: float = _default("AUTOTUNE_TIMEOUT", env_float, 0.0)
    strategy: str = _default("AUTOTUNE_STRATEGY", env_str, "auto")
    seed: int | None = _default("AUTOTUNE_SEED", env_int, None)
    #: "" (cuda when the worker sees a GPU, else cpu), "cpu", "cuda", "cuda:0,cuda:1" or "all"
    devices: str = _default("AUTOTUNE_DEVICES", env_str, "")
    num_tests: int = _default("AUTOTUNE_NUM_TESTS", env_int, 30, minimum=1)
    compile_timeout_s: float = _default("AUTOTUNE_COMPILE_TIMEOUT", env_float, 180.0, positive=True)
    run_timeout_s: float = _default("AUTOTUNE_RUN_TIMEOUT", env_float, 120.0, positive=True)
    #: seconds a worker may take to start and import the kernel file
    start_timeout_s: float = _default("AUTOTUNE_START_TIMEOUT", env_float, 120.0, positive=True)
    #: processes compiling ahead of the timing workers (0 = each timing worker compiles for itself;
    #: None = automatic)
    compile_workers: int | None = _default("AUTOTUNE_COMPILE_WORKERS", env_int, None, minimum=0)
    #: seconds a claim stays valid without renewal; renewed every third of it while the search lives
    lease_s: float = _default("AUTOTUNE_LEASE", env_float, 30.0, positive=True)
    #: the top configs measured again, interleaved over rounds on one device, before a best is declared
    retime_top: int = _default("AUTOTUNE_RETIME_TOP", env_int, 3, minimum=0)
    retime_rounds: int = _default("AUTOTUNE_RETIME_ROUNDS", env_int, 3, minimum=1)
    #: a JSON file listing the configs to evaluate (exactly those, in order, each checked against the
    #: space), instead of proposals from the strategy's model: e.g. an existing ``triton.Config`` list
    configs_file: str | None = None
    #: extra environment for the worker processes (e.g. TRITON_INTERPRET=1)
    worker_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from autotune.search import strategy_names

        self.strategy = self.strategy.lower()
        if self.strategy not in strategy_names():
            raise SettingsError(
                f"unknown strategy {self.strategy!r}: choose one of {', '.join(strategy_names())}"
            )
        if self.trials < 1:
            raise SettingsError(f"--trials must be at least 1 (got {self.trials})")
        if self.num_tests < 1:
            raise SettingsError(f"--num-tests must be at least 1 (got {self.num_tests})")
        check_number("--timeout", self.timeout_s)
        for name in ("compile_timeout_s", "run_timeout_s", "start_timeout_s", "lease_s"):
            check_number(f"--{name.removesuffix('_s').replace('_', '-')}", getattr(self, name), positive=True)
        # None: automatic (cores - 1 beside GPUs, 0 beside a CPU timing worker), decided by the tuner
        if self.compile_workers is not None and self.compile_workers < 0:
            raise SettingsError(f"--compile-workers must be >= 0 (got {self.compile_workers})")
        parse_devices(self.devices)  # syntax only: "all" is resolved by the first worker

    @classmethod
    def from_options(cls, **options: Any) -> SearchSettings:
        """Build from CLI options, where ``None`` means "not given" (fall back to env, then default)."""
        names = {f.name for f in fields(cls)}
        unknown = set(options) - names
        if unknown:
            raise SettingsError(f"unknown settings: {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in options.items() if v is not None})


def check_environment() -> None:
    """Parse every AUTOTUNE_* variable once (CLI start-up): the first bad one is one line, exit 2."""
    SearchSettings()
    flush_bytes()
