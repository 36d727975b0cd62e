"""The process-backed evaluator: compile, check against the reference, time — in a spawn-ed child.

A bad config can hang the GPU or poison its CUDA context (an illegal memory access is sticky), so every
candidate runs in a child process. The parent (``Worker``) never imports the kernel file or initializes
CUDA: it sends a ``Job`` over a pipe, waits with a compile timeout and then a run timeout, turns a hang into
``timeout`` and a dead child into ``crashed``, and starts a fresh child on the next job (as Helion's
benchmarking worker is killed and respawned).

This module touches no database."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from autotune import errors, timeline
from autotune.engine import faults
from autotune.engine.messages import (
    Checked,
    Compiled,
    Done,
    FeatureRows,
    FeaturesJob,
    Job,
    KernelMeta,
    Ready,
    ShapeFailed,
    StartFailed,
    Stop,
    Warm,
    WorkerInfo,
)
from autotune.errors import AutotuneError, KernelFileError, KernelHookError
from autotune.procs import EXEC_FAILED, EXEC_TRIES, ExecFailed, shielded, start_shielded, started_again
from autotune.trial import TrialResult, TrialStatus

log = logging.getLogger("autotune.worker")

#: how many times slower than its first timing a flush may run before the run timeout counts it against the
#: candidate (memory bandwidth is shared with every other process on the machine)
_FLUSH_MARGIN = 4.0


#: seconds a stopped child gets to exit by itself before it is killed: it holds nothing that needs a clean
#: exit (Triton writes its cache files atomically), and tearing down torch and a CUDA context took seconds
#: at the end of every search
_STOP_GRACE_S = 0.1


class ShapeInputError(AutotuneError):
    """The kernel file could not build inputs or a reference for a shape (a bug in the file, not a config)."""


@dataclass
class EvalOptions:
    """How a worker evaluates: timed calls per measurement and its timeouts (seconds)."""

    num_tests: int = 30
    compile_timeout_s: float = 180.0
    #: the check and the timed calls; the bench's cache flushes come on top (``Compiled.overhead_s``)
    run_timeout_s: float = 120.0
    #: a shorter run bound while it is set (``Pipeline.set_run_timeout``: before the shape has a time, then
    #: adapted to the default's); a candidate whose first call returned and that then ran out of it is slow
    #: rather than hung: it is retried once on a fresh worker under ``run_timeout_s`` before its ``timeout``
    #: is final
    run_bound_s: float | None = None
    #: racing while it is set (``Pipeline.set_race``): (timed calls first, the per-call time over which a
    #: config is not timed further; ``Job.race``)
    race: tuple[int, float] | None = None
    start_timeout_s: float = 120.0
    env: dict[str, str] = field(default_factory=dict)


def _short_error(exc: BaseException, limit: int = 2000) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------------------------------- the child


def _load(kernel_path: str, device: str) -> tuple[Any, WorkerInfo]:
    """Import the kernel file and read the device: runs in the child only."""
    from autotune.env import device_facts, environment
    from autotune.kernel.contract import load_kernel_file
    from autotune.space import Space

    loaded = load_kernel_file(kernel_path)
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "":
        device = "cuda" if count else "cpu"
    if device == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # One thread for a CPU timing worker unless the user says otherwise (OMP_NUM_THREADS). With torch's
        # default of one per core, every op of a kernel made of small ops waits at an OpenMP barrier for a
        # core that the orchestrator or another process holds: on a loaded 2-core machine a matmul_cpu call
        # took 2.4-10 s on 2 threads and 0.09-0.18 s on one.
        torch.set_num_threads(1)
    if device.startswith("cuda"):
        if not count:
            raise AutotuneError(f"device {device!r} asked for, but this machine's torch sees no CUDA GPU")
        if ":" in device:
            torch.cuda.set_device(torch.device(device))
        device = f"cuda:{torch.cuda.current_device()}"
    meta = loaded.meta()
    meta["space"] = Space.from_dict(loaded.space_def, source=loaded.space_source).to_dict()
    info = WorkerInfo(KernelMeta.from_dict(meta), device_facts(device), environment(device), device, count)
    return loaded, info


class _Evaluation:
    """The child's state: the loaded kernel and the inputs/reference of the current shape."""

    def __init__(self, loaded: Any, device: str):
        self.loaded = loaded
        self.device = device
        self.cuda = device.startswith("cuda")
        self.shape: dict[str, int] | None = None
        self.inputs: Any = None
        self.ref: Any = None
        host = socket.gethostname()
        self.stamp = {"worker": f"{host}:{os.getpid()}", "hostname": host}
        #: the GPU's clock source (None: no GPU or no NVML), opened on the first measurement
        self._clocks: Any = False
        #: a fault left the CUDA context unusable: this process compiles and times nothing more
        self.poisoned = False
        #: when this process's last measurement ended (``time.monotonic``; None: none yet)
        self._measured_at: float | None = None

    def _failed(self, exc: BaseException, phase: str, result: TrialResult) -> TrialResult:
        fault = faults.classify(exc, phase)
        self.poisoned = self.poisoned or fault.replace_worker
        return replace(result, status=fault.status, error=fault.error(_short_error(exc)))

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def prepare(self, shape: dict[str, int]) -> None:
        """Inputs and reference are built once per shape and shared by all configs."""
        if shape != self.shape:
            self.shape = self.inputs = self.ref = None
            self.inputs = self.loaded.kernel.make_inputs(dict(shape), self.device)
            self.ref = self.loaded.kernel.reference(self.inputs)
            self.shape = dict(shape)

    def bench_overhead_s(self, num_tests: int) -> float:
        """A generous bound on the seconds one measurement spends flushing caches: the flush runs before
        each of the warm-up and the timed calls (``2 * num_tests``), and a busy machine may write memory
        several times slower than when the flush was first timed (once per process)."""
        from autotune.bench import flush_seconds

        try:
            one = flush_seconds("cuda" if self.cuda else "cpu")
        except Exception:  # no room for the buffer, say: the measurement itself reports it as a status
            return 0.0
        flushes = _FLUSH_MARGIN * one * (2 * num_tests + 2)
        if not self.cuda:
            return flushes
        from autotune.settings import throttle

        t = (
            throttle()
        )  # a throttled measurement waits before each re-take (the re-takes themselves do not count)
        return flushes + t.retakes * t.recovery_s

    def compile(self, job: Job, result: TrialResult) -> tuple[Any, TrialResult]:
        """The launcher (None when compiling failed) and ``result`` with the compile time (and failure)."""
        t0 = time.perf_counter()
        try:
            launcher = self.loaded.kernel.compile(dict(job.config), self.inputs)
            self._sync()
        except Exception as exc:
            failed = self._failed(exc, "compile", result)
            return None, replace(failed, compile_s=time.perf_counter() - t0)
        return launcher, replace(result, compile_s=time.perf_counter() - t0)

    def _warm_up_calls(self) -> int | None:
        """The warm-up calls of the next measurement: a short one (``settings.WarmUp``) on a GPU this process
        measured on a moment ago, else None (the bench's whole round)."""
        from autotune.settings import warm_up

        w = warm_up()
        recent = self._measured_at is not None and time.monotonic() - self._measured_at <= w.within_s
        return w.calls if self.cuda and w.calls and recent else None

    def timed(self, take: Any) -> Any:
        """``take()`` (a bench call) under the GPU's clock watch: (its result, its ``Clocks`` or None); a
        measurement on a throttled clock is re-taken (``autotune.clocks.measure``)."""
        from autotune import clocks
        from autotune.settings import throttle

        if self._clocks is False:
            self._clocks = clocks.nvml_source() if self.cuda else None
        t = throttle()
        return clocks.measure(
            take, self._clocks, threshold=t.threshold, recovery_s=t.recovery_s, retakes=t.retakes
        )

    def run(self, job: Job, launcher: Any, result: TrialResult, send: Any = None) -> TrialResult:
        """Check the output against the reference, then time the named kernels: ``result`` completed.
        ``send`` tells the parent when the first call returned (``Checked``)."""
        from autotune.bench import bench_kineto_detailed

        warm_calls = self._warm_up_calls()
        try:
            out = launcher()
            self._sync()
            if send is not None:
                send(Checked())
            mismatch = self.loaded.compare(out, self.ref)
            result = replace(result, check=_metrics(out, self.ref))
            if mismatch:
                return replace(result, status=TrialStatus.WRONG_RESULT, error=mismatch)
            bench, clocks = self.timed(
                lambda: bench_kineto_detailed(
                    launcher,
                    self.loaded.timed_kernels(job.config),
                    num_tests=job.num_tests,
                    suppress_kineto_output=True,
                    device="cuda" if self.cuda else "cpu",
                    warm_up_calls=warm_calls,
                    race=job.race,
                )
            )
        except Exception as exc:
            return self._failed(exc, "run", result)
        finally:
            self._measured_at = time.monotonic()
        if clocks is not None:
            result = replace(result, **clocks.fields())
        stats = bench.kernels.values()
        time_s = bench.per_call_s
        throughput = self._throughput(dict(job.shape), time_s)
        return replace(
            result,
            measured=bench.measured,
            time_s=time_s,
            mean_s=sum(k.mean_s * k.launches_per_call for k in stats),
            min_s=sum(k.min_s * k.launches_per_call for k in stats),
            spread=max(k.spread for k in stats),
            launches=sum(k.launches_per_call for k in stats),
            calls=bench.num_tests,
            kernels={n: list(k.matched) for n, k in bench.kernels.items()},
            **throughput,
        )

    def _throughput(self, shape: dict[str, int], time_s: float) -> dict[str, Any]:
        """TFLOP/s and GB/s at ``time_s`` where the kernel file defines ``flops`` / ``bytes_moved``. A hook
        that raises is the kernel file's bug, not the config's: the measurement stands, the figure is
        left out and the trial's ``error`` says why (never a worker crash)."""
        out: dict[str, Any] = {"tflops": None, "gbps": None}
        notes = []
        for field_, hook, scale in (
            ("tflops", self.loaded.flops, 1e12),
            ("gbps", self.loaded.bytes_moved, 1e9),
        ):
            try:
                amount = hook(shape)
            except KernelHookError as e:
                notes.append(str(e))
                continue
            if amount is not None and time_s > 0:
                out[field_] = amount / time_s / scale
        if notes:
            out["error"] = "; ".join(notes)[:1000]
        return out


