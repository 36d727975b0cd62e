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
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from autotune import errors
from autotune.engine.messages import (
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
    WorkerInfo,
)
from autotune.errors import AutotuneError, KernelFileError
from autotune.procs import shielded, start_shielded
from autotune.trial import TrialResult, TrialStatus

log = logging.getLogger("autotune.worker")

#: text in an exception that means the CUDA context is unusable: the child must be replaced
_STICKY_CUDA = (
    "illegal memory access",
    "unspecified launch failure",
    "device-side assert",
    "CUDA error",
    "misaligned address",
    "illegal instruction",
    "an illegal",
)


#: how many times slower than its first timing a flush may run before the run timeout counts it against the
#: candidate (memory bandwidth is shared with every other process on the machine)
_FLUSH_MARGIN = 4.0


class ShapeInputError(AutotuneError):
    """The kernel file could not build inputs or a reference for a shape (a bug in the file, not a config)."""


@dataclass
class EvalOptions:
    """How a worker evaluates: timed calls per measurement and its timeouts (seconds)."""

    num_tests: int = 30
    compile_timeout_s: float = 180.0
    #: the check and the timed calls; the bench's cache flushes come on top (``Compiled.overhead_s``)
    run_timeout_s: float = 120.0
    start_timeout_s: float = 120.0
    env: dict[str, str] = field(default_factory=dict)


def _short_error(exc: BaseException, limit: int = 2000) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_sticky(error: str | None) -> bool:
    return bool(error) and any(s in error for s in _STICKY_CUDA)


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
            failed = replace(result, status=TrialStatus.COMPILE_FAILED, error=_short_error(exc))
            return None, replace(failed, compile_s=time.perf_counter() - t0)
        return launcher, replace(result, compile_s=time.perf_counter() - t0)

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

    def run(self, job: Job, launcher: Any, result: TrialResult) -> TrialResult:
        """Check the output against the reference, then time the named kernels: ``result`` completed."""
        from autotune.bench import bench_kineto_detailed

        try:
            out = launcher()
            self._sync()
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
                )
            )
        except Exception as exc:
            return replace(result, status=TrialStatus.LAUNCH_FAILED, error=_short_error(exc))
        if clocks is not None:
            result = replace(result, **clocks.fields())
        stats = bench.kernels.values()
        time_s = bench.per_call_s
        shape = dict(job.shape)
        return replace(
            result,
            measured=bench.measured,
            time_s=time_s,
            mean_s=sum(k.mean_s * k.launches_per_call for k in stats),
            min_s=sum(k.min_s * k.launches_per_call for k in stats),
            spread=max(k.spread for k in stats),
            launches=sum(k.launches_per_call for k in stats),
            kernels={n: list(k.matched) for n, k in bench.kernels.items()},
            tflops=self.loaded.kernel.flops(shape) / time_s / 1e12 if time_s > 0 else None,
            gbps=self.loaded.bytes_moved(shape) / time_s / 1e9 if time_s > 0 else None,
        )


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


def _serve(conn: Any, ev: _Evaluation) -> None:
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if isinstance(msg, Stop):
            return
        if isinstance(msg, FeaturesJob):
            conn.send(_features(ev.loaded.kernel, msg))
            continue
        job: Job = msg
        try:
            ev.prepare(job.shape)
        except Exception as exc:
            conn.send(
                ShapeFailed(
                    f"{ev.loaded.path}: building inputs/reference for {job.shape} failed: {_short_error(exc)}"
                )
            )
            continue
        launcher, result = ev.compile(job, TrialResult(TrialStatus.OK, dict(job.config), **ev.stamp))
        if launcher is None or job.kind == "compile":
            restart = launcher is None and _is_sticky(result.error)
            conn.send(Done(result, restart))
            if restart:
                return
            continue
        conn.send(Compiled(result.compile_s or 0.0, ev.bench_overhead_s(job.num_tests)))
        result = ev.run(job, launcher, result)
        restart = ev.cuda and result.status is TrialStatus.LAUNCH_FAILED and _is_sticky(result.error)
        conn.send(Done(result, restart))
        if restart:
            return


def _child_main(conn: Any, kernel_path: str, device: str, env: dict[str, str]) -> None:
    # Set before torch/triton are imported in this process: TRITON_INTERPRET, CUDA_VISIBLE_DEVICES...
    os.environ.update(env)
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
    conn.send(Ready(info))
    _serve(conn, _Evaluation(loaded, info.device))


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
    hang or a sticky CUDA error; the next job starts a fresh one."""

    def __init__(self, kernel_path: str, device: str = "", options: EvalOptions | None = None):
        self.kernel_path = str(kernel_path)
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

    def start(self) -> WorkerInfo:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=shielded,
            args=(_child_main, child, self.kernel_path, self._child_device, self._env),
            daemon=True,
        )
        start_shielded(proc)  # Ctrl-C reaches the orchestrator alone: it ends its workers itself
        child.close()
        self._proc, self._conn = proc, parent
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
        return info

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
        return self._request(Job("eval", dict(config), dict(shape), self.options.num_tests))

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
        result = self._exchange(job)
        if result.device:
            return result
        return replace(result, device=self.device or (self.info.device if self.info else None))

    def _exchange(self, job: Job) -> TrialResult:
        conn, opts = self._conn, self.options
        conn.send(job)
        phase, deadline = "compile", opts.compile_timeout_s
        compile_s = None
        while True:
            t0 = time.perf_counter()
            if not conn.poll(deadline):
                self._kill()
                return TrialResult(
                    TrialStatus.TIMEOUT,
                    dict(job.config),
                    compile_s=compile_s,
                    error=f"{phase} did not finish within {deadline:.0f} s; worker restarted",
                )
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                code = self._reap()
                self._kill()
                return TrialResult(
                    TrialStatus.CRASHED,
                    dict(job.config),
                    compile_s=compile_s,
                    error=f"worker {_signal_name(code)} during {phase}; worker restarted",
                )
            if isinstance(msg, Compiled):
                phase, deadline, compile_s = "run", opts.run_timeout_s + msg.overhead_s, msg.compile_s
                continue
            if isinstance(msg, ShapeFailed):
                raise ShapeInputError(msg.message)
            if isinstance(msg, Done):
                if msg.restart:
                    self._reap()
                    self._kill()
                return msg.result
            deadline = max(0.0, deadline - (time.perf_counter() - t0))

    def close(self) -> None:
        if self._conn is not None and self.alive:
            try:
                self._conn.send(Stop())
                self._proc.join(timeout=5)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
