"""The isolated worker: every candidate failure becomes a status, and the worker survives it."""

from __future__ import annotations

import os
import textwrap
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


def _exec_wrapper(tmp_path, fail_first: int):
    """An 'interpreter' for spawn-ed children that exits 255 without running Python on its first
    ``fail_first`` starts (what a failed exec looks like to multiprocessing), then runs the real one;
    it counts its starts in a file."""
    import sys

    count = tmp_path / "starts"
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -le {fail_first} ]; then exit 255; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    script.chmod(0o755)
    return script, count


@pytest.mark.parametrize("fail_first", [2, 3])
def test_a_child_that_never_ran_python_is_started_again(tmp_path, monkeypatch, fail_first):
    import multiprocessing.resource_tracker
    import multiprocessing.spawn

    script, count = _exec_wrapper(tmp_path, fail_first)
    multiprocessing.resource_tracker.ensure_running()  # started by the real interpreter, not the wrapper
    monkeypatch.setattr(multiprocessing.spawn, "_python_exe", os.fsencode(script))
    w = Worker(FAULTY, "cpu", EvalOptions(num_tests=2))
    try:
        if fail_first < 3:  # two transient refusals: the third start works and the worker evaluates
            w.start()
            assert len(count.read_text().splitlines()) == 3
            assert w.evaluate({"MODE": "ok"}, SHAPE).status is TrialStatus.OK
        else:  # refused every time: one error, after three starts, not an endless loop
            with pytest.raises(KernelFileError, match="exited with code 255 before it was ready, 3 times"):
                w.start()
            assert len(count.read_text().splitlines()) == 3
    finally:
        w.close()


def test_an_isolated_call_whose_child_never_ran_python_is_started_again(tmp_path, monkeypatch):
    import multiprocessing.resource_tracker
    import multiprocessing.spawn

    from autotune.kernel.isolated import run_isolated

    script, count = _exec_wrapper(tmp_path, 2)
    multiprocessing.resource_tracker.ensure_running()
    monkeypatch.setattr(multiprocessing.spawn, "_python_exe", os.fsencode(script))
    kwargs = dict(path="k.py", doing="checking", timeout_s=120, timeout_hint="AUTOTUNE_START_TIMEOUT")
    assert run_isolated(len, "abcd", **kwargs) == 4  # the third start ran it
    assert len(count.read_text().splitlines()) == 3
    count.write_text("")
    script.write_text(script.read_text().replace("-le 2", "-le 9"))
    with pytest.raises(KernelFileError, match="k.py: the process checking exited with code 255"):
        run_isolated(len, "abcd", **kwargs)
    assert len(count.read_text().splitlines()) == 3


#: multiprocessing's resource tracker whose first start fails at exec (the exec of a path that does not exist,
#: waited for, so the tracker is dead before anything writes to it); then a lock made for a child, which
#: registers with the tracker; ``ensure`` calls ``ensure_resource_tracker`` first
TRACKER_SCRIPT = """
import multiprocessing as mp, os, sys
from multiprocessing import util

real, starts = util.spawnv_passfds, []

def flaky(path, args, passfds):
    starts.append(path)
    if len(starts) > 1:
        return real(path, args, passfds)
    pid = real(b"/nonexistent/python", [b"/nonexistent/python", *args[1:]], passfds)
    os.waitpid(pid, 0)
    return pid

util.spawnv_passfds = flaky
if sys.argv[1] == "ensure":
    from autotune.procs import ensure_resource_tracker

    ensure_resource_tracker()
try:
    mp.get_context("spawn").Lock()
except BrokenPipeError:
    print("broken pipe", len(starts))
else:
    print("ok", len(starts))
"""


