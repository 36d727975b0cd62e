"""Re-measure stored best configs on this machine through the tuner's pipeline (the same workers, checks and
timing as a search), interleaved round by round with the kernel's default config as the in-run reference,
judge each with ``regression.judge`` and store every verification as a new row.

The verdict compares like with like: with a reference, the per-round ratio best/reference against that
ratio at tuning time (a machine that is slower tonight, or runs at a lower clock, slows both); rounds with
a measurement that stayed throttled (``TrialResult.throttled``) are left out; samples whose clocks lie in
different bands give ``inconclusive``, never a regression, and so does a verification that ends with fewer
than 3 usable rounds (it is stored: the time was spent, and the report says why).

Two nightly runs never verify the same best at once: a verification holds the claim ``verify:<config hash>``
on the key while it measures (issue 21, row 11), and skips a config another run verified since this run
started."""

from __future__ import annotations

import socket
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from autotune.engine import Candidate
from autotune.jobs.nightly import regression
from autotune.jobs.nightly.job import VerifySpec
from autotune.jobs.nightly.planner import VerifyPlan
from autotune.trial import TrialResult, TrialStatus, config_hash

#: the claim a verification holds is (key, ``verify_claim(config hash)``)
VERIFY_CLAIM_PREFIX = "verify:"


def verify_claim(best_hash: str) -> str:
    """The claims row's config_hash of the claim ``verify:<config hash>``, hashed to the column's 32
    characters (it never equals a config's own hash: those hash the config's JSON)."""
    return config_hash({"claim": VERIFY_CLAIM_PREFIX + best_hash})


@dataclass(frozen=True)
class Skipped:
    """A verification not made, and why (another run holds it or verified it)."""

    reason: str


def _baseline_ratios(
    store: Any, item: VerifyPlan
) -> tuple[list[float] | None, list[float] | float, str | None]:
    """(baseline ratios from the first earlier verification with a reference that was not a regression,
    the absolute baseline: samples or the stored time, the status of the config's last verification)."""
    history = store.verifications.recorded(item.key_id, config_hash=config_hash(item.config))
    previous = history[-1].status if history else None
    ratios: list[float] | None = None
    absolute: list[float] | float = item.stored_s
    for v in history:
        if v.status not in (regression.OK, regression.IMPROVED):
            continue
        if ratios is None and v.ratios and len(v.ratios) >= 3:
            ratios = [float(x) for x in v.ratios]
        if isinstance(absolute, float) and len(v.samples_s) >= 3:
            absolute = [float(x) for x in v.samples_s]
    return ratios, absolute, previous


def tuned_ratio(store: Any, item: VerifyPlan, default_config: dict[str, Any] | None) -> float | None:
    """best / default at tuning time: the stored best's time over the default config's stored trial."""
    if default_config is None:
        return None
    default = store.trials.find(item.key_id, config_hash(default_config))
    if default is None or not default.timed or not default.time_s or not item.stored_s:
        return None
    return item.stored_s / default.time_s


def verify_one(
    tuner: Any,
    store: Any,
    item: VerifyPlan,
    spec: VerifySpec,
    *,
    run_id: str,
    default_config: dict[str, Any] | None,
    device_name: str,
    kernel_name: str,
    deadline: float,
    owner: Any = None,
    since: datetime | None = None,
) -> Any:
    """Verify ``item`` under its claim: the stored ``Verification``; ``Skipped`` when another run holds
    the claim or verified the config after ``since``; None when the deadline came before the first round
    (nothing measured, nothing stored)."""
    from autotune.engine.leases import LeaseKeeper
    from autotune.store import ClaimState, Owner

    owner = owner or Owner()
    lease_s = float(getattr(getattr(tuner, "settings", None), "lease_s", 30.0))
    claim = verify_claim(config_hash(item.config))
    got = store.claims.claim(item.key_id, claim, owner, lease_s=lease_s)
    if got.state is not ClaimState.CLAIMED:
        return Skipped("another nightly run is verifying it")
    try:
        if since is not None:
            done = store.verifications.recorded(
                item.key_id, config_hash=config_hash(item.config), since=since
            )
            others = [v for v in done if v.run_id != run_id]
            if others:
                return Skipped(f"verified by run {others[-1].run_id}")
        with LeaseKeeper(store.claims, owner, lease_s):
            return _verify(
                tuner, store, item, spec, run_id, default_config, device_name, kernel_name, deadline
            )
    finally:
        store.claims.release(owner, [claim])


def _verify(
    tuner: Any,
    store: Any,
    item: VerifyPlan,
    spec: VerifySpec,
    run_id: str,
    default_config: dict[str, Any] | None,
    device_name: str,
    kernel_name: str,
    deadline: float,
) -> Any:
    from autotune.store import Verification

    best_h = config_hash(item.config)
    with_ref = spec.reference and default_config is not None and config_hash(default_config) != best_h
    batch = [("best", item.config)] + ([("ref", default_config)] if with_ref else [])
    m = _measure(tuner.pipeline, item, batch, spec.repeats, deadline)
    if not m.rounds:
        return None  # the deadline came first: nothing was measured
    v = Verification(
        key_id=item.key_id,
        run_id=run_id,
        kernel_name=kernel_name,
        shape_key=item.shape_key,
        device_name=device_name,
        config=dict(item.config),
        config_hash=best_h,
        samples_s=[],
        threshold=spec.threshold,
        status=regression.FAILED,
        trial_id=item.trial_id,
        hostname=socket.gethostname(),
    )
    stored = store.trials.find(item.key_id, best_h)
    tuned = tuned_ratio(store, item, default_config) if with_ref else None
    _judge(v, m, with_ref, tuned, stored, *_baseline_ratios(store, item), spec)
    v.id = store.verifications.record(v)
    return v


