"""What one evaluated candidate produced: a status and, when it ran, its timing.

Shared as plain data between the worker (which produces it), the tuner and the store (which keep it)."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

#: ``TrialResult.kind`` of a config's evaluation by a search, and of a finalist's re-timing
KIND_SEARCH = "search"
KIND_RETIME = "retime"
#: a search trial whose failure was re-opened (``autotune search --retry-failed``): kept as a record, no
#: longer the config's evaluation, so the config is measured again
KIND_REOPENED = "reopened"


def median_spread(times: Sequence[float]) -> tuple[float, float | None]:
    """The median of a config's measurements and their spread, (max - min) / median (None for one)."""
    ordered = sorted(times)
    median = statistics.median(ordered)
    spread = (ordered[-1] - ordered[0]) / median if len(ordered) > 1 and median > 0 else None
    return median, spread


class TrialStatus(str, Enum):
    OK = "ok"
    INVALID = "invalid"  # rejected by a constraint; never compiled
    COMPILE_FAILED = "compile_failed"
    LAUNCH_FAILED = "launch_failed"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    CRASHED = "crashed"

    def __str__(self) -> str:
        return self.value


def canonical_config(config: Mapping[str, Any]) -> str:
    """Stable JSON text of a config (sorted keys): the identity used for dedupe."""
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"), default=str)


def config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_config(config).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class TrialResult:
    """The outcome of evaluating one config on one shape. Immutable once made: a stored result is the
    record of a measurement; what adds to it (the device, a re-timing's kind) makes a copy with
    ``dataclasses.replace``."""

    status: TrialStatus
    config: dict[str, Any]
    #: per-call device time in seconds (sum over the timed kernels of per-launch median x launches/call)
    time_s: float | None = None
    mean_s: float | None = None
    min_s: float | None = None
    #: relative spread of the per-launch times: (p90 - p10) / median
    spread: float | None = None
    launches: float | None = None
    #: timed calls behind ``time_s``: fewer than ``--num-tests`` when the measurement was raced (its first
    #: calls put the config far over the shape's best so far: ``SearchSettings.race``)
    calls: int | None = None
    tflops: float | None = None
    gbps: float | None = None
    compile_s: float | None = None
    error: str | None = None
    worker: str | None = None
    hostname: str | None = None
    #: the device it ran on (cuda:1, cpu)
    device: str | None = None
    #: False when the timing is a placeholder (AUTOTUNE_USE_NVIDIA_TOOLS): never stored as a best
    measured: bool = True
    kernels: dict[str, Any] = field(default_factory=dict)
    #: what the correctness check measured (``autotune.kernel.check_metrics``: diff, rms, max_ulps)
    check: dict[str, float] | None = None
    #: KIND_SEARCH (a config's first evaluation) or KIND_RETIME (a finalist measured again before a best is
    #: declared; only search trials count as the config's evaluation for claims and the Optuna study)
    kind: str = KIND_SEARCH
    #: the GPU's SM clock while the kept measurement ran: lowest and highest reading, the device's maximum
    #: (MHz), and the throttle reasons seen (comma-separated NVML names); None without a clock source
    #: (no GPU, no ``nvidia-ml-py``). ``autotune.clocks``
    clock_min_mhz: float | None = None
    clock_max_mhz: float | None = None
    clock_limit_mhz: float | None = None
    throttle_reasons: str | None = None
    #: the lowest clock stayed below AUTOTUNE_THROTTLE_THRESHOLD x the maximum through every re-take
    throttled: bool | None = None
    #: measurements re-taken because their clock was low
    retakes: int | None = None
    #: a re-timing's interleaved round (``<run>:<round>``): samples of one round were measured side by
    #: side, so two configs' samples of the same rounds pair up (a speedup's paired ratios)
    retime_round: str | None = None

    @property
    def timed(self) -> bool:
        """An ``ok`` result with a real measurement: what a sampler learns from and a best can be."""
        return self.status is TrialStatus.OK and self.measured and self.time_s is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrialResult:
        d = dict(d)
        d["status"] = TrialStatus(d["status"])
        return cls(**d)


def fmt_config(config: Mapping[str, Any] | None) -> str:
    """A config as the tables and progress lines show it: ``K=v,K=v`` ("-" when there is none)."""
    if not config:
        return "-"
    return ",".join(f"{k}={v}" for k, v in config.items())


def fmt_time_interval(t: float | None, low: float | None, high: float | None) -> str:
    """``t`` with its interval in ``t``'s unit: ``429.55 us [417.64-481.36]`` (just ``t`` without one)."""
    text = fmt_time(t)
    if t is None or low is None or high is None:
        return text
    value, unit = text.rsplit(" ", 1)
    scale = float(value) / t if t else 1.0
    digits = len(value.split(".")[1]) if "." in value else 0
    return f"{text} [{low * scale:.{digits}f}-{high * scale:.{digits}f}]"


def fmt_time(t: float | None) -> str:
    """A time as the tables and reports show it (s from 1 s up, ms from 1 ms up, else us; "-" when there is
    none)."""
    if t is None:
        return "-"
    if t >= 1.0:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"
