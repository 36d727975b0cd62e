"""The nightly job file (YAML): what to tune, re-tune and verify, within which budget, and where the report
goes. Validated as a whole: every mistake is one line naming the file and the field (all of them at once),
raised as one ``SettingsError`` (exit 2 at the CLI).

    name: gemm-nightly                  # default: the file's stem
    database: postgresql://tuner@db/autotune   # default: AUTOTUNE_DB, else the embedded SQLite file
    devices: cuda:0                     # as --devices (default: cuda if present)
    kernels:
      - file: ../examples/gemm_fp8.py   # relative to the job file
        shapes: [default, requested, "M=64,N=2112,K=7168", {M: 128, N: 4096, K: 7168}]
        evaluations: 16                 # per-kernel override of the job's value
    strategy: tpe                       # any registered strategy (autotune.search.strategy_names())
    evaluations: 20                     # new evaluations per shape (a shape with that many measured is done)
    seed: 0
    num_tests: 30                       # timed calls per measurement
    budget_s: 3600                      # the whole run; 0 = none
    deadline: "06:00"                   # HH:MM (UTC, the next one) or an ISO date-time; none by default
    retune: true                        # warm-start shapes tuned under another environment
    requested: {min_count: 1, max_shapes: 50}
    verify: {repeats: 10, threshold: 0.03, alpha: 0.05, reference: true}   # or false
    report: reports/nightly             # a folder, relative to the job file; default: none
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError, SettingsError

#: the shape sources besides explicit shapes
SHAPE_SOURCES = ("default", "requested")


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
    evaluations: int | None = None
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
    evaluations: int = 20
    seed: int | None = None
    num_tests: int | None = None
    budget_s: float = 0.0
    deadline: datetime | None = None
    retune: bool = True
    requested: RequestedSpec = field(default_factory=RequestedSpec)
    verify: VerifySpec | None = field(default_factory=VerifySpec)
    report: Path | None = None

    def evaluations_for(self, k: KernelJob) -> int:
        return k.evaluations if k.evaluations is not None else self.evaluations

    def strategy_for(self, k: KernelJob) -> str | None:
        return k.strategy or self.strategy


_TOP = {
    "name",
    "database",
    "devices",
    "kernels",
    "strategy",
    "evaluations",
    "seed",
    "num_tests",
    "budget_s",
    "deadline",
    "retune",
    "requested",
    "verify",
    "report",
}
_KERNEL = {"file", "shapes", "evaluations", "strategy"}
_VERIFY = {"repeats", "threshold", "alpha", "reference"}
_REQUESTED = {"min_count", "max_shapes"}


class _Problems:
    def __init__(self, path: Path):
        self.path = path
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


def _int(p: _Problems, where: str, v: Any, minimum: int) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int):
        p.add(where, f"expected an integer >= {minimum}, got {v!r:.60}")
        return None
    if v < minimum:
        p.add(where, f"must be >= {minimum} (got {v})")
        return None
    return v


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
    import yaml

    from autotune.search import strategy_names

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SettingsError(f"{path}: cannot read the job file ({e.strerror or e})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise SettingsError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(doc, dict):
        raise SettingsError(f"{path}: expected a mapping of job fields (name, kernels, ...)")
    p = _Problems(path)
    base = path.parent
    _unknown(p, "", doc, _TOP)
    opts: dict[str, Any] = {}

    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        p.add("name", "expected a non-empty string")
    opts["name"] = str(name)

    for key in ("database", "devices"):
        if doc.get(key) is not None:
            if not isinstance(doc[key], str) or not doc[key].strip():
                p.add(key, "expected a non-empty string")
            else:
                opts[key] = doc[key].strip()
    if "devices" in opts:
        from autotune.devices import parse_devices

        try:
            parse_devices(opts["devices"])
        except AutotuneError as e:
            p.add("devices", str(e))

    names = strategy_names()

    def strategy(where: str, v: Any) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str) or v.lower() not in names:
            p.add(where, f"unknown strategy {v!r:.40}: choose one of {', '.join(names)}")
            return None
        return v.lower()

    opts["strategy"] = strategy("strategy", doc.get("strategy"))
    if "evaluations" in doc:
        opts["evaluations"] = _int(p, "evaluations", doc["evaluations"], 1) or 20
    if doc.get("seed") is not None:
        opts["seed"] = _int(p, "seed", doc["seed"], 0)
    if doc.get("num_tests") is not None:
        opts["num_tests"] = _int(p, "num_tests", doc["num_tests"], 1)
    if "budget_s" in doc:
        opts["budget_s"] = _num(p, "budget_s", doc["budget_s"], lo=0) or 0.0
    if doc.get("deadline") is not None:
        try:
            opts["deadline"] = parse_deadline(doc["deadline"])
        except (ValueError, TypeError):
            p.add("deadline", f"expected HH:MM (UTC) or an ISO date-time, got {doc['deadline']!r:.60}")
    if "retune" in doc:
        opts["retune"] = _bool(p, "retune", doc["retune"])

    req = doc.get("requested", {})
    if isinstance(req, dict):
        _unknown(p, "requested.", req, _REQUESTED)
        opts["requested"] = RequestedSpec(
            min_count=_int(p, "requested.min_count", req.get("min_count", 1), 1) or 1,
            max_shapes=_int(p, "requested.max_shapes", req.get("max_shapes", 50), 0) or 0,
        )
    else:
        p.add("requested", "expected a mapping (min_count, max_shapes)")

    ver = doc.get("verify", {})
    if ver is False:
        opts["verify"] = None
    elif ver is True or ver is None:
        opts["verify"] = VerifySpec()
    elif isinstance(ver, dict):
        _unknown(p, "verify.", ver, _VERIFY)
        opts["verify"] = VerifySpec(
            repeats=_int(p, "verify.repeats", ver.get("repeats", 10), 5) or 10,
            threshold=_num(p, "verify.threshold", ver.get("threshold", 0.03), lo=0, hi=10, open_lo=True)
            or 0.03,
            alpha=_num(p, "verify.alpha", ver.get("alpha", 0.05), lo=0, hi=0.5, open_lo=True) or 0.05,
            reference=bool(_bool(p, "verify.reference", ver.get("reference", True))),
        )
    else:
        p.add("verify", "expected false or a mapping (repeats, threshold, alpha, reference)")

    if doc.get("report") is not None:
        if not isinstance(doc["report"], str) or not doc["report"].strip():
            p.add("report", "expected a folder path")
        else:
            opts["report"] = (base / doc["report"]).resolve()

    kernels: list[KernelJob] = []
    raw_kernels = doc.get("kernels")
    if raw_kernels is None:
        p.add("kernels", "missing: list at least one kernel file (kernels: [{file: ...}])")
    elif not isinstance(raw_kernels, list) or not raw_kernels:
        p.add("kernels", "expected a non-empty list of {file: ..., shapes: [...]}")
    else:
        for i, k in enumerate(raw_kernels):
            where = f"kernels[{i}]"
            if isinstance(k, str):
                k = {"file": k}
            if not isinstance(k, dict):
                p.add(where, "expected a mapping with a file")
                continue
            _unknown(p, f"{where}.", k, _KERNEL)
            f = k.get("file")
            if not isinstance(f, str) or not f.strip():
                p.add(f"{where}.file", "missing: the kernel file")
                continue
            file = (base / f).resolve()
            if not file.is_file():
                p.add(f"{where}.file", f"no such kernel file {f} (relative paths start at the job file)")
            raw_shapes = k.get("shapes", ["default"])
            if isinstance(raw_shapes, (str, dict)):
                raw_shapes = [raw_shapes]
            shapes: list[Any] = []
            if not isinstance(raw_shapes, list) or not raw_shapes:
                p.add(f"{where}.shapes", "expected a non-empty list")
            else:
                for j, s in enumerate(raw_shapes):
                    entry = _shape_entry(p, f"{where}.shapes[{j}]", s)
                    if entry is not None and entry not in shapes:
                        shapes.append(entry)
            ev = _int(p, f"{where}.evaluations", k["evaluations"], 1) if "evaluations" in k else None
            kernels.append(
                KernelJob(file, tuple(shapes), ev, strategy(f"{where}.strategy", k.get("strategy")))
            )
    p.raise_if_any()
    return Job(path=path, kernels=tuple(kernels), **opts)