@dataclass
class _Round:
    """One interleaved round: the best config's result and the reference's (None without one)."""

    best: TrialResult | None = None
    ref: TrialResult | None = None


@dataclass
class _Measured:
    rounds: list[_Round] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cut: bool = False  # the deadline came before every repeat


def _measure(
    pipeline: Any, item: VerifyPlan, batch: list[tuple[str, Any]], repeats: int, deadline: float
) -> _Measured:
    """``repeats`` rounds of ``batch`` (the best config, then the reference if any) through the pipeline.
    A round starts only while the time left covers the longest round so far: the deadline is overshot by
    at most one evaluation (the first round's, before any duration is known)."""
    m = _Measured()
    longest = 0.0
    for i in range(repeats):
        left = deadline - time.monotonic()
        if left <= 0 or (m.rounds and left < longest):
            m.errors.append(f"deadline reached after {i} of {repeats} repeats")
            m.cut = True
            break
        t0 = time.monotonic()
        for role, config in batch:
            pipeline.submit(
                Candidate(dict(config), config_hash(config), dict(item.shape), extra={"role": role})
            )
        r = _Round()
        for _ in batch:
            out = None
            while out is None:
                out = pipeline.next_result(timeout=1.0)
            res, role = out.result, out.candidate.extra.get("role")
            setattr(r, role, res)
            if role == "best" and not (res.status is TrialStatus.OK and res.time_s):
                m.errors.append(f"{res.status.value}: {(res.error or '')[:200]}")
        m.rounds.append(r)
        longest = max(longest, time.monotonic() - t0)
    return m


def _usable(res: TrialResult | None) -> bool:
    return res is not None and res.status is TrialStatus.OK and bool(res.time_s) and not res.throttled


@dataclass
class _Kept:
    """The rounds the verdict rests on, and what was left out."""

    samples: list[float]
    refs: list[float]
    ratios: list[float]
    results: list[TrialResult]
    throttled: int
    timed: int  # rounds whose best config was timed ok (throttled or not)


def _kept(m: _Measured, with_ref: bool) -> _Kept:
    samples, refs, ratios, results = [], [], [], []
    throttled = timed = 0
    for r in m.rounds:
        throttled += sum(1 for x in (r.best, r.ref) if x is not None and x.throttled)
        if r.best is not None and r.best.status is TrialStatus.OK and r.best.time_s:
            timed += 1
        if not _usable(r.best) or (with_ref and not _usable(r.ref)):
            continue
        assert r.best is not None and r.best.time_s
        samples.append(float(r.best.time_s))
        results.append(r.best)
        if with_ref:
            assert r.ref is not None and r.ref.time_s
            refs.append(float(r.ref.time_s))
            ratios.append(float(r.best.time_s) / float(r.ref.time_s))
            results.append(r.ref)
    return _Kept(samples, refs, ratios, results, throttled, timed)


def _judge(
    v: Any,
    m: _Measured,
    with_ref: bool,
    tuned: float | None,
    stored: TrialResult | None,
    base_ratios: list[float] | None,
    absolute: list[float] | float,
    previous: str | None,
    spec: VerifySpec,
) -> None:
    """Fill ``v``'s verdict (see the module docstring)."""
    k = _kept(m, with_ref)
    v.samples_s, v.reference_s = k.samples, (k.refs or None)
    v.ratios, v.tuned_ratio, v.throttled = (k.ratios or None), tuned, k.throttled
    lo, hi = regression.clock_range(k.results)
    v.clock_min_mhz, v.clock_max_mhz = lo, hi
    v.median_s = statistics.median(k.samples) if k.samples else None
    v.baseline_s = absolute if isinstance(absolute, float) else statistics.median(absolute)
    notes = list(m.errors)
    if k.throttled:
        notes.append(f"{k.throttled} throttled measurement(s) left out")
    if len(k.samples) < 3:
        if k.timed < 3 and not m.cut and not k.throttled:
            v.status = regression.FAILED  # the config itself did not run: a finding, not a lack of time
            notes = notes or ["too few timed repeats"]
        else:
            v.status = regression.INCONCLUSIVE
            notes.append(f"{len(k.samples)} usable round(s): fewer than 3, no verdict")
        v.error = "; ".join(notes)[:1000]
        return
    # the tuning trial's clocks matter only when absolute times are compared
    against = k.results + ([stored] if stored is not None and not (with_ref and tuned) else [])
    band = regression.band_split(against)
    if band:
        v.status = regression.INCONCLUSIVE
        v.error = "; ".join([*notes, band])[:1000]
        return
    if with_ref and tuned:
        verdict = regression.judge(
            k.ratios, base_ratios or tuned, threshold=spec.threshold, alpha=spec.alpha, previous=previous
        )
    else:
        verdict = regression.judge(
            k.samples, absolute, threshold=spec.threshold, alpha=spec.alpha, previous=previous
        )
        v.baseline_s = verdict.baseline_s
    v.status, v.ratio, v.p_value = verdict.status, verdict.ratio, verdict.p_value
    if notes:
        v.error = "; ".join(notes)[:1000]
