"""Every setting autotune reads, in one place: CLI flag > ``AUTOTUNE_*`` environment variable > default.

No other module reads an ``AUTOTUNE_*`` variable (a test holds it so). Typed env helpers (as Helion's
``runtime/settings.py``) parse a value once and fail with one line naming the variable;
``check_environment()`` parses every variable of a command at start-up, so a bad ``AUTOTUNE_FLUSH_BYTES``
stops the command (exit 2) instead of making every trial ``launch_failed`` in the worker.

The runtime lookup runs inside users' programs and must never raise for a setting: it reads its variables
leniently (``lenient=True``: a bad value is one warning, and the default). This module imports nothing
heavy (the lookup imports it), nor the search registry: strategy names are checked where the registry
lives (``autotune.search.strategy_names``, by the CLI). ``ENV_VARS`` is the documented list (docs/settings.md's
table mirrors it; a test keeps them in step)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from autotune.devices import parse_devices
from autotune.errors import SettingsError

T = TypeVar("T")
log = logging.getLogger(__name__)

#: every AUTOTUNE_* variable the code reads, with what it does
ENV_VARS: dict[str, str] = {
    "AUTOTUNE_DB": "database URL or SQLite path (default: $AUTOTUNE_HOME/autotune.db)",
    "AUTOTUNE_HOME": "folder of the default SQLite database",
    "AUTOTUNE_TRIALS": "new evaluations per shape, exactly; auto or unset: the stopping rule decides (AUTOTUNE_STOP_MIN, _MAX, _WALL, _PATIENCE, _NOISE)",
    "AUTOTUNE_STOP_MIN": "stopping rule: evaluations of a shape before it may stop (default 30, or every valid config when fewer)",
    "AUTOTUNE_STOP_MAX": "stopping rule: most new evaluations per shape (default 300)",
    "AUTOTUNE_STOP_WALL": "stopping rule: most wall-clock seconds per shape (default 300; 0 = none)",
    "AUTOTUNE_STOP_PATIENCE": "stopping rule: the last N evaluations must bring nothing beyond the noise (default 20)",
    "AUTOTUNE_STOP_NOISE": "stopping rule: the least relative noise of a measurement (default 0.01)",
    "AUTOTUNE_STOP_NEIGHBOURS": "stopping rule: measure the best's one-move neighbours before stopping (default 1; 0 = off)",
    "AUTOTUNE_TIMEOUT": "wall-clock seconds per shape, 0 = none (default 0)",
    "AUTOTUNE_STRATEGY": "search strategy: auto, tpe, random, exhaustive (grid) (default auto)",
    "AUTOTUNE_RETIME_TOP": "finalists re-timed before a best is declared (default 3; 0 = none)",
    "AUTOTUNE_RETIME_ROUNDS": "interleaved rounds of re-timing the finalists, the stored best, any would-be best and the default config (default 3): a best needs 3 samples (its search sample and 2 rounds), a speed-up's interval its paired rounds",
    "AUTOTUNE_UNRELIABLE_SPREAD": "a best whose measurements spread more than this fraction of its median is flagged unreliable (default 0.5)",
    "AUTOTUNE_SEED": "strategy seed",
    "AUTOTUNE_DEVICES": "devices to time on: cuda, cuda:0,cuda:1, all or cpu (default: cuda if present)",
    "AUTOTUNE_NUM_TESTS": "timed calls per measurement (default 30)",
    "AUTOTUNE_RACE": "a config whose first AUTOTUNE_RACE_CALLS timed calls are over this multiple of the shape's best so far is not timed further (default 1.25; 0 = off: every measurement takes AUTOTUNE_NUM_TESTS calls)",
    "AUTOTUNE_RACE_CALLS": "timed calls before a measurement may stop as too slow (default 10)",
    "AUTOTUNE_COMPILE_TIMEOUT": "seconds a config may take to compile (default 180)",
    "AUTOTUNE_RUN_TIMEOUT": "seconds a config may take to check and time (default 120)",
    "AUTOTUNE_FIRST_RUN_TIMEOUT": "seconds a config may take to check and time until some config of the shape has a time (default 10; never more than the run timeout)",
    "AUTOTUNE_START_TIMEOUT": "seconds a worker may take to start and import the kernel file (default 120)",
    "AUTOTUNE_COMPILE_WORKERS": "processes compiling ahead of the timing workers (default: cores - 1)",
    "AUTOTUNE_LEASE": "seconds a claim stays valid without renewal (default 30)",
    "AUTOTUNE_FLUSH_BYTES": "bytes written to flush the caches before each timed call (default: 2x L2 on a GPU; 2x the last-level cache, at most 128 MiB, on a CPU)",
    "AUTOTUNE_THROTTLE_THRESHOLD": "a measurement whose lowest SM clock is below this share of the GPU's maximum is re-taken (default 0.75, as nvbench's --throttle-threshold)",
    "AUTOTUNE_THROTTLE_RECOVERY": "seconds to wait before re-taking a throttled measurement (default 0.05)",
    "AUTOTUNE_THROTTLE_RETAKES": "times a throttled measurement is re-taken before it is stored flagged throttled (default 3)",
    "AUTOTUNE_WARM_CALLS": "unrecorded calls before a GPU measurement's timed ones when the timing worker measured within AUTOTUNE_WARM_WITHIN seconds (default 5; 0 = always as many as timed, the seed recipe's round)",
    "AUTOTUNE_WARM_WITHIN": "seconds after a timing worker's last measurement that its GPU counts as warm (default 1)",
    "AUTOTUNE_USE_NVIDIA_TOOLS": "1 under Nsight/Compute Sanitizer: the bench returns placeholders",
    "AUTOTUNE_SPACES_DIR": "extra folder searched for search_spaces/*.yaml",
    "AUTOTUNE_LOOKUP_TIMEOUT": "seconds best_config's first call waits for the database (default 1)",
    "AUTOTUNE_LOOKUP_RETRY": "seconds between best_config's re-reads of the database after a failed load, and of an export file for a shape that fell back (default 60)",
    "AUTOTUNE_LOOKUP_RECHECK": "seconds between best_config's looks (one small query) whether a kernel's bests changed in the database while a shape falls back: a newly tuned best is used within about this (default 2)",
    "AUTOTUNE_PRINT": "1: the @autotune drop-in prints the config it chose for each key once (as TRITON_PRINT_AUTOTUNING)",
    "AUTOTUNE_TRACE_STARTUP": "1: a search prints a timeline of its start-up and end (what ran in which process, when) on stderr",
    "AUTOTUNE_RECORD": "1: best_config records shapes it had no tuned config for (nightly jobs tune them); or a database URL to record into",
    "AUTOTUNE_SERVE_POLL": "seconds an idle `autotune serve` waits between looks at the queue (default 5 where Postgres NOTIFY wakes it, 0.1 on SQLite)",
    "AUTOTUNE_SERVE_LEASE": "seconds a request taken by `autotune serve`, and its heartbeat, stay valid without renewal; a service killed with -9 has its request taken over after it (default 60)",
}


#: values of an on/off variable that mean off (besides unset or empty)
_OFF = ("0", "false", "no", "off")
#: (variable, value) pairs a lenient read has warned about: each is said once per process
_warned: set[tuple[str, str]] = set()


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return None if raw is None or raw.strip() == "" else raw.strip()


def _bad(name: str, raw: str, what: str) -> SettingsError:
    return SettingsError(f"{name}={raw[:60]!r} is not {what}")


def _read(name: str, default: T, parse: Callable[[str], Any], lenient: bool) -> Any:
    """``parse`` of the variable's value, ``default`` when unset. A bad value raises ``SettingsError``, or
    with ``lenient`` (the runtime lookup, inside users' programs) warns once and gives ``default``."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except SettingsError as e:
        if not lenient:
            raise
        if (name, raw) not in _warned:
            _warned.add((name, raw))
            log.warning("autotune: %s; using the default (%s). This warning is shown once.", e, default)
        return default


def env_int(name: str, default: T, *, minimum: int | None = None, lenient: bool = False) -> int | T:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise _bad(name, raw, "an integer") from None
        if minimum is not None and value < minimum:
            raise _bad(name, raw, f"an integer >= {minimum}")
        return value

    return _read(name, default, parse, lenient)


def env_float(
    name: str, default: T, *, minimum: float = 0.0, positive: bool = False, lenient: bool = False
) -> float | T:
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise _bad(name, raw, "a number") from None
        return check_number(name, value, minimum=minimum, positive=positive)

    return _read(name, default, parse, lenient)


def env_str(name: str, default: T) -> str | T:
    raw = _raw(name)
    return default if raw is None else raw


def env_bool(name: str, default: bool = False) -> bool:
    raw = _raw(name)
    return default if raw is None else raw.lower() not in _OFF


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

    def parse(raw: str) -> int:
        try:
            value = float(raw)
        except ValueError:
            raise _bad("AUTOTUNE_FLUSH_BYTES", raw, "a number of bytes") from None
        if math.isnan(value) or math.isinf(value) or value < 1 or value > 2**40:
            raise _bad("AUTOTUNE_FLUSH_BYTES", raw, "a number of bytes between 1 and 2**40")
        return int(value)

    return _read("AUTOTUNE_FLUSH_BYTES", None, parse, lenient=False)


@dataclass(frozen=True)
class WarmUp:
    """How many unrecorded calls precede a GPU measurement's timed ones (``bench.bench_kineto_detailed``).

    The seed recipe's whole round (as many as timed) is there for the GPU's state: CUPTI's start-up and the
    clocks' ramp after idle. A timing worker that measured a moment ago has that state already, and on an
    H100 the round was 9 of a measurement's 21 ms (gemm_fp8, mean kernel 121 us):
    then a short warm-up does, and the clocks watch (``throttle``) still re-takes a measurement on a low clock."""

    #: calls before the timed ones when the GPU is warm (0: always the whole round)
    calls: int = 5
    #: the GPU counts as warm this long after the process's last measurement ended (seconds)
    within_s: float = 1.0


def warm_up() -> WarmUp:
    """``AUTOTUNE_WARM_CALLS`` (>= 0; 0 keeps the seed recipe's whole round) and ``AUTOTUNE_WARM_WITHIN``
    (seconds)."""
    default = WarmUp()
    return WarmUp(
        env_int("AUTOTUNE_WARM_CALLS", default.calls, minimum=0),
        env_float("AUTOTUNE_WARM_WITHIN", default.within_s),
    )


@dataclass(frozen=True)
class Throttle:
    """When a GPU measurement counts as throttled and how it is re-taken (``autotune.clocks.measure``)."""

    #: share of the device's maximum SM clock below which a measurement is re-taken (nvbench's 0.75)
    threshold: float = 0.75
    #: seconds to let the clock recover before re-taking (nvbench's --throttle-recovery-delay is 0.05 s)
    recovery_s: float = 0.05
    #: re-takes before the measurement is kept, flagged throttled
    retakes: int = 3


def throttle() -> Throttle:
    """``AUTOTUNE_THROTTLE_THRESHOLD`` (0 < x <= 1), ``_RECOVERY`` (seconds) and ``_RETAKES``."""
    default = Throttle()
    threshold = env_float("AUTOTUNE_THROTTLE_THRESHOLD", default.threshold)
    if not 0 < threshold <= 1:
        raise SettingsError(f"AUTOTUNE_THROTTLE_THRESHOLD must be > 0 and <= 1 (got {threshold})")
    return Throttle(
        threshold,
        env_float("AUTOTUNE_THROTTLE_RECOVERY", default.recovery_s),
        env_int("AUTOTUNE_THROTTLE_RETAKES", default.retakes, minimum=0),
    )


#: Set (to anything but "" or "0") when running under Nsight Systems / Compute Sanitizer: internal
#: profiling conflicts with those tools, so the bench returns placeholder 1s, marked as not measured.
NVIDIA_TOOLS_ENV = ("AUTOTUNE_USE_NVIDIA_TOOLS", "DG_USE_NVIDIA_TOOLS")


def nvidia_tools_active() -> bool:
    return any(os.environ.get(v, "") not in ("", "0") for v in NVIDIA_TOOLS_ENV)


def trace_startup() -> str | None:
    """``AUTOTUNE_TRACE_STARTUP``: None when off; else "1" in the command the user started, or (inherited by
    its worker processes) the file the command's timeline collects every process's spans in."""
    raw = _raw("AUTOTUNE_TRACE_STARTUP")
    return None if raw is None or raw.lower() in _OFF else raw


def share_trace_startup(path: str) -> None:
    """Hand the timeline's file to every process started from now on (they inherit the environment)."""
    os.environ["AUTOTUNE_TRACE_STARTUP"] = path


def database() -> str | None:
    """``AUTOTUNE_DB``: a database URL, a SQLite path or an export file; None: the default SQLite file."""
    return env_str("AUTOTUNE_DB", None)


def home() -> Path:
    """The folder of the default SQLite database: ``$AUTOTUNE_HOME``, else ``$XDG_DATA_HOME/autotune``
    (``~/.local/share/autotune``)."""
    configured = env_str("AUTOTUNE_HOME", None)
    if configured is not None:
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser() / "autotune"


def spaces_dir() -> str | None:
    """``AUTOTUNE_SPACES_DIR``: a folder searched first for ``<name>.yaml`` spaces."""
    return env_str("AUTOTUNE_SPACES_DIR", None)


def record() -> str | None:
    """``AUTOTUNE_RECORD``: None when off (unset, 0, false, no, off), else its value: 1 (true, yes, on:
    record into the database the lookup reads) or the URL of the database to record into."""
    raw = env_str("AUTOTUNE_RECORD", None)
    return None if raw is None or raw.lower() in _OFF else raw


def print_choices() -> bool:
    """``AUTOTUNE_PRINT``: the drop-in prints each key's chosen config (an on/off value: never raises)."""
    return env_bool("AUTOTUNE_PRINT")


#: seconds best_config's first lookup of a (database, kernel, device) waits for its rows
LOOKUP_TIMEOUT_S = 1.0
#: seconds best_config remembers a failed database before one lookup tries again; also the least time
#: between two re-reads of a (database, kernel, device) for shapes that fell back (one knob: both say how
#: often a process may go back to its database)
LOOKUP_RETRY_S = 60.0


def lookup_timeout_s() -> float:
    """``AUTOTUNE_LOOKUP_TIMEOUT``, read leniently (the lookup never raises for a setting)."""
    return env_float("AUTOTUNE_LOOKUP_TIMEOUT", LOOKUP_TIMEOUT_S, lenient=True)


def lookup_retry_s() -> float:
    """``AUTOTUNE_LOOKUP_RETRY``, read leniently (the lookup never raises for a setting)."""
    return env_float("AUTOTUNE_LOOKUP_RETRY", LOOKUP_RETRY_S, lenient=True)


#: seconds between two looks (one small aggregate query) whether a kernel's bests changed, while some
#: shape fell back: a newly tuned best reaches the process within about this (issue 45)
LOOKUP_RECHECK_S = 2.0


def lookup_recheck_s() -> float:
    """``AUTOTUNE_LOOKUP_RECHECK``, read leniently (the lookup never raises for a setting)."""
    return env_float("AUTOTUNE_LOOKUP_RECHECK", LOOKUP_RECHECK_S, lenient=True)


@dataclass(frozen=True)
class ServeSettings:
    """``autotune serve``'s loop: the idle poll and the lease of a taken request (renewed every third of
    it, with the heartbeat)."""

    #: None: 5 s where a Postgres NOTIFY wakes the service at once, 0.1 s on SQLite (no NOTIFY; a look at
    #: a local file's queue costs a fraction of a millisecond, and a search handed over waits for it)
    poll_s: float | None = None
    lease_s: float = 60.0

    def poll_for(self, notified: bool) -> float:
        """The idle poll of a service that a NOTIFY wakes (``notified``) or not."""
        return self.poll_s if self.poll_s is not None else (5.0 if notified else 0.1)

    @property
    def beat_s(self) -> float:
        return min(self.poll_s or 5.0, self.lease_s / 3)


#: the longest serve poll or lease, in seconds
MAX_SERVE_S = 7 * 86400.0


def serve_settings() -> ServeSettings:
    """``AUTOTUNE_SERVE_POLL`` and ``AUTOTUNE_SERVE_LEASE`` (both > 0)."""
    default = ServeSettings()
    poll = env_float("AUTOTUNE_SERVE_POLL", default.poll_s, positive=True)
    lease = env_float("AUTOTUNE_SERVE_LEASE", default.lease_s, positive=True)
    # a lease is added to datetimes: 1e308 s overflowed there (exit 3, "internal error") at the first take
    for name, value in (("AUTOTUNE_SERVE_POLL", poll), ("AUTOTUNE_SERVE_LEASE", lease)):
        if value is not None and value > MAX_SERVE_S:
            raise SettingsError(f"{name} must be at most {MAX_SERVE_S:g} s (a week); got {value:g}")
    return ServeSettings(poll, lease)


def default_compile_workers() -> int:
    """Cores - 1: one core stays with the orchestrator and the timing workers."""
    return max(1, (os.cpu_count() or 2) - 1)


def _default(env: str, getter: Callable[..., Any], default: Any, **kw: Any) -> Any:
    return field(default_factory=lambda: getter(env, default, **kw))


@dataclass
class SearchSettings:
    #: new evaluations per shape (configs compiled and timed), exactly; reused and invalid ones do not
    #: count. None: the stopping rule decides (``autotune.search.stopping``, the ``stop_*`` settings)
    trials: int | None = field(default_factory=lambda: trials_env())
    #: wall-clock budget per shape in seconds (0 = none); evaluations in flight still finish
    timeout_s: float = _default("AUTOTUNE_TIMEOUT", env_float, 0.0)
    strategy: str = _default("AUTOTUNE_STRATEGY", env_str, "auto")
    seed: int | None = _default("AUTOTUNE_SEED", env_int, None)
    #: "" (cuda when the worker sees a GPU, else cpu), "cpu", "cuda", "cuda:0,cuda:1" or "all"
    devices: str = _default("AUTOTUNE_DEVICES", env_str, "")
    num_tests: int = _default("AUTOTUNE_NUM_TESTS", env_int, 30, minimum=1)
    #: racing: a measurement whose first ``race_calls`` timed calls put its config over ``race`` x the
    #: shape's best so far stops there (0 = off). Such a config cannot be the best, and those calls already
    #: rank it within ~1 %; the rest of ``num_tests`` would only add precision nobody reads (on an H100, a
    #: measurement's 30 timed calls were ~a quarter of its cost, more for slow configs).
    #: The best and every config near it get all ``num_tests``; finalists are re-timed without racing.
    race: float = _default("AUTOTUNE_RACE", env_float, 1.25)
    race_calls: int = _default("AUTOTUNE_RACE_CALLS", env_int, 10, minimum=1)
    compile_timeout_s: float = _default("AUTOTUNE_COMPILE_TIMEOUT", env_float, 180.0, positive=True)
    run_timeout_s: float = _default("AUTOTUNE_RUN_TIMEOUT", env_float, 120.0, positive=True)
    #: the run timeout until some config of the shape has a time (the default runs first): a config that
    #: hangs before anything is known costs this, not --run-timeout; one that returned once and then ran
    #: out of it is retried with --run-timeout (slow, not hung)
    first_run_timeout_s: float = _default("AUTOTUNE_FIRST_RUN_TIMEOUT", env_float, 10.0, positive=True)
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
    #: a best whose measurements spread more than this ((max - min) / median over its re-timings, else
    #: (p90 - p10) / median of its launches) is flagged unreliable, never silently crowned
    unreliable_spread: float = _default("AUTOTUNE_UNRELIABLE_SPREAD", env_float, 0.5, positive=True)
    #: the stopping rule (without ``trials``): evaluations before it may stop, most new evaluations, most
    #: seconds per shape (0 = none), evaluations that must bring nothing beyond the noise, the noise floor
    stop_min: int = _default("AUTOTUNE_STOP_MIN", env_int, 30, minimum=1)
    stop_max: int = _default("AUTOTUNE_STOP_MAX", env_int, 300, minimum=1)
    stop_wall_s: float = _default("AUTOTUNE_STOP_WALL", env_float, 300.0)
    stop_patience: int = _default("AUTOTUNE_STOP_PATIENCE", env_int, 20, minimum=1)
    stop_noise: float = _default("AUTOTUNE_STOP_NOISE", env_float, 0.01)
    stop_neighbours: bool = _default("AUTOTUNE_STOP_NEIGHBOURS", env_bool, True)
    #: a JSON file listing the configs to evaluate (exactly those, in order, each checked against the
    #: space), instead of proposals from the strategy's model: e.g. an existing ``triton.Config`` list
    configs_file: str | None = None
    #: re-open the key's final ``timeout`` and ``crashed`` trials before searching, so they are measured
    #: again (``--retry-failed``: a busy moment must not stay a hole in the space)
    retry_failed: bool = False
    #: extra environment for the worker processes (e.g. TRITON_INTERPRET=1)
    worker_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # the name is checked against the registry where it lives (autotune.search), not here: settings
        # stay importable without the search package
        self.strategy = self.strategy.lower()
        if self.trials is not None and self.trials < 1:
            raise SettingsError(f"--trials must be at least 1 (got {self.trials})")
        if self.stop_min > self.stop_max:
            raise SettingsError(
                f"AUTOTUNE_STOP_MIN ({self.stop_min}) must not exceed AUTOTUNE_STOP_MAX ({self.stop_max})"
            )
        check_number("AUTOTUNE_STOP_WALL", self.stop_wall_s)
        check_number("AUTOTUNE_STOP_NOISE", self.stop_noise)
        if self.race and self.race < 1:
            raise SettingsError(f"AUTOTUNE_RACE must be 0 (off) or >= 1 (got {self.race})")
        if self.num_tests < 1:
            raise SettingsError(f"--num-tests must be at least 1 (got {self.num_tests})")
        check_number("--timeout", self.timeout_s)
        for name in (
            "compile_timeout_s",
            "run_timeout_s",
            "first_run_timeout_s",
            "start_timeout_s",
            "lease_s",
        ):
            check_number(f"--{name.removesuffix('_s').replace('_', '-')}", getattr(self, name), positive=True)
        # None: automatic (cores - 1 beside GPUs, 0 beside a CPU timing worker), decided by the tuner
        if self.compile_workers is not None and self.compile_workers < 0:
            raise SettingsError(f"--compile-workers must be >= 0 (got {self.compile_workers})")
        if self.seed is not None and not 0 <= self.seed < 2**32:  # Optuna's and numpy's seed range
            raise SettingsError(f"--seed must be between 0 and 2**32 - 1 (got {self.seed})")
        parse_devices(self.devices)  # syntax only: "all" is resolved by the first worker

    @property
    def nominal_trials(self) -> int:
        """The budget a strategy plans with (its batch size, exhaustive when the space is smaller):
        ``trials``, or the stopping rule's floor."""
        return self.trials if self.trials is not None else self.stop_min

    @classmethod
    def from_options(cls, **options: Any) -> SearchSettings:
        """Build from CLI options, where ``None`` means "not given" (fall back to env, then default)."""
        names = {f.name for f in fields(cls)}
        unknown = set(options) - names
        if unknown:
            raise SettingsError(f"unknown settings: {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in options.items() if v is not None})


def trials_env() -> int | None:
    """``AUTOTUNE_TRIALS``: a count >= 1, or None (unset or ``auto``: the stopping rule)."""
    raw = _raw("AUTOTUNE_TRIALS")
    if raw is not None and raw.lower() == "auto":
        return None
    return env_int("AUTOTUNE_TRIALS", None, minimum=1)


def check_environment() -> SearchSettings:
    """Parse every AUTOTUNE_* variable a command uses, once (CLI start-up): the first bad one is one line,
    exit 2. Returns the search settings the environment gives (their strategy name still to be checked
    against the registry)."""
    settings = SearchSettings()
    flush_bytes()
    throttle()
    serve_settings()
    return settings
