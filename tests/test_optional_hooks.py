"""A kernel file's ``flops()`` and ``bytes_moved()`` are optional (issue 43, item 5): without them a config
is measured and stored, with no TFLOP/s or GB/s; a hook that raises is a typed, explained note on the
measurement (``KernelHookError``), never a worker crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.engine import EvalOptions, Worker
from autotune.errors import KernelHookError
from autotune.kernel.conformance import check_kernel_file
from autotune.kernel.contract import load_kernel_file
from autotune.trial import TrialStatus

ROWSUM = str(Path(__file__).parent / "kernels" / "rowsum.py")
SHAPE = {"R": 64, "C": 256}


def _evaluate(env: dict[str, str]) -> list:
    with Worker(ROWSUM, "cpu", EvalOptions(num_tests=3, run_timeout_s=300, env=env)) as w:
        w.start()
        return [w.evaluate({"CHUNK": c}, SHAPE) for c in (16, 64)]


def test_a_kernel_without_flops_is_measured_without_throughput():
    for res in _evaluate({}):
        assert res.status is TrialStatus.OK, res.error
        assert res.time_s and res.time_s > 0 and res.tflops is None and res.gbps is None and res.error is None


def test_a_raising_flops_is_an_explained_note_and_the_worker_lives(monkeypatch):
    monkeypatch.setenv("ROWSUM_HOOK", "raise")
    results = _evaluate({"ROWSUM_HOOK": "raise"})
    for res in results:  # both configs: the worker survived the first
        assert res.status is TrialStatus.OK and res.time_s and res.tflops is None
        assert "flops(" in res.error and "KeyError" in res.error and "TFLOP/s" in res.error


def test_the_hooks_are_typed_and_the_check_passes_without_them(monkeypatch):
    loaded = load_kernel_file(ROWSUM)
    assert loaded.flops(SHAPE) is None and loaded.bytes_moved(SHAPE) is None
    checks = check_kernel_file(ROWSUM, "cpu", time_it=False)
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]
    assert any("no flops()" in c.detail for c in checks)
    monkeypatch.setenv("ROWSUM_HOOK", "raise")
    bad = load_kernel_file(ROWSUM)
    with pytest.raises(KernelHookError, match=r"flops\(.*raised KeyError"):
        bad.flops(SHAPE)
    failed = [c for c in check_kernel_file(ROWSUM, "cpu", time_it=False) if not c.ok]
    assert [c.name for c in failed] == ["flops"] and "KeyError" in failed[0].detail
