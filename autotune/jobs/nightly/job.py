"""The nightly job file (YAML): what to tune, re-tune and verify, within which budget, and where the report
goes. Validated as a whole: every mistake is one line naming the file and the field (all of them at once),
raised as one ``SettingsError`` (exit 2 at the CLI). The file is read under the space files' YAML limits
(``autotune.space.load.load_yaml_file``: size, UTF-8, nesting, alias expansion, no duplicate keys).

    name: gemm-nightly                  # default: the file's stem
    database: postgresql://tuner@db/autotune   # default: AUTOTUNE_DB, else the embedded SQLite file
    devices: cuda:0                     # as --devices (default: cuda if present)
    kernels:
      - file: ../examples/gemm_fp8.py   # relative to the job file
        shapes: [default, requested, "M=64,N=2112,K=7168", {M: 128, N: 4096, K: 7168}]
        trials: 16                      # per-kernel override of the job's value (or auto)
    strategy: tpe                       # any registered strategy (autotune.search.strategy_names())
    trials: auto                        # auto (the default): the stopping rule decides, as a search without
                                        # --trials; N: new evaluations per shape (a shape with N measured is
                                        # done); its old name `evaluations` still works
    seed: 0                             # 0 .. 2**32 - 1
    num_tests: 30                       # timed calls per measurement
    budget_s: 3600                      # the whole run; 0 = none
    deadline: "06:00"                   # HH:MM (UTC, the next one) or an ISO date-time; none by default
    retune: true                        # warm-start shapes tuned under another environment
    requested: {min_count: 1, max_shapes: 50}
    verify: {repeats: 10, threshold: 0.03, alpha: 0.05, reference: true}   # or false
    report: reports/nightly             # a folder, relative to the job file; default: none
    schedule: "0 2 * * *"               # when `autotune serve --job` runs it: cron (UTC; minute hour day month
                                        # weekday, a 6th field for seconds, or @daily/@hourly); `autotune
                                        # nightly` runs the job at once and ignores it
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError, SettingsError

log = logging.getLogger(__name__)

#: the shape sources besides explicit shapes
SHAPE_SOURCES = ("default", "requested")
#: the largest strategy seed (numpy's and Optuna's samplers take 0 .. 2**32 - 1)
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class VerifySpec:
    #: re-measurements of each stored best (each one a median over num_tests calls)
    repeats: int = 10
    #: a slowdown smaller than this fraction is never a regression (asv's factor; 0.03 = 3 %)
    threshold: float = 0.03
    #: significance level of the rank test
    alpha: float = 0.05
    #: time the kernel's default config interleaved with each best (the in-run reference)
    reference: bool = True


@dataclass(frozen=True)
class KernelJob:
    file: Path
    #: "default", "requested" and explicit shapes (dicts), in the file's order
    shapes: tuple[Any, ...] = ("default",)
    #: the file's ``trials`` (the budget's one name, as ``search --trials``): None: the job's value; AUTO:
    #: the stopping rule
    evaluations: int | str | None = None
    strategy: str | None = None


@dataclass(frozen=True)
class RequestedSpec:
    min_count: int = 1
    max_shapes: int = 50


@dataclass(frozen=True)
class Job:
    path: Path
    name: str
    kernels: tuple[KernelJob, ...]
    database: str | None = None
    devices: str | None = None
    strategy: str | None = None
    #: the file's ``trials``: new evaluations per shape, or AUTO: the stopping rule (``search.stopping``)
    evaluations: int | str = "auto"
    seed: int | None = None
    num_tests: int | None = None
    budget_s: float = 0.0
    deadline: datetime | None = None
    #: the deadline as written (HH:MM is "the next one": a service recomputes it at each scheduled run)
    deadline_spec: str | None = None
    retune: bool = True
    requested: RequestedSpec = field(default_factory=RequestedSpec)
    verify: VerifySpec | None = field(default_factory=VerifySpec)
    report: Path | None = None
    #: cron expression (UTC) of ``autotune serve --job``; None: run by hand or by a timer
    schedule: str | None = None

    def evaluations_for(self, k: KernelJob) -> int | None:
        """The kernel's evaluations per shape; None: the stopping rule decides."""
        ev = k.evaluations if k.evaluations is not None else self.evaluations
        return None if ev == AUTO else int(ev)

    def strategy_for(self, k: KernelJob) -> str | None:
        return k.strategy or self.strategy

    def next_run(self, after: datetime) -> datetime:
        """The first scheduled time after ``after`` (UTC)."""
        from croniter import croniter

        assert self.schedule is not None
        return croniter(self.schedule, after.astimezone(timezone.utc)).get_next(datetime)

    def with_deadline_from(self, now: datetime) -> Job:
        """This job with its deadline computed from ``now`` (an HH:MM deadline is the next one after it)."""
        from dataclasses import replace

        if self.deadline_spec is None:
            return self
        return replace(self, deadline=parse_deadline(self.deadline_spec, now))