def _metrics(out: Any, ref: Any) -> dict[str, float] | None:
    """The check's metrics, stored with the trial (how close a pass was); None for non-tensor outputs."""
    from autotune.kernel.contract import check_metrics

    try:
        return check_metrics(out, ref) if tuple(out.shape) == tuple(ref.shape) else None
    except Exception:  # a kernel's own output type: its compare() judged it, there is nothing to measure
        return None


def _features(kernel: Any, job: FeaturesJob) -> FeatureRows:
    fn = getattr(kernel, "features", None)
    if not callable(fn):
        return FeatureRows(None)
    try:
        rows = [
            {str(k): float(v) for k, v in dict(fn(dict(c), dict(job.shape), dict(job.facts))).items()}
            for c in job.configs
        ]
    except Exception as exc:  # a bug in the hook: the strategy goes on without features
        return FeatureRows(None, _short_error(exc, 500))
    return FeatureRows(rows)


class _Sender:
    """The child's end of the pipe, shared by the serving loop and the warm-up thread: one send at a time."""

    def __init__(self, conn: Any):
        self._conn = conn
        self._lock = threading.Lock()

    def __call__(self, msg: Any) -> None:
        with self._lock:
            self._conn.send(msg)


def _start_warm_up(send: _Sender, device: str) -> threading.Thread:
    """``bench.warm_up`` on a thread, then ``Warm``: the kernel's features can be asked meanwhile, and the
    serving loop waits for it before the first job (so a measurement never overlaps it)."""

    def run() -> None:
        t0 = time.time()
        try:
            from autotune.bench import warm_up

            msg = Warm(warm_up("cuda" if device.startswith("cuda") else "cpu"))
        except Exception as exc:  # the first measurement meets the same problem and reports it as its status
            msg = Warm(time.time() - t0, _short_error(exc, 500))
        timeline.span("warm-up: flush buffer, the profiler's first session (bench.warm_up)", t0, time.time())
        try:
            send(msg)
        except OSError:  # the parent went away
            pass

    thread = threading.Thread(target=run, daemon=True, name="autotune-warm-up")
    thread.start()
    return thread


