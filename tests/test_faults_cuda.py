"""CUDA faults typed by what happened (``autotune.engine.faults``), wherever they surface (compile or run),
on real worker processes with a kernel file that raises what a faulty CUDA kernel raises; a run bound
short before the shape has a time, and a slow (not hung) run retried under the fixed run timeout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.engine import EvalOptions, Worker
from autotune.engine.faults import classify, is_worker_death, label, reason_of
from autotune.trial import TrialResult, TrialStatus

KERNELS = Path(__file__).parent / "kernels"
FAULTS = str(KERNELS / "cuda_faults.py")
FAULTY = str(KERNELS / "faulty.py")
SHAPE = {"N": 32}

STICKY = {
    "illegal_address": "illegal address",
    "misaligned": "misaligned address",
    "illegal_instruction": "illegal instruction",
    "assert": "device-side assert",
    "unspecified": "unspecified launch failure",
}


class AcceleratorError(RuntimeError):
    """Named as torch's (2.8+) CUDA error type: classified by its name, without importing torch."""


@pytest.mark.parametrize(
    "exc,phase,status,reason,replace",
    [
        (RuntimeError("CompilationError: at 3:4: bad"), "compile", "compile_failed", None, False),
        (RuntimeError("shape mismatch"), "run", "launch_failed", None, False),
        (
            RuntimeError("CUDA out of memory. Tried to allocate 400 GiB"),
            "compile",
            "launch_failed",
            "out of memory",
            False,
        ),
        (
            RuntimeError("CUDA error: an illegal memory access was encountered"),
            "compile",
            "crashed",
            "illegal address",
            True,
        ),
        (RuntimeError("CUDA error: misaligned address"), "run", "crashed", "misaligned address", True),
        (
            RuntimeError("CUDA error: unspecified launch failure"),
            "run",
            "crashed",
            "unspecified launch failure",
            True,
        ),
        (AcceleratorError("CUDA error: invalid argument"), "compile", "launch_failed", "cuda error", True),
    ],
)
def test_classify(exc, phase, status, reason, replace):
    fault = classify(exc, phase)
    assert (fault.status.value, fault.reason, fault.replace_worker) == (status, reason, replace)
    error = fault.error("detail")
    assert reason_of(error) == reason
    typed = label(TrialResult(fault.status, {}, error=error))
    assert typed == (f"{status} ({reason})" if reason and status != "compile_failed" else status)


def test_torch_oom_type_is_out_of_memory():
    torch = pytest.importorskip("torch")
    fault = classify(torch.OutOfMemoryError("Tried to allocate 2.00 GiB"), "compile")
    assert (fault.status, fault.reason) == (TrialStatus.LAUNCH_FAILED, "out of memory")


def test_a_dead_worker_is_not_a_typed_fault():
    died = TrialResult(TrialStatus.CRASHED, {}, error="worker died: worker killed by SIGSEGV during run")
    typed = TrialResult(TrialStatus.CRASHED, {}, error="illegal address: RuntimeError: CUDA error: ...")
    assert is_worker_death(died) and not is_worker_death(typed)
    assert label(died) == "crashed" and label(typed) == "crashed (illegal address)"


@pytest.fixture(scope="module")
def worker():
    w = Worker(FAULTS, "cpu", EvalOptions(num_tests=2, run_timeout_s=120))
    w.start()
    yield w
    w.close()


def _pid(result: TrialResult) -> str:
    assert result.worker
    return result.worker.rsplit(":", 1)[1]


