"""The isolated worker: every candidate failure becomes a status, and the worker survives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.engine import EvalOptions, Worker
from autotune.errors import KernelFileError
from autotune.trial import TrialStatus

FAULTY = str(Path(__file__).parent / "kernels" / "faulty.py")
SHAPE = {"N": 64}


@pytest.fixture(scope="module")
def worker():
    w = Worker(FAULTY, "cpu", EvalOptions(num_tests=3))
    w.start()
    yield w
    w.close()


def ev(worker, mode, compile_timeout_s=60, run_timeout_s=120):
    """Generous bounds unless a hang is the point: a loaded machine must not turn an ok into a timeout."""
    worker.options.compile_timeout_s, worker.options.run_timeout_s = compile_timeout_s, run_timeout_s
    return worker.evaluate({"MODE": mode}, SHAPE)


def test_worker_reports_kernel_meta(worker):
    meta = worker.info.meta
    assert meta.name == "faulty" and meta.shape_params == ("N",)
    assert worker.info.device == "cpu" and worker.info.facts["cc"] == 0
    assert worker.info.env["device_kind"] == "cpu"


@pytest.mark.parametrize(
    "mode,status,text",
    [
        ("ok", TrialStatus.OK, None),
        ("compile_error", TrialStatus.COMPILE_FAILED, "synthetic compile error"),
        ("launch_error", TrialStatus.LAUNCH_FAILED, "synthetic launch failure"),
        ("wrong", TrialStatus.WRONG_RESULT, "elements off"),
        ("exit", TrialStatus.CRASHED, "exited with code 13"),
        ("segfault", TrialStatus.CRASHED, "SIGSEGV"),
        ("hang_compile", TrialStatus.TIMEOUT, "compile did not finish"),
        ("hang_run", TrialStatus.TIMEOUT, "run did not finish"),
    ],
)
def test_each_failure_is_a_status_and_the_worker_survives(worker, mode, status, text):
    res = ev(
        worker,
        mode,
        compile_timeout_s=5 if mode == "hang_compile" else 60,
        run_timeout_s=4 if mode == "hang_run" else 120,
    )
    assert res.status is status, res.error
    if text:
        assert text in res.error
    else:
        assert (
            res.time_s > 0 and res.tflops > 0 and res.measured and res.kernels == {"faulty_op": ["faulty_op"]}
        )
    # whatever happened, the next candidate is evaluated normally
    after = ev(worker, "ok")
    assert after.status is TrialStatus.OK, (after.status, after.error)


def test_bad_kernel_files_fail_at_start(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    with pytest.raises(KernelFileError, match="bad.py:1: syntax error"):
        Worker(str(bad), "cpu").start()
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(KernelFileError, match="declares no KERNEL"):
        Worker(str(empty), "cpu").start()
