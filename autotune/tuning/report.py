"""What a shape's search reports (``ShapeReport``, and ``TrialEvent`` after each evaluation) and its JSON
form (``search --json``, the service's stored report), apart from the search loop: an ``autotune search``
that hands its shapes to a service reads reports back without importing the loop, the engine or the
strategies (start-up it would pay before its first line)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from autotune.shapes import Shape, format_shape
from autotune.stats import Ratio
from autotune.trial import TrialResult
from autotune.tuning.finalists import Finalist

__all__ = ["ShapeReport", "TrialEvent", "report_dict", "report_from_dict"]


@dataclass
class TrialEvent:
    """Reported to the progress callback after every evaluation this process finishes."""

    shape: Shape
    result: TrialResult
    reused: bool
    evaluations: int
    budget: int
    best: TrialResult | None


@dataclass
class ShapeReport:
    shape: Shape
    shape_key: str
    study_name: str
    best: TrialResult | None
    default: TrialResult | None
    evaluations: int
    reused: int
    invalid: int
    statuses: Counter[str] = field(default_factory=Counter)
    #: the same by type (``engine.faults.label``): "launch_failed (out of memory)", "crashed (illegal address)"
    faults: Counter[str] = field(default_factory=Counter)
    total_statuses: dict[str, int] = field(default_factory=dict)
    valid_configs: int | None = None
    exhaustive: bool = False
    budget: int = 0
    wall_s: float = 0.0
    #: configs another process held while this one searched (measured there, reused here)
    busy: int = 0
    #: main-loop seconds per finished evaluation (strategy, filtering, claims, store), waits excluded
    loop_s_per_trial: float | None = None
    #: idle seconds of the timing workers between two evaluations (median, p90)
    device_gap_s: tuple[float, float] | None = None
    devices: tuple[str, ...] = ()
    #: the strategy that searched (after resolving: a small space under --trials is searched exhaustively)
    strategy: str = ""
    #: the re-timed finalists, fastest first
    finalists: list[Finalist] = field(default_factory=list)
    #: what the strategy learned from before this shape's first result: measurements of the kernel under
    #: other keys (other shapes, devices, versions, spaces) and how many keys they came from
    history_points: int = 0
    history_keys: int = 0
    #: the measurements the strategy needs before it learns from them (``StrategyInfo.min_history``)
    history_needed: int = 0
    #: the best's measurements (the search's one plus its re-timings) and their spread: (max - min) / median
    #: over them when re-timed, else the one measurement's own (p90 - p10) / median of its launches
    best_samples: int = 0
    best_spread: float | None = None
    #: a 95 % interval of the best's median time (``autotune.stats.median_interval``; None for one sample)
    best_interval: tuple[float, float] | None = None
    #: default / best over their paired interleaved re-timing rounds (``autotune.stats.paired_ratio``): its
    #: value, 95 % interval and pairs; without pairs ``speedup`` falls back to the two stored times
    paired_speedup: float | None = None
    speedup_interval: tuple[float, float] | None = None
    speedup_pairs: int = 0
    #: the best's spread is above ``AUTOTUNE_UNRELIABLE_SPREAD``: its time (and speed-up) may be noise
    unreliable: bool = False
    #: why the search stopped (``search.stopping``: converged, ceiling, wall, trials, timeout, exhausted),
    #: and the stopping rule's last bound on the improvement still possible and noise (relative)
    stop_reason: str = ""
    stop_bound: float | None = None
    stop_noise: float | None = None
    #: where the shape's ``wall_s`` went, on the orchestrator's clock (``ShapeSearch.time_split``): set-up
    #: before the loop, the loop until the first measurement began, the devices measuring and idle in the
    #: loop (per device), the strategy's own seconds in the loop, re-timing the finalists, closing the study
    time_split: dict[str, float] = field(default_factory=dict)

    @property
    def within_noise(self) -> bool:
        """Whether the re-timed runner-up is within the winner's measured spread: either may be the best."""
        if len(self.finalists) < 2:
            return False
        a, b = self.finalists[0], self.finalists[1]
        noise = max(a.spread or 0.0, b.spread or 0.0)
        return b.median_s <= a.median_s * (1.0 + noise)

    @property
    def speedup(self) -> float | None:
        if self.paired_speedup is not None:
            return self.paired_speedup
        if self.best and self.default and self.default.time_s and self.best.time_s:
            return self.default.time_s / self.best.time_s
        return None

    @property
    def speedup_ratio(self) -> Ratio | None:
        """The speed-up as a ``Ratio`` (its interval, if paired): what the tables print."""
        if self.speedup is None:
            return None
        lo, hi = self.speedup_interval or (None, None)
        return Ratio(self.speedup, lo, hi, self.speedup_pairs)


#: the names ``search --json`` has always used for these ShapeReport fields
_REPORT_NAMES = {"study_name": "study"}
#: ShapeReport fields written under "history", by these names
_REPORT_HISTORY = {"history_points": "measurements", "history_keys": "keys", "history_needed": "needed"}


def report_dict(r: ShapeReport) -> dict[str, Any]:
    """One shape's results as ``search --json`` writes them: every ``ShapeReport`` field (a new one needs no
    edit here), trial results by their own ``to_dict``, plus the derived speed-up and noise verdict."""
    d: dict[str, Any] = {}
    history: dict[str, Any] = {}
    for f in fields(r):
        if f.name == "shape_key":
            continue  # the shape, formatted: "shape" says it
        value = _jsonable(getattr(r, f.name))
        if f.name in _REPORT_HISTORY:
            history[_REPORT_HISTORY[f.name]] = value
        else:
            d[_REPORT_NAMES.get(f.name, f.name)] = value
    d["speedup"] = r.speedup
    ratio = r.speedup_ratio
    d["speedup_significant"] = ratio.significant if ratio is not None else None
    d["finalists_within_noise"] = r.within_noise
    d["history"] = history
    return d


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


def report_from_dict(d: Mapping[str, Any]) -> ShapeReport:
    """A ``ShapeReport`` again from ``report_dict``'s output (a search a service ran, read back by the
    ``autotune search`` that handed it over). Derived entries (speed-up, noise verdict) are recomputed."""
    names = {_REPORT_NAMES.get(f.name, f.name): f.name for f in fields(ShapeReport)}
    history = d.get("history") or {}
    values: dict[str, Any] = {}
    for key, name in names.items():
        if name in _REPORT_HISTORY:
            values[name] = history.get(_REPORT_HISTORY[name], 0)
        elif key in d:
            values[name] = d[key]
    values["shape"] = {str(k): int(v) for k, v in (values.get("shape") or {}).items()}
    values["shape_key"] = format_shape(values["shape"])
    for name in ("best", "default"):
        values[name] = TrialResult.from_dict(values[name]) if values.get(name) else None
    for name in ("statuses", "faults"):
        values[name] = Counter(values.get(name) or {})
    values["finalists"] = [Finalist(**f) for f in values.get("finalists") or ()]
    values["devices"] = tuple(values.get("devices") or ())
    for name in ("device_gap_s", "best_interval", "speedup_interval"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    return ShapeReport(**values)