#: jobs per worker process shown in the start-up timeline (the first ones are the start-up's)
_TRACED_JOBS = 3


def _serve(conn: Any, send: _Sender, ev: _Evaluation, warming: threading.Thread | None = None) -> None:
    jobs = 0
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if isinstance(msg, Stop):
            return
        if isinstance(msg, FeaturesJob):
            send(_features(ev.loaded.kernel, msg))
            continue
        job: Job = msg
        if warming is not None:
            warming.join()
            warming = None
        jobs += 1
        traced = jobs <= _TRACED_JOBS and timeline.enabled()
        t0 = time.time()
        try:
            ev.prepare(job.shape)
        except Exception as exc:
            send(
                ShapeFailed(
                    f"{ev.loaded.path}: building inputs/reference for {job.shape} failed: {_short_error(exc)}"
                )
            )
            continue
        if traced:
            timeline.span(f"job {jobs}: inputs and reference of {job.shape}", t0, time.time())
            t0 = time.time()
        launcher, result = ev.compile(job, TrialResult(TrialStatus.OK, dict(job.config), **ev.stamp))
        if traced:
            timeline.span(f"job {jobs}: compile ({job.kind} job)", t0, time.time())
        if launcher is not None and job.kind != "compile":
            send(Compiled(result.compile_s or 0.0, ev.bench_overhead_s(job.num_tests)))
            t0 = time.time()
            result = ev.run(job, launcher, result, send)
            if traced:
                timeline.span(f"job {jobs}: check + time ({result.status.value})", t0, time.time())
        # a poisoned context would fail (or blame) whatever comes next: exit, the parent starts a fresh one
        send(Done(result, ev.poisoned))
        if ev.poisoned:
            return


