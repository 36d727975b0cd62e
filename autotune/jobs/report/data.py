"""The report's content, read from the store: one plain-JSON document that the HTML, the Markdown and the
JSON outputs all render (so they never disagree)."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from autotune.engine.faults import label
from autotune.records import KeyState
from autotune.stats import Ratio, paired_ratio
from autotune.trial import KIND_SEARCH, TrialStatus, config_hash

if TYPE_CHECKING:
    from autotune.store.protocols import StoreReader


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None


def collect(
    store: StoreReader, *, since: datetime | None = None, run_id: str | None = None
) -> dict[str, Any]:
    """Everything the report shows. ``since``: only keys, verifications and runs from then on;
    ``run_id``: the run the report is about (default: the newest)."""
    runs = store.verifications.runs(since=since)
    states = (
        store.history.key_states()
    )  # every key: the current state is always shown, ``since`` bounds history
    verifications = store.verifications.recorded(since=since)
    by_key_ver: dict[int, list[Any]] = {}
    for v in verifications:
        by_key_ver.setdefault(v.key_id, []).append(v)

    groups: dict[tuple[str, str, str], list[KeyState]] = {}
    for s in states:
        groups.setdefault((s.kernel_name, s.shape_key, s.device_name), []).append(s)
    shapes = [_shape(store, group, keys, by_key_ver) for group, keys in sorted(groups.items())]

    chosen = None
    if runs:
        chosen = next((r for r in runs if r.run_id == run_id), None) if run_id else None
        chosen = chosen or runs[-1]
    regressions = [
        {"kernel": s["kernel"], "shape": s["shape"], "device": s["device"], **s["last_verification"]}
        for s in shapes
        if s["last_verification"] and s["last_verification"]["status"] in ("regression", "confirmed")
    ]
    return {
        "generated_at": datetime.now(timezone.utc).isoformat(),
        "database": store.masked_url,
        "since": _iso(since),
        "run": None if chosen is None else _run(chosen),
        "runs": [_run_row(r) for r in runs],
        "shapes": shapes,
        "regressions": regressions,
        "requests": [
            {"kernel": r.kernel_name, "shape": r.shape_key, "device": r.device_name, "count": r.count}
            for r in store.requests.recorded(since=since)[:50]
        ],
    }


def _shape(
    store: StoreReader, group: tuple[str, str, str], keys: list[KeyState], by_key_ver: dict[int, list[Any]]
) -> dict[str, Any]:
    """One (kernel, shape, device): its current best, and every key (version) and verification of it."""
    kernel, shape_key, device = group
    keys.sort(key=lambda s: (s.created_at, s.key_id))
    versions = [_version(store, s, by_key_ver.get(s.key_id, [])) for s in keys]
    ver = [_verification(v) for s in keys for v in by_key_ver.get(s.key_id, [])]
    ver.sort(key=lambda v: v["created_at"] or "")
    current = versions[-1]
    return {
        "kernel": kernel,
        "shape": shape_key,
        "device": device,
        "best_s": current["best_s"],
        "best_samples": current["best_samples"],
        "best_interval_s": current["best_interval_s"],
        "best_config": current["best_config"],
        "default_s": current["default_s"],
        "speedup_default": current["speedup_default"],
        "speedup_interval": current["speedup_interval"],
        "speedup_pairs": current["speedup_pairs"],
        "speedup_from": current["speedup_from"],
        # the kernel's own reference (e.g. cuBLASLt) is not timed by the engine yet
        "speedup_reference": None,
        "environment": current["environment"],
        # by type: "crashed (illegal address)", "launch_failed (out of memory)" (``engine.faults.label``)
        "failures": current["failures"],
        "last_verification": ver[-1] if ver else None,
        "versions": versions,
        "verifications": ver,
    }


def _speedup(s: KeyState, default_s: float | None) -> Ratio | None:
    """The tuning-time speed-up: the best row's paired ratio with its interval, else (rows stored before
    pairs existed) the two medians' ratio, without an interval."""
    if s.best_speedup is not None:
        return Ratio(s.best_speedup, s.best_speedup_low, s.best_speedup_high, s.best_pairs or 0)
    if default_s and s.best_time_s:
        return Ratio(default_s / s.best_time_s, None, None, 0)
    return None


