"""Re-measure stored best configs on this machine through the tuner's pipeline (the same workers, checks and
timing as a search), interleaved with the kernel's default config as the in-run reference, judge each with
``regression.judge`` and store every verification as a new row."""

from __future__ import annotations

import socket
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from autotune.engine import Candidate
from autotune.jobs.nightly import regression
from autotune.jobs.nightly.job import VerifySpec
from autotune.jobs.nightly.planner import VerifyPlan
from autotune.trial import TrialStatus, config_hash


def _baseline(store: Any, item: VerifyPlan) -> tuple[list[float] | float, str | None]:
    """(baseline samples or the stored time, the status of the config's last verification)."""
    history = store.verifications.recorded(item.key_id, config_hash=config_hash(item.config))
    previous = history[-1].status if history else None
    for v in history:
        if v.status in (regression.OK, regression.IMPROVED) and len(v.samples_s) >= 3:
            return v.samples_s, previous
    return item.stored_s, previous


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
) -> Any:
    """Measure ``item``'s config ``spec.repeats`` times (alternating with the default config when
    ``spec.reference``), store the verdict and return the stored ``Verification``; None when the deadline
    came before enough repeats (nothing stored)."""
    from autotune.store import Verification

    best_h = config_hash(item.config)
    with_ref = spec.reference and default_config is not None and config_hash(default_config) != best_h
    batch = [("best", item.config)] + ([("ref", default_config)] if with_ref else [])
    m = _measure(tuner.pipeline, item, batch, spec.repeats, deadline)
    if m.cut and len(m.samples) < 3:
        return None  # no verdict possible: not stored (the next run verifies it)
    v = Verification(
        key_id=item.key_id,
        run_id=run_id,
        kernel_name=kernel_name,
        shape_key=item.shape_key,
        device_name=device_name,
        config=dict(item.config),
        config_hash=best_h,
        samples_s=m.samples,
        threshold=spec.threshold,
        status=regression.FAILED,
        trial_id=item.trial_id,
        reference_s=m.refs or None,
        hostname=socket.gethostname(),
    )
    _judge(v, m, *_baseline(store, item), spec)
    v.id = store.verifications.record(v)
    return v


@dataclass
class _Measured:
    samples: list[float] = field(default_factory=list)  # the best config's times
    refs: list[float] = field(default_factory=list)  # the default config's, interleaved
    errors: list[str] = field(default_factory=list)
    cut: bool = False  # the deadline came before every repeat


def _measure(
    pipeline: Any, item: VerifyPlan, batch: list[tuple[str, Any]], repeats: int, deadline: float
) -> _Measured:
    """``repeats`` rounds of ``batch`` (the best config, then the reference if any) through the pipeline."""
    m = _Measured()
    for i in range(repeats):
        if time.monotonic() >= deadline:
            m.errors.append(f"deadline reached after {i} of {repeats} repeats")
            m.cut = True
            break
        for role, config in batch:
            pipeline.submit(
                Candidate(dict(config), config_hash(config), dict(item.shape), extra={"role": role})
            )
        for _ in batch:
            out = None
            while out is None:
                out = pipeline.next_result(timeout=1.0)
            res, role = out.result, out.candidate.extra.get("role")
            if res.status is TrialStatus.OK and res.time_s:
                (m.samples if role == "best" else m.refs).append(float(res.time_s))
            elif role == "best":
                m.errors.append(f"{res.status.value}: {(res.error or '')[:200]}")
    return m


def _judge(
    v: Any, m: _Measured, baseline: list[float] | float, previous: str | None, spec: VerifySpec
) -> None:
    """Fill ``v``'s verdict: ``regression.judge`` with at least 3 samples, else a failure saying why."""
    if len(m.samples) >= 3:
        verdict = regression.judge(
            m.samples, baseline, threshold=spec.threshold, alpha=spec.alpha, previous=previous
        )
        v.status, v.ratio, v.p_value = verdict.status, verdict.ratio, verdict.p_value
        v.baseline_s, v.median_s = verdict.baseline_s, verdict.median_s
        if m.errors:
            v.error = "; ".join(m.errors)[:1000]
    else:
        v.median_s = statistics.median(m.samples) if m.samples else None
        v.baseline_s = baseline if isinstance(baseline, float) else statistics.median(baseline)
        v.error = ("; ".join(m.errors) or "too few timed repeats")[:1000]