def _child_main(conn: Any, kernel_path: str, device: str, env: dict[str, str], warm: bool = False) -> None:
    """``warm``: a timing worker: after ``Ready`` it warms up (``bench.warm_up``) and says ``Warm``."""
    # Set before torch/triton are imported in this process: TRITON_INTERPRET, CUDA_VISIBLE_DEVICES...
    os.environ.update(env)
    entered = time.time()
    timeline.set_process("timer" if warm else "compiler")
    timeline.span(
        "process start -> worker code runs (spawn, interpreter)", timeline.process_started(), entered
    )
    try:
        loaded, info = _load(kernel_path, device)
    except AutotuneError as exc:
        conn.send(StartFailed(type(exc).__name__, str(exc)))
        return
    except Exception as exc:
        conn.send(
            StartFailed("KernelFileError", f"{kernel_path}: worker failed to start: {_short_error(exc)}")
        )
        return
    timeline.span(
        "load the kernel file (torch, Triton, its imports), CUDA init, device facts", entered, time.time()
    )
    send = _Sender(conn)
    send(Ready(info))
    warming = _start_warm_up(send, info.device) if warm else None
    _serve(conn, send, _Evaluation(loaded, info.device), warming)
    if warming is not None and warming.is_alive():
        # stopped before the first job (a bad --shape): the interpreter's exit would destroy torch's
        # threads while the warm-up runs in them, and C++ aborts with "terminate called without an
        # active exception" on the user's terminal. Nothing is left to write: leave without finalizing.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# ------------------------------------------------------------------------------------------- the parent


