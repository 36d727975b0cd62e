"""Re-measure stored best configs on this machine through the tuner's pipeline (the same workers, checks and
timing as a search), interleaved round by round with the kernel's default config as the in-run reference,
judge each with ``regression.judge`` and store every verification as a new row.

The verdict compares like with like: with a reference, the per-round ratio best/reference (paired: both
measured side by side in each round) against the same ratios of a baseline, a distribution (``baseline``:
an earlier verification's rounds, else the finalists' paired re-timing rounds at tuning time, else none,
and this run's rounds become the baseline: ``inconclusive``, ``BASELINE_NOTE``); a machine that is slower
tonight, or runs at a lower clock, slows both. A regression needs the effect above the threshold AND a
significant rank test, and ``confirmed`` a second run in a row (``regression.judge``); rounds with
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
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
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


#: the note of a verification that measured the baseline later runs are judged against (its status is
#: ``inconclusive``: it judged nothing); a best stored without paired tuning-time samples gets one first
BASELINE_NOTE = "baseline measured"


@dataclass(frozen=True)
class Baseline:
    """What tonight's rounds are judged against: per-round ratios best/reference, and the best's absolute
    samples (each None where fewer than 3 exist), and the status of the config's last verification."""

    ratios: list[float] | None
    samples: list[float] | None
    previous: str | None
    #: the median ratio best/default at tuning time (shown in the report), from paired re-timings
    tuned: float | None = None


def _is_baseline(v: Any) -> bool:
    """A verification whose rounds may serve as a baseline: not a regression, not failed, measured."""
    ok = v.status in (regression.OK, regression.IMPROVED)
    return ok or (v.status == regression.INCONCLUSIVE and (v.error or "").startswith(BASELINE_NOTE))


def baseline(store: Any, item: VerifyPlan, default_config: dict[str, Any] | None) -> Baseline:
    """The distribution tonight is compared with: the first earlier verification that was not a regression
    (measured the same way, 10 rounds), else the best's and the default's interleaved samples at tuning
    time (the finalists' paired re-timing rounds); never one stored sample (a lucky one made every later
    night a regression)."""
    history = store.verifications.recorded(item.key_id, config_hash=config_hash(item.config))
    previous = history[-1].status if history else None
    ratios: list[float] | None = None
    samples: list[float] | None = None
    for v in history:
        if not _is_baseline(v):
            continue
        if ratios is None and v.ratios and len(v.ratios) >= 3:
            ratios = [float(x) for x in v.ratios]
        if samples is None and len(v.samples_s) >= 3:
            samples = [float(x) for x in v.samples_s]
    tuned_ratios, tuned_samples = tuned_distribution(store, item, default_config)
    tuned = statistics.median(tuned_ratios) if tuned_ratios else None
    return Baseline(ratios or tuned_ratios, samples or tuned_samples, previous, tuned)


def tuned_distribution(
    store: Any, item: VerifyPlan, default_config: dict[str, Any] | None
) -> tuple[list[float] | None, list[float] | None]:
    """(ratios best/default over the re-timing rounds that measured both, the best's samples) at tuning
    time, each None below 3."""
    best_h = config_hash(item.config)
    default_h = config_hash(default_config) if default_config is not None else None
    rounds: dict[str, dict[str, float]] = {}
    samples: list[float] = []
    for r in store.trials.recorded(item.key_id, retimed=True):
        if not r.timed or not r.time_s:
            continue
        h = config_hash(r.config)
        if h == best_h:
            samples.append(float(r.time_s))
        if r.retime_round and h in (best_h, default_h):
            rounds.setdefault(r.retime_round, {})[h] = float(r.time_s)
    ratios = [d[best_h] / d[default_h] for d in rounds.values() if default_h in d and best_h in d]
    return (ratios if len(ratios) >= 3 else None), (samples if len(samples) >= 3 else None)


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
    _judge(v, m, with_ref, stored, baseline(store, item, default_config if with_ref else None), spec)
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
    stored: TrialResult | None,
    base: Baseline,
    spec: VerifySpec,
) -> None:
    """Fill ``v``'s verdict (see the module docstring)."""
    k = _kept(m, with_ref)
    v.samples_s, v.reference_s = k.samples, (k.refs or None)
    v.ratios, v.tuned_ratio, v.throttled = (k.ratios or None), base.tuned, k.throttled
    v.clock_min_mhz, v.clock_max_mhz = regression.clock_range(k.results)
    v.median_s = statistics.median(k.samples) if k.samples else None
    v.baseline_s = statistics.median(base.samples) if base.samples else None
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
    against = k.results + ([stored] if stored is not None and not with_ref else [])
    band = regression.band_split(against)
    reference = base.ratios if with_ref else base.samples
    if band or reference is None:
        v.status = regression.INCONCLUSIVE
        # no distribution to compare with (a best stored without paired re-timings): tonight's rounds
        # are the baseline of the next runs, never a verdict against one stored sample
        why = (
            band
            or f"{BASELINE_NOTE}: no earlier baseline of 3 or more rounds; later runs are judged against this one"
        )
        v.error = "; ".join([why, *notes] if not band else [*notes, band])[:1000]
        return
    verdict, note = _verdict(k, base, with_ref, spec)
    v.status, v.ratio, v.p_value = verdict.status, verdict.ratio, verdict.p_value
    if not with_ref:
        v.baseline_s = verdict.baseline_s
    if notes or note:
        v.error = "; ".join([*notes, *([note] if note else [])])[:1000]


def _verdict(k: _Kept, base: Baseline, with_ref: bool, spec: VerifySpec) -> tuple[regression.Verdict, str]:
    """The verdict and a note. With a reference, a change is called only where both lines of evidence
    agree: the ratio best/reference (a machine slower tonight slows both: no call) AND the best's own time
    (a reference that moved alone, as a CPU's Python-heavy default does under load, moves the ratio but
    not the best: no call). A real slowdown of the best shows in both."""
    judge = partial(regression.judge, threshold=spec.threshold, alpha=spec.alpha, previous=base.previous)
    if not with_ref:
        assert base.samples is not None
        return judge(k.samples, base.samples), ""
    assert base.ratios is not None
    by_ratio = judge(k.ratios, base.ratios)
    if by_ratio.status == regression.OK or base.samples is None:
        return by_ratio, ""
    own = judge(k.samples, base.samples)
    both_slower = own.status in regression.REGRESSED and by_ratio.status in regression.REGRESSED
    if own.status == by_ratio.status or both_slower:
        return by_ratio, ""
    note = (
        f"ratio to the reference {by_ratio.ratio:.3f}x but the best's own time {own.ratio:.3f}x of its "
        f"baseline ({own.status}): the reference moved, not the best"
    )
    return replace(by_ratio, status=regression.OK), note