def test_a_resource_tracker_that_never_ran_is_started_again_before_a_lock_needs_it():
    import subprocess
    import sys

    def run(mode):
        out = subprocess.run(
            [sys.executable, "-c", TRACKER_SCRIPT, mode], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert run("plain") == ["broken", "pipe", "1"]  # what a search died of, silently (click: exit 1)
    assert run("ensure") == ["ok", "2"]


#: a CPU kernel whose config is its number of small ops (each one a profiler event when ops are recorded)
MANY_OPS = textwrap.dedent(
    """
    import torch
    from autotune.kernel.contract import Kernel

    class ManyOps(Kernel):
        name = "many_ops"
        kernel_names = ("many_ops_kernel",)
        shape_params = ("N",)
        default_shapes = ({"N": 4},)
        space = {"name": "many_ops", "params": {"OPS": [100 * i for i in range(1, 21)]}}
        default_config = {"OPS": 100}
        dtypes = {"x": "float32"}

        def make_inputs(self, shape, device):
            return torch.randn(shape["N"], device=device)

        def compile(self, config, x):
            def launch():
                y = x.clone()
                with torch.profiler.record_function("many_ops_kernel"):
                    for _ in range(config["OPS"]):
                        y.add_(0.0)
                return y

            return launch

        def reference(self, x):
            return x

        def flops(self, shape):
            return float(shape["N"])

    KERNEL = ManyOps()
    """
)


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the RSS from /proc")
def test_timing_worker_memory_is_bounded(tmp_path):
    """20 CPU measurements of configs with more and more ops: the timing worker's RSS after the 20th stays
    within a bound of its RSS after the 2nd (it grew by gigabytes over 4 trials of the README's example)."""
    path = tmp_path / "many_ops.py"
    path.write_text(MANY_OPS)
    opts = EvalOptions(num_tests=5, run_timeout_s=300, env={"AUTOTUNE_FLUSH_BYTES": str(1 << 20)})
    with Worker(str(path), "cpu", opts) as w:
        w.start()
        pid, rss = w.pid, []
        for i in range(20):
            res = w.evaluate({"OPS": 100 * (i + 1)}, {"N": 4})
            assert res.status is TrialStatus.OK, res.error
            assert w.pid == pid  # the same process all along: nothing was restarted
            rss.append(_rss_mib(pid))
    assert rss[19] - rss[1] < 64, f"worker RSS (MiB) after each measurement: {[round(r) for r in rss]}"


def test_the_flush_does_not_count_against_the_run_timeout(tmp_path):
    """A fast valid config is never a ``timeout`` for the bench's own cache flushes: a large flush before
    each of its calls (the VM's 2 x 480 MiB L3 once made 2 of 4 configs ``timeout``) takes longer in all
    than the run timeout, which bounds the candidate's work, not the flushes."""
    path = tmp_path / "many_ops.py"
    path.write_text(MANY_OPS)
    # 512 MiB before each timed call: the old worker's 62 flushes took over 3 s on a 2-core VM
    flush = 512 * 1024 * 1024
    opts = EvalOptions(num_tests=30, run_timeout_s=3, env={"AUTOTUNE_FLUSH_BYTES": str(flush)})
    with Worker(str(path), "cpu", opts) as w:
        res = w.evaluate({"OPS": 100}, {"N": 4})
    assert res.status is TrialStatus.OK, res.error


def test_a_timing_worker_measures_only_after_its_warm_up(tmp_path, monkeypatch):
    """A timing worker's child warms up (``bench.warm_up``) after ``Ready`` and says ``Warm``; its first
    measurement starts after the warm-up ended. A compile-only worker never warms up. Read from the start-up
    timeline the child processes write (``AUTOTUNE_TRACE_STARTUP`` naming a file, as a search hands it on)."""
    from autotune import timeline

    trace = tmp_path / "timeline.jsonl"
    trace.write_text("")
    monkeypatch.setenv("AUTOTUNE_TRACE_STARTUP", str(trace))
    timer = Worker(FAULTY, "cpu", EvalOptions(num_tests=3))
    compiler = Worker(FAULTY, "cpu", EvalOptions(num_tests=3), timing=False)
    try:
        timer.start()
        compiler.start()
        pids = {"timer": timer.pid, "compiler": compiler.pid}
        assert compiler.compile({"MODE": "ok"}, SHAPE).status is TrialStatus.OK
        assert compiler.wait_warm() is None and compiler.warm is None
        res = timer.evaluate({"MODE": "ok"}, SHAPE)
        warm = timer.warm
    finally:
        timer.close()
        compiler.close()
    assert res.status is TrialStatus.OK, res.error
    assert warm is not None and warm.error is None and warm.seconds > 0
    rows = timeline.read(str(trace))
    warm_ups = [r for r in rows if r["w"].startswith("warm-up")]
    assert [(r["p"], r["pid"]) for r in warm_ups] == [("timer", pids["timer"])]
    timed = [r for r in rows if "check + time" in r["w"]]
    assert [r["pid"] for r in timed] == [pids["timer"]] and timed[0]["t0"] >= warm_ups[0]["t1"]
    # the compile worker's job shows in its own lane
    assert any(r["pid"] == pids["compiler"] and "compile (compile job)" in r["w"] for r in rows)


THREADS_KERNEL = """
import torch
from autotune.kernel.contract import Kernel


class Threads(Kernel):
    name = "threads"
    kernel_names = ("threads_op",)
    shape_params = ("N",)
    default_shapes = ({"N": 4},)
    space = {"name": "threads", "params": {"X": [1]}}
    default_config = {"X": 1}
    dtypes = {"x": "float32"}

    def make_inputs(self, shape, device):
        return torch.zeros(shape["N"])

    def compile(self, config, x):
        raise RuntimeError(f"threads={torch.get_num_threads()}")  # what the timing worker runs kernels on

    def reference(self, x):
        return x


KERNEL = Threads()
"""


@pytest.mark.parametrize("omp", [None, "2"])
def test_a_cpu_timing_worker_runs_one_thread_unless_omp_num_threads_says(tmp_path, monkeypatch, omp):
    """torch's one thread per core made every small op of a CPU kernel wait at a barrier for a core another
    process held (a call 15-60x slower on a loaded machine): one thread, unless the user sets OMP_NUM_THREADS."""
    path = tmp_path / "threads.py"
    path.write_text(THREADS_KERNEL)
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    with Worker(str(path), "cpu", EvalOptions(num_tests=2)) as w:
        w.start()
        res = w.evaluate({"X": 1}, {"N": 4})
    assert res.status is TrialStatus.COMPILE_FAILED and f"threads={omp or 1}" in (res.error or ""), res.error


def test_a_warm_gpu_gets_a_short_warm_up_and_a_cold_one_the_whole_round(monkeypatch):
    """The seed recipe's whole warm-up round is for a GPU's state after idle (CUPTI, the clocks' ramp): a
    timing worker that measured a moment ago asks the bench for a short one (settings.WarmUp)."""
    import time

    from autotune.engine.worker import _Evaluation
    from autotune.errors import SettingsError
    from autotune.settings import WarmUp

    monkeypatch.delenv("AUTOTUNE_WARM_CALLS", raising=False)
    monkeypatch.delenv("AUTOTUNE_WARM_WITHIN", raising=False)
    gpu = _Evaluation(None, "cuda:0")  # the decision only: nothing here touches CUDA
    assert gpu._warm_up_calls() is None  # the process's first measurement: the whole round
    gpu._measured_at = time.monotonic()
    assert gpu._warm_up_calls() == WarmUp().calls > 0
    monkeypatch.setenv("AUTOTUNE_WARM_CALLS", "2")
    assert gpu._warm_up_calls() == 2
    monkeypatch.setenv("AUTOTUNE_WARM_CALLS", "0")  # 0: always the whole round
    assert gpu._warm_up_calls() is None
    monkeypatch.setenv("AUTOTUNE_WARM_CALLS", "2")
    gpu._measured_at = time.monotonic() - 2 * WarmUp().within_s  # idle since: cold again
    assert gpu._warm_up_calls() is None
    monkeypatch.setenv("AUTOTUNE_WARM_WITHIN", str(4 * WarmUp().within_s))
    assert gpu._warm_up_calls() == 2
    cpu = _Evaluation(None, "cpu")
    cpu._measured_at = time.monotonic()
    assert cpu._warm_up_calls() is None  # the CPU bench keeps its own few calls
    monkeypatch.setenv("AUTOTUNE_WARM_CALLS", "-1")
    with pytest.raises(SettingsError, match="AUTOTUNE_WARM_CALLS"):
        gpu._warm_up_calls()


def test_a_measurement_marks_when_the_process_last_measured():
    from autotune.engine.messages import Job
    from autotune.engine.worker import _Evaluation, _load
    from autotune.trial import TrialResult

    example = str(Path(__file__).parents[1] / "examples" / "matmul_cpu.py")
    loaded, info = _load(example, "cpu")
    ev = _Evaluation(loaded, info.device)
    shape = {"M": 32, "N": 32, "K": 32}
    ev.prepare(shape)
    config = dict(info.meta.default_config)
    job = Job("eval", config, shape, 2)
    assert ev._measured_at is None
    launcher, result = ev.compile(job, TrialResult(TrialStatus.OK, config))
    done = ev.run(job, launcher, result)
    assert done.status is TrialStatus.OK and done.time_s > 0
    assert ev._measured_at is not None