def _signal_name(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _child_device(device: str, env: dict[str, str]) -> tuple[str, dict[str, str]]:
    """Isolate a child on its GPU (inside it the device is then ``cuda``), honouring an outer
    CUDA_VISIBLE_DEVICES list: ``cuda:1`` under ``CUDA_VISIBLE_DEVICES=2,3`` is physical GPU 3."""
    if not device.startswith("cuda:"):
        return device, env
    index = int(device.split(":", 1)[1])
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    physical = visible[index] if index < len(visible) else str(index)
    return "cuda", {**env, "CUDA_VISIBLE_DEVICES": env.get("CUDA_VISIBLE_DEVICES", physical)}


class Worker:
    """Parent-side handle of an evaluation child (an ``Evaluator``). Replaces the child after a crash, a
    hang or a sticky CUDA error; the next job starts a fresh one.

    A timing worker (``timing``) warms up after it started (``bench.warm_up``, in the child, while the
    orchestrator sets the search up and the compile pool compiles) and takes its first job only once the
    child said ``Warm``; a compile-only worker (``timing=False``) never measures and skips it."""

    def __init__(
        self,
        kernel_path: str,
        device: str = "",
        options: EvalOptions | None = None,
        *,
        timing: bool = True,
        standby: bool = False,
    ):
        self.kernel_path = str(kernel_path)
        self.timing = timing
        #: the child's ``Warm`` (None: not warm yet, or a compile-only worker)
        self.warm: Warm | None = None
        self._warming = False
        #: the device as the orchestrator names it (cuda:1); stamped on every result
        self.device = device
        self.options = options or EvalOptions()
        self._child_device, self._env = _child_device(device, dict(self.options.env))
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self.info: WorkerInfo | None = None
        #: one exchange on the pipe at a time (features are asked from the main thread between shapes)
        self._lock = threading.Lock()
        #: a timing worker keeps a started child in standby (its imports, CUDA context and warm-up done):
        #: a config that hangs or poisons the context costs no start-up of the next child (seconds on a GPU)
        self.standby = standby
        self._spare: tuple[Any, Any] | None = None

    def _spawn(self) -> tuple[Any, Any]:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=shielded,
            args=(_child_main, child, self.kernel_path, self._child_device, self._env, self.timing),
            daemon=True,
        )
        start_shielded(proc)  # Ctrl-C reaches the orchestrator alone: it ends its workers itself
        child.close()
        return proc, parent

    def start(self) -> WorkerInfo:
        """Start the child (or take the one in standby) and wait until it is ready; a worker with
        ``standby`` then starts the next one in the background."""
        spare, self._spare = self._spare, None
        if spare is not None and not spare[0].is_alive():
            spare[0].join(timeout=5)
            spare[1].close()
            spare = None  # it died in standby: start afresh (its error, if any, shows again)

        def attempt() -> WorkerInfo:
            nonlocal spare
            self._proc, self._conn = spare if spare is not None else self._spawn()
            spare = None
            return self._await_ready()

        try:
            info = started_again(attempt, "the worker process")
        except ExecFailed:
            raise KernelFileError(
                f"{self.kernel_path}: the worker exited with code {EXEC_FAILED} before it was ready, "
                f"{EXEC_TRIES} times: either the system refused to run the interpreter (out of memory "
                "or processes?) or the kernel file exits with that code at import"
            ) from None
        if self.standby:
            self._spare = self._spawn()
        return info

    def _await_ready(self) -> WorkerInfo:
        parent = self._conn
        timeout = self.options.start_timeout_s
        if not parent.poll(timeout):
            self._kill()
            raise KernelFileError(
                f"{self.kernel_path}: the worker did not start within {timeout:.0f} s "
                "(AUTOTUNE_START_TIMEOUT); does the kernel file hang at import?"
            )
        try:
            msg = parent.recv()
        except (EOFError, OSError):
            code = self._reap()
            self._kill()
            if code == EXEC_FAILED:
                raise ExecFailed from None
            raise KernelFileError(
                f"{self.kernel_path}: the worker died while loading the kernel file ({_signal_name(code)})"
            ) from None
        if isinstance(msg, StartFailed):
            self._reap()
            self._kill()
            cls = getattr(errors, msg.error_type, None)
            if not (isinstance(cls, type) and issubclass(cls, AutotuneError)):
                cls = KernelFileError
            raise cls(msg.message)
        info: WorkerInfo = msg.info
        if self.device:
            info = replace(info, device=self.device)
        self.info = info
        self.warm, self._warming = None, self.timing
        return info

    def wait_warm(self) -> Warm | None:
        """Wait for the child's ``Warm`` (at most the start timeout): a timing worker measures only after
        its warm-up. None for a compile-only worker."""
        with self._lock:
            self._await_warm()
        return self.warm

    def _await_warm(self) -> None:
        if not self._warming:
            return
        timeout = self.options.start_timeout_s
        try:
            if not self._conn.poll(timeout):
                self._kill()
                raise KernelFileError(
                    f"{self.kernel_path}: the timing worker did not warm up within {timeout:.0f} s "
                    "(AUTOTUNE_START_TIMEOUT)"
                )
            self._note_warm(self._conn.recv())
        except (EOFError, OSError):
            code = self._reap()
            self._kill()
            raise KernelFileError(
                f"{self.kernel_path}: the timing worker died while warming up ({_signal_name(code)})"
            ) from None

    def _note_warm(self, msg: Any) -> None:
        if not isinstance(msg, Warm):
            raise AutotuneError(f"worker protocol: expected Warm, got {type(msg).__name__}")
        self.warm, self._warming = msg, False
        if msg.error:
            log.warning("%s: the timing worker's warm-up failed: %s", self.kernel_path, msg.error)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _reap(self) -> int | None:
        if self._proc is not None:
            self._proc.join(timeout=5)
            return self._proc.exitcode
        return None

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def compile(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        """Compile only (no check, no timing): fills the compiler's disk cache ahead of the timing worker.
        The result's status says whether compilation worked."""
        return self._request(Job("compile", dict(config), dict(shape), 0))

    def evaluate(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        """Compile, check and time one config. Never raises for a candidate's failure: that is a status."""
        return self._request(
            Job("eval", dict(config), dict(shape), self.options.num_tests, self.options.race)
        )

    def features(
        self, shape: dict[str, int], configs: list[dict[str, Any]], facts: dict[str, int]
    ) -> list[dict[str, float]] | None:
        """The kernel file's ``features`` hook on ``configs`` (None: no hook, or it failed, logged)."""
        with self._lock:
            if not self.alive:
                self._kill()
                self.start()
            try:
                self._conn.send(FeaturesJob(dict(shape), [dict(c) for c in configs], dict(facts)))
                if not self._conn.poll(self.options.compile_timeout_s):
                    self._kill()
                    return None
                reply: FeatureRows = self._conn.recv()
                if isinstance(reply, Warm):  # the warm-up ended while the features were computed
                    self._note_warm(reply)
                    if not self._conn.poll(self.options.compile_timeout_s):
                        self._kill()
                        return None
                    reply = self._conn.recv()
            except (EOFError, OSError):
                self._kill()
                return None
        if reply.error:
            log.warning("%s: features() failed, searching without them: %s", self.kernel_path, reply.error)
        return reply.rows

    def _request(self, job: Job) -> TrialResult:
        with self._lock:
            return self._request_locked(job)

    def _request_locked(self, job: Job) -> TrialResult:
        if not self.alive:
            self._kill()
            self.start()
        self._await_warm()
        fixed, bound = self.options.run_timeout_s, self.options.run_bound_s
        bound = fixed if bound is None else min(bound, fixed)
        result, slow = self._exchange(job, bound)
        if slow and bound < fixed:
            log.info(
                "%s ran out of the %.0f s bound after returning once: "
                "retrying on a fresh worker with the run timeout (%.0f s)",
                job.config,
                bound,
                fixed,
            )
            self.start()
            self._await_warm()
            result, _ = self._exchange(job, fixed)
            if result.status is TrialStatus.TIMEOUT:
                retried = f"; retried on a fresh worker after the {bound:.0f} s bound"
                result = replace(result, error=(result.error or "") + retried)
        if result.device:
            return result
        return replace(result, device=self.device or (self.info.device if self.info else None))

    def _exchange(self, job: Job, run_timeout_s: float) -> tuple[TrialResult, bool]:
        """The job's result, and whether it ran out of the run timeout in a way that may be slowness rather
        than a hang (its first call had returned)."""
        conn, opts = self._conn, self.options
        conn.send(job)
        phase, deadline = "compile", opts.compile_timeout_s
        compile_s = None
        returned = False
        while True:
            t0 = time.perf_counter()
            if not conn.poll(deadline):
                self._kill()
                result = TrialResult(
                    TrialStatus.TIMEOUT,
                    dict(job.config),
                    compile_s=compile_s,
                    error=f"{phase} did not finish within {deadline:.0f} s; worker restarted",
                )
                # its first call returned: slow (a busy machine), not hung. The machine's load alone is no
                # sign: on a busy machine every hang would then cost the fixed bound too
                return result, phase == "run" and returned
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                code = self._reap()
                self._kill()
                died = f"worker {_signal_name(code)} during {phase}; worker restarted"
                result = TrialResult(
                    TrialStatus.CRASHED,
                    dict(job.config),
                    compile_s=compile_s,
                    error=f"{faults.WORKER_DIED}: {died}",
                )
                return result, False
            if isinstance(msg, Compiled):
                phase, deadline, compile_s = "run", run_timeout_s + msg.overhead_s, msg.compile_s
                continue
            if isinstance(msg, Checked):
                returned = True
            if isinstance(msg, ShapeFailed):
                raise ShapeInputError(msg.message)
            if isinstance(msg, Done):
                if msg.restart:
                    self._reap()
                    self._kill()
                return msg.result, False
            deadline = max(0.0, deadline - (time.perf_counter() - t0))

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare[0].kill()
        if self._conn is not None and self.alive:
            try:
                self._conn.send(Stop())
                self._proc.join(timeout=_STOP_GRACE_S)
            except (OSError, BrokenPipeError):
                pass
        self._kill()
        if spare is not None:
            spare[0].join(timeout=10)
            spare[1].close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
