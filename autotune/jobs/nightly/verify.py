"""Re-measure stored best configs on this machine through the tuner's pipeline (the same workers, checks and
timing as a search), interleaved with the kernel's default config as the in-run reference, judge each with
``regression.judge`` and store every verification as a new row."""

from __future__ import annotations

import socket
import statistics
import time
from typing import TYPE_CHECKING, Any

from autotune.engine import Candidate
from autotune.jobs.nightly import regression
from autotune.jobs.nightly.job import VerifySpec
from autotune.jobs.nightly.planner import VerifyPlan
from autotune.trial import TrialStatus, config_hash

if TYPE_CHECKING:
    from autotune.store.protocols import StoreReader


def _baseline(store: StoreReader, item: VerifyPlan) -> tuple[list[float] | float, str | None]:
    """(baseline samples or the stored time, the status of the config's last verification)."""
    history = store.verifications.recorded(item.key_id, config_hash=config_hash(item.config))
    previous = history[-1].status if history else None
    for v in history:
        if v.status in (regression.OK, regression.IMPROVED) and len(v.samples_s) >= 3:
            return v.samples_s, previous
    return item.stored_s, previous


def verify_one(
    tuner: Any,
    store: StoreReader,
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

    pipeline = tuner.pipeline
    best_h = config_hash(item.config)
    with_ref = spec.reference and default_config is not None and config_hash(default_config) != best_h
    samples: list[float] = []
    refs: list[float] = []
    errors: list[str] = []
    cut = False
    for i in range(spec.repeats):
        if time.monotonic() >= deadline:
            errors.append(f"deadline reached after {i} of {spec.repeats} repeats")
            cut = True
            break
        batch = [("best", item.config)] + ([("ref", default_config)] if with_ref else [])
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
                (samples if role == "best" else refs).append(float(res.time_s))
            elif role == "best":
                errors.append(f"{res.status.value}: {(res.error or '')[:200]}")
    if cut and len(samples) < 3:
        return None  # no verdict possible: not stored (the next run verifies it)
    v = Verification(
        key_id=item.key_id,
        run_id=run_id,
        kernel_name=kernel_name,
        shape_key=item.shape_key,
        device_name=device_name,
        config=dict(item.config),
        config_hash=best_h,
        samples_s=samples,
        threshold=spec.threshold,
        status=regression.FAILED,
        trial_id=item.trial_id,
        reference_s=refs or None,
        hostname=socket.gethostname(),
    )
    baseline, previous = _baseline(store, item)
    if len(samples) >= 3:
        verdict = regression.judge(
            samples, baseline, threshold=spec.threshold, alpha=spec.alpha, previous=previous
        )
        v.status, v.ratio, v.p_value = verdict.status, verdict.ratio, verdict.p_value
        v.baseline_s, v.median_s = verdict.baseline_s, verdict.median_s
        if errors:
            v.error = "; ".join(errors)[:1000]
    else:
        v.median_s = statistics.median(samples) if samples else None
        v.baseline_s = baseline if isinstance(baseline, float) else statistics.median(baseline)
        v.error = ("; ".join(errors) or "too few timed repeats")[:1000]
    v.id = store.verifications.record(v)
    return v
