"""Nightly verification under real conditions, on simulated devices (the real tuner, store, claims and rank
test; the timing and the clocks are a model): throttled rounds left out, samples in different clock bands
inconclusive, too few rounds stored as inconclusive, one run at a time verifying a best (its claim), a run
that achieved nothing exits 3, the budget keeps the report's reserve, the report's speedup and clocks come
from the verification's own run."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from autotune.jobs.nightly import KernelJob, VerifySpec
from autotune.jobs.nightly.runner import EXIT_IDLE, _deadline
from autotune.jobs.nightly.verify import verify_claim
from autotune.store import ClaimState, Owner, Store, Verification
from autotune.trial import config_hash
from tests.test_nightly_sim import NoisyKernel, job, run


class ClockedKernel(NoisyKernel):
    """NoisyKernel with GPU clocks: while ``clocked`` is on, ``pattern(i, role)`` of the i-th best (or
    reference) measurement gives (SM clock MHz, throttled, time factor); otherwise every measurement ran at
    1980 MHz."""

    def __init__(self, pattern, **kw):
        super().__init__(**kw)
        self.pattern = pattern
        self.clocked = False
        self.best: dict | None = None
        self.calls = {"best": 0, "ref": 0}

    def __call__(self, config, shape):
        res = super().__call__(config, shape)
        clock, throttled, factor = 1980.0, False, 1.0
        if self.clocked:
            role = "best" if dict(config) == self.best else "ref"
            clock, throttled, factor = self.pattern(self.calls[role], role)
            self.calls[role] += 1
        return replace(
            res,
            time_s=res.time_s * factor,
            clock_min_mhz=clock,
            clock_max_mhz=1980.0 if throttled else clock,
            clock_limit_mhz=1980.0,
            throttle_reasons="sw_power_cap" if throttled else "",
            throttled=throttled,
            retakes=3 if throttled else 0,
        )


def one_shape(url, tmp_path, **kw):
    return job(url, tmp_path, kernels=(KernelJob(tmp_path / "sim.py", ({"N": 64},)),), **kw)


def tuned(url, tmp_path, kernel: ClockedKernel, **kw):
    """The job after a first run that tuned its shape; the kernel then reports clocks by its pattern."""
    j = one_shape(url, tmp_path, **kw)
    run(j, kernel)
    kernel.best = Store(url).history.key_states()[0].best_config
    kernel.clocked = True
    return j


def test_throttled_rounds_are_left_out_of_the_verdict(sqlite_url, tmp_path):
    """6 of 10 best measurements stayed throttled and ran 2x slower: with them the median is slow (a
    regression); without them the 4 clean rounds say ok, and the row says how many were left out."""
    kernel = ClockedKernel(
        lambda i, role: (1100.0, True, 2.0) if role == "best" and i < 6 else (1980.0, False, 1.0)
    )
    j = tuned(sqlite_url, tmp_path, kernel)
    result = run(j, kernel)
    (v,) = result.verifications
    assert v["status"] == "ok", v
    assert v["throttled"] == 6 and len(v["samples_s"]) == 4 and len(v["ratios"]) == 4
    assert "6 throttled measurement(s) left out" in v["error"]
    assert v["clock_min_mhz"] == v["clock_max_mhz"] == 1980.0  # the kept samples' clocks only


def test_samples_in_different_clock_bands_are_inconclusive_never_a_regression(sqlite_url, tmp_path):
    """Half the rounds at 1500 MHz (not throttled: above 0.75 x 1980) and 30 % slower: compared with the
    1980 MHz rounds nothing can be said."""
    kernel = ClockedKernel(lambda i, role: (1500.0, False, 1.3) if i % 2 else (1980.0, False, 1.0))
    j = tuned(sqlite_url, tmp_path, kernel, verify=VerifySpec(repeats=10, reference=False))
    (v,) = run(j, kernel).verifications
    assert v["status"] == "inconclusive", v
    assert "different clock bands (1500-1980 MHz" in v["error"]
    assert (v["clock_min_mhz"], v["clock_max_mhz"]) == (1500.0, 1980.0)


def test_absolute_times_at_another_clock_than_tuning_are_inconclusive(sqlite_url, tmp_path):
    """Without a reference the stored trial is the baseline: tonight's 1500 MHz against tuning's 1980 MHz."""
    kernel = ClockedKernel(lambda i, role: (1500.0, False, 1.3))
    j = tuned(sqlite_url, tmp_path, kernel, verify=VerifySpec(repeats=5, reference=False))
    (v,) = run(j, kernel).verifications
    assert v["status"] == "inconclusive" and "clock bands" in v["error"], v


def test_fewer_than_3_usable_rounds_are_stored_as_inconclusive(sqlite_url, tmp_path):
    kernel = ClockedKernel(lambda i, role: (1100.0, True, 1.0) if i >= 2 else (1980.0, False, 1.0))
    j = tuned(sqlite_url, tmp_path, kernel, verify=VerifySpec(repeats=6))
    (v,) = run(j, kernel).verifications
    assert v["status"] == "inconclusive" and len(v["samples_s"]) == 2, v
    assert "fewer than 3" in v["error"]
    (row,) = Store(sqlite_url).verifications.recorded()
    assert row.status == "inconclusive" and row.throttled == 8  # 4 best + 4 reference measurements


def test_a_verification_held_by_another_run_is_skipped_and_the_idle_run_exits_3(sqlite_url, tmp_path):
    """Issue 21 row 11: the claim verify:<config hash> on the key. A live run holds it: this run skips the
    config (and, having done nothing else, exits 3 saying why); released, the next run verifies it."""
    kernel = NoisyKernel()
    j = one_shape(sqlite_url, tmp_path)
    run(j, kernel)
    store = Store(sqlite_url)
    state = store.history.key_states()[0]
    other = Owner()
    claim = verify_claim(config_hash(state.best_config))
    assert store.claims.claim(state.key_id, claim, other, lease_s=600).state is ClaimState.CLAIMED
    blocked = run(j, kernel)
    assert blocked.verifications == [] and blocked.verify_skipped[0]["reason"] == (
        "another nightly run is verifying it"
    )
    assert blocked.exit_code(fail_on_regression=False) == EXIT_IDLE
    assert "every verification was taken by another run" in blocked.idle_reason
    assert store.claims.running(state.key_id) == {claim: other.id}  # the holder's claim is untouched
    store.claims.release(other)
    (v,) = run(j, kernel).verifications
    assert v["status"] == "ok"
    assert store.claims.running(state.key_id) == {}  # released after verifying


def test_a_best_another_run_verified_meanwhile_is_not_verified_again(sqlite_url, tmp_path):
    kernel = NoisyKernel()
    j = one_shape(sqlite_url, tmp_path)
    run(j, kernel)
    store = Store(sqlite_url)
    state = store.history.key_states()[0]
    store.verifications.record(
        Verification(
            key_id=state.key_id,
            run_id="other-run",
            kernel_name=state.kernel_name,
            shape_key=state.shape_key,
            device_name=state.device_name,
            config=state.best_config,
            config_hash=config_hash(state.best_config),
            samples_s=[1.0, 1.0, 1.0],
            threshold=0.03,
            status="ok",
            # finished after this run started (a concurrent run that claimed it first)
            created_at=datetime.now(timezone.utc) + timedelta(hours=1),
        )
    )
    result = run(j, kernel)
    assert result.verifications == []
    assert result.verify_skipped[0]["reason"] == "verified by run other-run"


def test_a_run_that_achieved_nothing_exits_3_with_a_reason_but_a_dry_run_does_not(sqlite_url, tmp_path):
    kernel = NoisyKernel()
    spent = run(one_shape(sqlite_url, tmp_path, budget_s=1e-9), kernel)
    assert spent.exit_code(fail_on_regression=False) == EXIT_IDLE
    assert spent.idle_reason.startswith("nothing evaluated or verified: budget or deadline reached")
    assert spent.summary()["idle"] == spent.idle_reason
    planned = run(one_shape(sqlite_url, tmp_path, budget_s=1e-9), kernel, dry_run=True)
    assert planned.exit_code(fail_on_regression=False) == 0 and planned.idle_reason is None
    done = run(one_shape(sqlite_url, tmp_path), kernel)
    assert done.exit_code(fail_on_regression=False) == 0 and done.idle_reason is None


def test_the_budget_keeps_time_for_the_report(sqlite_url, tmp_path):
    t0 = time.monotonic()
    assert _deadline(one_shape(sqlite_url, tmp_path, budget_s=300.0, report=tmp_path / "r"), t0) == t0 + 290.0
    assert _deadline(one_shape(sqlite_url, tmp_path, budget_s=50.0, report=tmp_path / "r"), t0) == t0 + 45.0
    assert _deadline(one_shape(sqlite_url, tmp_path, budget_s=50.0), t0) == t0 + 50.0
    assert _deadline(one_shape(sqlite_url, tmp_path), t0) == float("inf")


def test_the_report_takes_speedup_and_clocks_from_the_verification_run(sqlite_url, tmp_path):
    """Issue 22 item 5: "7.34x speedup" beside "regression 32x" came from a stale stored best against a
    fresh default. The speedup now comes from the last verification's interleaved best and reference."""
    from autotune.jobs.report import data, markdown

    kernel = ClockedKernel(lambda i, role: (1755.0, False, 1.0))
    j = tuned(sqlite_url, tmp_path, kernel)
    store = Store(sqlite_url)
    with store.db.engine.begin() as conn:  # the stored best claims 10x faster than it runs
        from sqlalchemy import text

        conn.execute(text("UPDATE autotune_best_configs SET time_s = time_s / 10"))
    (v,) = run(j, kernel).verifications
    doc = data.collect(store)
    (shape,) = doc["shapes"]
    # the paired ratio over the verification's interleaved rounds (issue 43), not the stale stored best's
    from autotune.stats import paired_ratio

    assert shape["speedup_default"] == pytest.approx(paired_ratio(v["reference_s"], v["samples_s"]).value)
    assert shape["speedup_from"] == f"verification {v['run_id']}"
    assert shape["last_verification"]["clocks"] == "1755 MHz"
    assert "1755 MHz" in markdown.render_markdown(doc)