def _version(store: StoreReader, s: KeyState, vs: list[Any]) -> dict[str, Any]:
    """One tuning key of a shape (its environment, best and trial history)."""
    measured = store.trials.recorded(s.key_id, retimed=True)
    trials = [t for t in measured if t.kind == KIND_SEARCH]
    timed = [t for t in trials if t.timed]
    default_s = None
    if timed:  # a search evaluates the default config first; its median over any re-timings, as the best's
        default = config_hash(timed[0].config)
        default_s = statistics.median(
            t.time_s for t in measured if t.timed and config_hash(t.config) == default and t.time_s
        )
    speedup = _speedup(s, default_s)
    speedup_from = "tuning" if speedup else None
    # the speedup the report shows beside a verdict comes from the same run as the verdict: the last
    # verification's best and reference, timed interleaved (never a stale best against a fresh default),
    # their ratio over the paired rounds with its interval
    last = next((v for v in reversed(vs) if v.reference_s and v.samples_s), None)
    if last is not None and len(last.reference_s) == len(last.samples_s):
        default_s = statistics.median(last.reference_s)
        speedup = paired_ratio(last.reference_s, last.samples_s)
        speedup_from = f"verification {last.run_id}"
    return {
        "key_id": s.key_id,
        "created_at": _iso(s.created_at),
        "environment": f"torch {s.torch}, triton {s.triton}, driver {s.driver}",
        "source": s.source_hash[:8],
        "best_s": s.best_time_s,
        "best_samples": s.best_samples,
        "best_interval_s": [s.best_ci_low_s, s.best_ci_high_s] if s.best_ci_low_s is not None else None,
        "best_config": s.best_config,
        "default_s": default_s,
        "speedup_default": speedup.value if speedup else None,
        "speedup_interval": [speedup.low, speedup.high] if speedup and speedup.low is not None else None,
        "speedup_pairs": speedup.pairs if speedup else None,
        "speedup_from": speedup_from,
        "trials": s.trials,
        # the searches' own evaluations by status (the finalists' re-timings are not new configs)
        "counts": dict(Counter(t.status.value for t in trials)),
        "failures": dict(sorted(Counter(label(t) for t in trials if t.status is not TrialStatus.OK).items())),
        "history": [
            {"i": i, "time_s": t.time_s if t.timed else None, "status": t.status.value}
            for i, t in enumerate(trials)
            if t.status is not TrialStatus.INVALID
        ],
    }


def _verification(v: Any) -> dict[str, Any]:
    return {
        "run_id": v.run_id,
        "created_at": _iso(v.created_at),
        "median_s": v.median_s,
        "baseline_s": v.baseline_s,
        "ratio": v.ratio,
        "p_value": v.p_value,
        "status": v.status,
        "key_id": v.key_id,
        "reference_s": statistics.median(v.reference_s) if v.reference_s else None,
        "error": v.error,
        "tuned_ratio": v.tuned_ratio,
        "run_ratio": statistics.median(v.ratios) if v.ratios else None,
        "clocks": clocks_text(v.clock_min_mhz, v.clock_max_mhz, v.throttled),
        "throttled": v.throttled,
    }


def clocks_text(lo: float | None, hi: float | None, throttled: int | None = None) -> str | None:
    """The SM clock range a verification's samples ran at ("1755-1980 MHz", with the throttled samples left
    out), None where no clocks were recorded (a CPU, no NVML)."""
    if lo is None or hi is None:
        return f"{throttled} throttled left out" if throttled else None
    text = f"{lo:.0f} MHz" if lo == hi else f"{lo:.0f}-{hi:.0f} MHz"
    return text + (f", {throttled} throttled left out" if throttled else "")


def _run(r: Any) -> dict[str, Any]:
    """The run the report is about."""
    return {
        "run_id": r.run_id,
        "job": r.job_name,
        "host": r.hostname,
        "status": r.status,
        "started_at": _iso(r.started_at),
        "finished_at": _iso(r.finished_at),
        "summary": r.summary,
    }


def _run_row(r: Any) -> dict[str, Any]:
    """A run in the list of runs."""
    return {
        "run_id": r.run_id,
        "job": r.job_name,
        "host": r.hostname,
        "status": r.status,
        "started_at": _iso(r.started_at),
        "finished_at": _iso(r.finished_at),
        "shapes": len(r.summary.get("shapes", [])),
        "verified": len(r.summary.get("verifications", [])),
        "regressions": r.summary.get("regressions", 0),
        "confirmed": r.summary.get("confirmed", 0),
    }