_KERNEL = {"file", "shapes", "trials", "strategy"}
#: a field's new name by its old one: the old one is still read, with one deprecation line
_RENAMED = {"evaluations": "trials"}


def _renamed(p: _Problems, prefix: str, given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(``given`` with old field names replaced by the new ones, the name the file used for each new one).
    An old name logs one deprecation line; old and new together are a problem."""
    given, used = dict(given), {}
    for old, new in _RENAMED.items():
        if old not in given:
            continue
        if new in given:
            p.add(f"{prefix}{old}", f"give {new} only ({old} is its old name)")
            del given[old]
            continue
        log.warning("%s: %s%s is deprecated: call it %s (as search --trials)", p.path, prefix, old, new)
        given[new] = given.pop(old)
        used[new] = old
    return given, used


#: ``trials: auto``: the stopping rule, as ``autotune search`` without --trials
AUTO = "auto"


def _evaluations(p: _Problems, where: str, v: Any) -> int | str | None:
    """``auto`` or an integer >= 1."""
    if isinstance(v, str) and v.strip().lower() == AUTO:
        return AUTO
    if isinstance(v, bool) or not isinstance(v, int):
        p.add(where, f"expected auto or an integer >= 1, got {v!r:.60}")
        return None
    return _int(p, where, v, 1)


class _Problems:
    """The problems found in one job file, and its folder (where relative paths in it start)."""

    def __init__(self, path: Path):
        self.path = path
        self.base = path.parent
        self.lines: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{self.path}: {where}: {what}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise SettingsError("\n".join(self.lines))


def _unknown(p: _Problems, where: str, given: dict[str, Any], allowed: set[str]) -> None:
    for k in given:
        if k not in allowed:
            p.add(f"{where}{k}", f"unknown field (fields: {', '.join(sorted(allowed))})")


def _int(p: _Problems, where: str, v: Any, minimum: int, maximum: int | None = None) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int):
        p.add(where, f"expected an integer >= {minimum}, got {v!r:.60}")
        return None
    if v < minimum:
        p.add(where, f"must be >= {minimum} (got {_int_text(v)})")
        return None
    if maximum is not None and v > maximum:
        p.add(where, f"must be <= {maximum} (got {_int_text(v)})")
        return None
    return v


def _int_text(v: int) -> str:
    """An integer for a message: YAML reads up to 4300 digits, and a message stays one short line."""
    return str(v) if v.bit_length() <= 128 else f"a {v.bit_length()}-bit integer"


def _num(
    p: _Problems, where: str, v: Any, *, lo: float, hi: float = math.inf, open_lo: bool = False
) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        p.add(where, f"expected a finite number, got {v!r:.60}")
        return None
    if v < lo or (open_lo and v == lo) or v > hi:
        bound = f"> {lo:g}" if open_lo else f">= {lo:g}"
        p.add(where, f"must be {bound}{f' and <= {hi:g}' if hi < math.inf else ''} (got {v})")
        return None
    return float(v)


def _bool(p: _Problems, where: str, v: Any) -> bool | None:
    if not isinstance(v, bool):
        p.add(where, f"expected true or false, got {v!r:.60}")
        return None
    return v


def parse_deadline(text: Any, now: datetime | None = None) -> datetime:
    """``HH:MM`` (UTC: the next such time) or an ISO date-time (naive = UTC)."""
    now = now or datetime.now(timezone.utc)
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=timezone.utc)
    s = str(text).strip()
    if len(s) in (4, 5) and ":" in s:
        hh, mm = s.split(":")
        if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
            raise ValueError(s)
        t = now.replace(hour=int(hh), minute=int(mm), second=0, microsecond=0)
        return t if t > now else t + timedelta(days=1)
    d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _shape_entry(p: _Problems, where: str, v: Any) -> Any:
    from autotune.shapes import check_shape, parse_shape

    if isinstance(v, str) and v.strip() in SHAPE_SOURCES:
        return v.strip()
    if isinstance(v, str) and "=" not in v:
        p.add(where, f"expected 'default', 'requested' or a shape like M=64,N=2112,K=7168, got {v!r:.60}")
        return None
    try:
        if isinstance(v, str):
            return parse_shape(v)
        if isinstance(v, dict):
            return check_shape(v)
    except AutotuneError as e:
        p.add(where, str(e))
        return None
    p.add(where, f"expected 'default', 'requested', 'M=..,N=..' or a mapping, got {v!r:.60}")
    return None


def load_job(path: str | Path) -> Job:
    """Read and validate a job file."""
    path = Path(path)
    doc = _read_yaml(path)
    p = _Problems(path)
    doc, used = _renamed(p, "", doc)
    opts = _read_fields(p, "", doc, _JOB_FIELDS, used)
    if "trials" in opts:
        opts["evaluations"] = opts.pop("trials")
    if opts.get("deadline") is not None:
        opts["deadline_spec"] = str(doc["deadline"])
    opts.setdefault("name", path.stem)
    p.raise_if_any()
    return Job(path=path, **opts)


def _read_yaml(path: Path) -> dict[str, Any]:
    """The job file's mapping, read under the space loader's limits: a job file is YAML from anyone too
    (an alias bomb of 1 KB took 58 s and 3.9 GB; a 5,000-deep one was a RecursionError; a duplicate key
    was silently overridden by the later one; a file not UTF-8 a traceback)."""
    from autotune.space.load import load_yaml_file

    doc = load_yaml_file(path, "job file", SettingsError)
    if not isinstance(doc, dict):
        raise SettingsError(f"{path}: expected a mapping of job fields (name, kernels, ...)")
    return doc


# --------------------------------------------------------------------------------------------------
# the schema: each field's check turns the file's value into the dataclass's (or adds a problem and
# returns None: the file is refused, so that value is never used)

_ABSENT = object()


@dataclass(frozen=True)
class _Field:
    key: str
    #: ``check(problems, where, value)``: the parsed value, or None after adding a problem
    check: Callable[[_Problems, str, Any], Any]
    #: the value checked when the key is missing (``_ABSENT``: the dataclass's default is kept)
    default: Any = _ABSENT
    #: an explicit null counts as missing (else the check sees None, and refuses it)
    null_is_missing: bool = False


def _read_fields(
    p: _Problems,
    prefix: str,
    given: dict[str, Any],
    fields: Sequence[_Field],
    used: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The checked values of ``given`` by field name, checked in the schema's order (problems too); a
    problem names a field as the file did (``used``: the old name a renamed field was given under)."""
    _unknown(p, prefix, given, {f.key for f in fields})
    out: dict[str, Any] = {}
    for f in fields:
        v = given.get(f.key, f.default)
        if v is _ABSENT or (v is None and f.null_is_missing):
            continue
        out[f.key] = f.check(p, f"{prefix}{(used or {}).get(f.key, f.key)}", v)
    return out


def _name(p: _Problems, where: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        p.add(where, "expected a non-empty string")
    return str(v)


def _text(p: _Problems, where: str, v: Any) -> str | None:
    if not isinstance(v, str) or not v.strip():
        p.add(where, "expected a non-empty string")
        return None
    return v.strip()


def _devices(p: _Problems, where: str, v: Any) -> str | None:
    from autotune.devices import parse_devices

    text = _text(p, where, v)
    if text is not None:
        try:
            parse_devices(text)
        except AutotuneError as e:
            p.add(where, str(e))
    return text


def _strategy(p: _Problems, where: str, v: Any) -> str | None:
    from autotune.search import strategy_names

    if v is None:
        return None
    names = strategy_names()
    if not isinstance(v, str) or v.lower() not in names:
        p.add(where, f"unknown strategy {v!r:.40}: choose one of {', '.join(names)}")
        return None
    return v.lower()


def _deadline(p: _Problems, where: str, v: Any) -> datetime | None:
    try:
        return parse_deadline(v)
    except (ValueError, TypeError):
        p.add(where, f"expected HH:MM (UTC) or an ISO date-time, got {v!r:.60}")
        return None


def _schedule(p: _Problems, where: str, v: Any) -> str | None:
    """A cron expression (croniter's: 5 fields, a 6th for seconds, or @daily and the like), read as UTC."""
    text = _text(p, where, v)
    if text is None:
        return None
    try:
        from croniter import croniter
    except ImportError:
        p.add(where, "needs the croniter package (pip install croniter)")
        return None
    if not croniter.is_valid(text):
        p.add(where, f"not a cron expression: {text!r:.60} (e.g. '0 2 * * *': 02:00 UTC every day)")
        return None
    return text


def _report(p: _Problems, where: str, v: Any) -> Path | None:
    if not isinstance(v, str) or not v.strip():
        p.add(where, "expected a folder path")
        return None
    return (p.base / v).resolve()


_REQUESTED_FIELDS = (
    _Field("min_count", partial(_int, minimum=1), default=1),
    _Field("max_shapes", partial(_int, minimum=0), default=50),
)
_VERIFY_FIELDS = (
    _Field("repeats", partial(_int, minimum=5), default=10),
    _Field("threshold", partial(_num, lo=0, hi=10, open_lo=True), default=0.03),
    _Field("alpha", partial(_num, lo=0, hi=0.5, open_lo=True), default=0.05),
    _Field("reference", _bool, default=True),
)


def _requested(p: _Problems, where: str, v: Any) -> RequestedSpec | None:
    if not isinstance(v, dict):
        p.add(where, "expected a mapping (min_count, max_shapes)")
        return None
    return RequestedSpec(**_read_fields(p, f"{where}.", v, _REQUESTED_FIELDS))


def _verify(p: _Problems, where: str, v: Any) -> VerifySpec | None:
    if v is False:
        return None
    if v is True or v is None:
        return VerifySpec()
    if isinstance(v, dict):
        return VerifySpec(**_read_fields(p, f"{where}.", v, _VERIFY_FIELDS))
    p.add(where, "expected false or a mapping (repeats, threshold, alpha, reference)")
    return None


def _kernels(p: _Problems, where: str, v: Any) -> tuple[KernelJob, ...]:
    if v is None:
        p.add(where, "missing: list at least one kernel file (kernels: [{file: ...}])")
        return ()
    if not isinstance(v, list) or not v:
        p.add(where, "expected a non-empty list of {file: ..., shapes: [...]}")
        return ()
    kernels = (_kernel(p, f"{where}[{i}]", k) for i, k in enumerate(v))
    return tuple(k for k in kernels if k is not None)


def _kernel(p: _Problems, where: str, k: Any) -> KernelJob | None:
    """One entry of ``kernels``: a file path, or a mapping with a file (checked before the rest)."""
    if isinstance(k, str):
        k = {"file": k}
    if not isinstance(k, dict):
        p.add(where, "expected a mapping with a file")
        return None
    k, used = _renamed(p, f"{where}.", k)
    _unknown(p, f"{where}.", k, _KERNEL)
    f = k.get("file")
    if not isinstance(f, str) or not f.strip():
        p.add(f"{where}.file", "missing: the kernel file")
        return None
    file = (p.base / f).resolve()
    if not file.is_file():
        p.add(f"{where}.file", f"no such kernel file {f} (relative paths start at the job file)")
    shapes = _shapes(p, f"{where}.shapes", k.get("shapes", ["default"]))
    trials = used.get("trials", "trials")
    ev = _evaluations(p, f"{where}.{trials}", k["trials"]) if "trials" in k else None
    return KernelJob(file, shapes, ev, _strategy(p, f"{where}.strategy", k.get("strategy")))


def _shapes(p: _Problems, where: str, raw: Any) -> tuple[Any, ...]:
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        p.add(where, "expected a non-empty list")
        return ()
    shapes: list[Any] = []
    for j, s in enumerate(raw):
        entry = _shape_entry(p, f"{where}[{j}]", s)
        if entry is not None and entry not in shapes:
            shapes.append(entry)
    return tuple(shapes)


#: the job file's fields, in the order they are checked (and their problems listed)
_JOB_FIELDS = (
    _Field("name", _name),
    _Field("database", _text, null_is_missing=True),
    _Field("devices", _devices, null_is_missing=True),
    _Field("strategy", _strategy, null_is_missing=True),
    _Field("trials", _evaluations),
    _Field("seed", partial(_int, minimum=0, maximum=MAX_SEED), null_is_missing=True),
    _Field("num_tests", partial(_int, minimum=1), null_is_missing=True),
    _Field("budget_s", partial(_num, lo=0)),
    _Field("deadline", _deadline, null_is_missing=True),
    _Field("retune", _bool),
    _Field("requested", _requested, default={}),
    _Field("verify", _verify, default={}),
    _Field("report", _report, null_is_missing=True),
    _Field("schedule", _schedule, null_is_missing=True),
    _Field("kernels", _kernels, default=None),
)