@pytest.mark.parametrize("where", ["compile", "run"])
def test_each_fault_typed_and_a_poisoned_worker_replaced_before_anything_else(worker, where):
    ok = worker.evaluate({"FAULT": "none", "WHERE": where}, SHAPE)
    assert ok.status is TrialStatus.OK, ok.error
    pid = _pid(ok)

    res = worker.evaluate({"FAULT": "compiler", "WHERE": where}, SHAPE)
    # raised by the kernel's launcher in the run: a failed launch; in compile(): the compiler's error
    assert res.status is (TrialStatus.COMPILE_FAILED if where == "compile" else TrialStatus.LAUNCH_FAILED)
    for fault in ("oom", "oom_text"):
        res = worker.evaluate({"FAULT": fault, "WHERE": where}, SHAPE)
        assert res.status is TrialStatus.LAUNCH_FAILED and reason_of(res.error) == "out of memory", res.error
        assert label(res) == "launch_failed (out of memory)"
    # out of memory leaves the context usable: the same process goes on
    assert _pid(worker.evaluate({"FAULT": "none", "WHERE": where}, SHAPE)) == pid

    # every kind where kernel files usually see it (a first launch in compile()); two in the run
    sticky = STICKY if where == "compile" else {k: STICKY[k] for k in ("illegal_address", "unspecified")}
    for fault, reason in sticky.items():
        res = worker.evaluate({"FAULT": fault, "WHERE": where}, SHAPE)
        assert res.status is TrialStatus.CRASHED and reason_of(res.error) == reason, res.error
        assert label(res) == f"crashed ({reason})"
        assert _pid(res) == pid
        # the process that saw it is gone before it compiles or times anything else
        assert not worker.alive
        after = worker.evaluate({"FAULT": "none", "WHERE": where}, SHAPE)
        assert after.status is TrialStatus.OK and _pid(after) != pid
        pid = _pid(after)


def test_a_compile_worker_that_saw_a_sticky_fault_is_replaced(worker):
    first = worker.compile({"FAULT": "illegal_address", "WHERE": "compile"}, SHAPE)
    assert first.status is TrialStatus.CRASHED and not worker.alive
    again = worker.compile({"FAULT": "none", "WHERE": "compile"}, SHAPE)
    assert again.status is TrialStatus.OK and _pid(again) != _pid(first)


def test_a_slow_run_is_retried_under_the_fixed_timeout_a_hang_is_not(tmp_path):
    # bound 1 s: "slow" returns its first call at once, then takes ~0.5 s per timed call: slow, not hung
    w = Worker(FAULTS, "cpu", EvalOptions(num_tests=3, run_timeout_s=120, run_bound_s=1.0))
    try:
        w.start()
        res = w.evaluate({"FAULT": "slow", "WHERE": "run"}, SHAPE)
        assert res.status is TrialStatus.OK, res.error
    finally:
        w.close()
    # a hang never returns: stopped at the short bound, not retried
    h = Worker(FAULTY, "cpu", EvalOptions(num_tests=3, run_timeout_s=3, run_bound_s=1.0))
    try:
        h.start()
        hang = h.evaluate({"MODE": "hang_run"}, {"N": 64})
        assert hang.status is TrialStatus.TIMEOUT and "run did not finish" in hang.error, hang.error
        assert "retried" not in hang.error
    finally:
        h.close()


def _rows(url: str):
    from sqlalchemy import select

    from autotune.store import Store
    from autotune.store.models import TrialRow

    store = Store(url)
    try:
        with store.db.session() as s:
            rows = s.execute(select(TrialRow).order_by(TrialRow.id)).scalars().all()
            return [(r.config, r.status, r.error, r.started_at, r.finished_at) for r in rows]
    finally:
        store.close()


def test_search_measures_the_default_first_alone_and_shows_fault_types(sqlite_url, tmp_path):
    from tests.test_tuner import autotune

    default = {"FAULT": "none", "WHERE": "compile"}
    listed = [
        {"FAULT": "compiler", "WHERE": "compile"},
        {"FAULT": "oom", "WHERE": "compile"},
        {"FAULT": "illegal_address", "WHERE": "compile"},
        default,  # listed last, measured first
        {"FAULT": "misaligned", "WHERE": "run"},
    ]
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps(listed))
    args = ["search", FAULTS, "--device", "cpu", "--db", sqlite_url, "--configs", str(configs)]
    args += ["--compile-workers", "1", "--num-tests", "2", "--retime-top", "0"]
    proc = autotune(*args, env={"COLUMNS": "300"})
    rows = _rows(sqlite_url)
    statuses = {json.dumps(c, sort_keys=True): (st, reason_of(err)) for c, st, err, _, _ in rows}
    assert statuses == {
        json.dumps(listed[0], sort_keys=True): ("compile_failed", None),
        json.dumps(listed[1], sort_keys=True): ("launch_failed", "out of memory"),
        json.dumps(listed[2], sort_keys=True): ("crashed", "illegal address"),
        json.dumps(default, sort_keys=True): ("ok", None),
        json.dumps(listed[4], sort_keys=True): ("crashed", "misaligned address"),
    }
    # the default went in alone: every other config was put forward once its result was stored
    (done,) = [finished for c, _, _, _, finished in rows if c == default]
    assert all(started >= done for c, _, _, started, _ in rows if c != default)
    # the failures column (the last) of the table's rows: a long cell folds over lines, beside other cells
    rows_text = [line.split("│") for line in proc.stdout.splitlines() if line.count("│") >= 8]
    table = " ".join(" ".join(cells[-2] for cells in rows_text).split())
    for typed in (
        "compile_failed=1",
        "crashed (illegal address)=1",
        "crashed (misaligned address)=1",
        "launch_failed (out of memory)=1",
    ):
        assert typed in table, proc.stdout
    # and the report of the database, by type too
    from autotune.jobs.report import write_report

    files = {p.name: p for p in write_report(sqlite_url, tmp_path / "report")}
    (shape,) = json.loads(files["report.json"].read_text())["shapes"]
    assert shape["failures"] == {
        "compile_failed": 1,
        "crashed (illegal address)": 1,
        "crashed (misaligned address)": 1,
        "launch_failed (out of memory)": 1,
    }
    assert "crashed (illegal address)" in files["report.md"].read_text()


def test_before_the_shape_has_a_time_a_hang_costs_the_first_run_bound(sqlite_url, tmp_path):
    from tests.test_tuner import autotune

    # the default (MODE=slow) is not listed: nothing has a time when the hang runs, first of the list
    configs = tmp_path / "configs.json"
    # the hang alone: a second config timed before it (a loaded machine reorders the pipeline) would give the
    # shape a time, and the hang the full --run-timeout, which is right but not this test's case
    configs.write_text(json.dumps([{"MODE": "hang_run"}]))
    args = ["search", FAULTY, "--device", "cpu", "--db", sqlite_url, "--configs", str(configs)]
    args += ["--compile-workers", "0", "--num-tests", "2", "--retime-top", "0", "--run-timeout", "20"]
    env = {"AUTOTUNE_FIRST_RUN_TIMEOUT": "2", "AUTOTUNE_FLUSH_BYTES": str(1 << 20)}
    autotune(*args, env=env)
    by_mode = {c["MODE"]: (st, err) for c, st, err, _, _ in _rows(sqlite_url)}
    status, error = by_mode["hang_run"]
    # stopped at the first bound (plus the bench's small flush allowance), not the 20 s --run-timeout; a
    # hang that never returned is not retried
    assert status == "timeout" and "run did not finish" in error and "retried" not in error, error
    within = float(error.split("within ", 1)[1].split(" s", 1)[0])
    assert within < 20, error


def test_retry_failed_measures_stored_timeouts_again(sqlite_url, tmp_path):
    from tests.test_tuner import autotune

    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps([{"FAULT": "none", "WHERE": "run"}, {"FAULT": "flaky", "WHERE": "run"}]))
    args = ["search", FAULTS, "--device", "cpu", "--db", sqlite_url, "--configs", str(configs)]
    args += ["--compile-workers", "0", "--num-tests", "2", "--retime-top", "0", "--run-timeout", "3"]
    autotune(*args, env={"CUDA_FAULTS_HANG": "1"})  # a busy moment: the flaky config hangs
    flaky = {"FAULT": "flaky", "WHERE": "run"}

    def flaky_rows():
        return [(st, err) for c, st, err, _, _ in _rows(sqlite_url) if c == flaky]

    assert [st for st, _ in flaky_rows()] == ["timeout"]
    autotune(*args)  # a known failure is not measured again...
    assert [st for st, _ in flaky_rows()] == ["timeout"]
    autotune(*args, "--retry-failed")  # ...unless re-opened
    assert [st for st, _ in flaky_rows()] == ["timeout", "ok"]


def test_a_timing_worker_takes_its_replacement_from_standby():
    w = Worker(FAULTY, "cpu", EvalOptions(num_tests=2), standby=True)
    try:
        w.start()
        spare = w._spare[0].pid
        crashed = w.evaluate({"MODE": "segfault"}, {"N": 64})
        assert crashed.status is TrialStatus.CRASHED
        after = w.evaluate({"MODE": "ok"}, {"N": 64})
        # the child in standby took over (already started), and another one waits behind it
        assert after.status is TrialStatus.OK and _pid(after) == str(spare)
        assert w._spare is not None and w._spare[0].pid != spare
    finally:
        w.close()
    assert w._spare is None and not w.alive
