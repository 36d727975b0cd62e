"""The evaluation process: compile, check against the reference, time. One per device.

A bad config can hang the GPU or poison its CUDA context (an illegal memory access is sticky), so every
candidate runs in a spawn-ed child process. The parent (``Worker``) never imports the kernel file or
initializes CUDA: it sends a config and a shape over a pipe, waits with a compile timeout and then a run
timeout, and turns a hang into ``timeout`` and a dead child into ``crashed``, then starts a fresh child.

Compilation (``KERNEL.compile``) is a separate step with its own message, so a later pipeline can run it
ahead in a pool of CPU processes (filling Triton's disk cache) while one process times on the GPU.

This module touches no database."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any

from . import errors
from .errors import AutotuneError, KernelFileError
from .trial import TrialResult, TrialStatus

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


@dataclass
class WorkerInfo:
    """What the child learnt at start: the kernel's metadata, the device's facts and environment."""

    meta: dict[str, Any]
    facts: dict[str, int]
    env: dict[str, Any]
    device: str


def _short_error(exc: BaseException, limit: int = 2000) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _child_main(conn: Any, kernel_path: str, device: str, env: dict[str, str]) -> None:
    # Set before torch/triton are imported in this process: TRITON_INTERPRET, CUDA_VISIBLE_DEVICES...
    os.environ.update(env)
    try:
        from .env import device_facts, environment
        from .kernel import load_kernel_file
        from .space import Space

        loaded = load_kernel_file(kernel_path)
        import torch

        if device == "":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise AutotuneError(f"device {device!r} asked for, but this machine's torch sees no CUDA GPU")
            if ":" in device:
                torch.cuda.set_device(torch.device(device))
            device = f"cuda:{torch.cuda.current_device()}"
        meta = loaded.meta()
        meta["space"] = Space.from_dict(loaded.space_def, source=loaded.space_source).to_dict()
        info = WorkerInfo(meta, device_facts(device), environment(device), device)
    except AutotuneError as exc:
        conn.send(("error", (type(exc).__name__, str(exc))))
        return
    except Exception as exc:
        conn.send(
            ("error", ("KernelFileError", f"{kernel_path}: worker failed to start: {_short_error(exc)}"))
        )
        return
    conn.send(("ready", info))

    from .bench import bench_kineto_detailed

    cached_shape: dict[str, int] | None = None
    inputs = ref = None
    host = socket.gethostname()
    worker_id = f"{host}:{os.getpid()}"
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        kind, config, shape, num_tests = msg
        result = TrialResult(TrialStatus.OK, dict(config), worker=worker_id, hostname=host)
        restart = False
        try:
            if shape != cached_shape:
                # Inputs and reference are built once per shape and shared by all configs.
                inputs = ref = None
                inputs = loaded.kernel.make_inputs(dict(shape), device)
                ref = loaded.kernel.reference(inputs)
                cached_shape = dict(shape)
        except Exception as exc:
            conn.send(
                (
                    "shape_error",
                    f"{loaded.path}: building inputs/reference for {shape} failed: {_short_error(exc)}",
                )
            )
            cached_shape = None
            continue
        t0 = time.perf_counter()
        try:
            launcher = loaded.kernel.compile(dict(config), inputs)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            if kind == "compile":
                # Compile-ahead only: the artifact lands in the compiler's disk cache for the timing worker.
                conn.send(("result", {**result.to_dict(), "compile_s": time.perf_counter() - t0}, False))
                continue
        except Exception as exc:
            result.status, result.error = TrialStatus.COMPILE_FAILED, _short_error(exc)
            result.compile_s = time.perf_counter() - t0
            restart = any(s in result.error for s in _STICKY_CUDA)
            conn.send(("result", result.to_dict(), restart))
            if restart:
                return
            continue
        result.compile_s = time.perf_counter() - t0
        conn.send(("compiled", result.compile_s))
        try:
            out = launcher()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            mismatch = loaded.compare(out, ref)
            if mismatch:
                result.status, result.error = TrialStatus.WRONG_RESULT, mismatch
            else:
                bench = bench_kineto_detailed(
                    launcher,
                    loaded.timed_kernels(config),
                    num_tests=num_tests,
                    suppress_kineto_output=True,
                    device="cuda" if device.startswith("cuda") else "cpu",
                )
                result.measured = bench.measured
                result.time_s = bench.per_call_s
                result.mean_s = sum(k.mean_s * k.launches_per_call for k in bench.kernels.values())
                result.min_s = sum(k.min_s * k.launches_per_call for k in bench.kernels.values())
                result.spread = max(k.spread for k in bench.kernels.values())
                result.launches = sum(k.launches_per_call for k in bench.kernels.values())
                result.kernels = {n: list(k.matched) for n, k in bench.kernels.items()}
                if result.time_s > 0:
                    result.tflops = loaded.kernel.flops(dict(shape)) / result.time_s / 1e12
                    result.gbps = loaded.bytes_moved(dict(shape)) / result.time_s / 1e9
        except Exception as exc:
            result.status, result.error = TrialStatus.LAUNCH_FAILED, _short_error(exc)
            restart = device.startswith("cuda") and any(s in result.error for s in _STICKY_CUDA)
        conn.send(("result", result.to_dict(), restart))
        if restart:
            return


def _signal_name(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class ShapeInputError(AutotuneError):
    """The kernel file could not build inputs or a reference for a shape (a bug in the file, not a config)."""


class Worker:
    """Parent-side handle of the evaluation child. Restarts it after a crash, hang or sticky CUDA error."""

    def __init__(
        self,
        kernel_path: str,
        device: str = "",
        *,
        env: dict[str, str] | None = None,
        start_timeout_s: float = 300.0,
    ):
        self.kernel_path = str(kernel_path)
        self.device = device
        self.env = dict(env or {})
        if device.startswith("cuda:"):
            # Isolate the child on its GPU; inside it the device is then cuda:0.
            self.env.setdefault("CUDA_VISIBLE_DEVICES", device.split(":", 1)[1])
            self.device = "cuda"
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None
        self.info: WorkerInfo | None = None
        self.restarts = 0

    def start(self) -> WorkerInfo:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_child_main, args=(child, self.kernel_path, self.device, self.env), daemon=True
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        if not parent.poll(self.start_timeout_s):
            self._kill()
            raise KernelFileError(
                f"{self.kernel_path}: the worker did not start within {self.start_timeout_s:.0f} s"
            )
        try:
            kind, payload = parent.recv()
        except EOFError:
            code = self._reap()
            raise KernelFileError(
                f"{self.kernel_path}: the worker died while loading the kernel file ({_signal_name(code)})"
            ) from None
        if kind == "error":
            self._reap()
            self._kill()
            cls_name, message = payload
            cls = getattr(errors, cls_name, None)
            if not (isinstance(cls, type) and issubclass(cls, AutotuneError)):
                cls = KernelFileError
            raise cls(message)
        self.info = payload
        return payload

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

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self.start()

    def precompile(
        self, config: dict[str, Any], shape: dict[str, int], *, compile_timeout_s: float = 180.0
    ) -> TrialResult:
        """Compile only (no check, no timing): fills the compiler's disk cache ahead of the timing worker.
        The result's status says whether compilation worked; it is not a trial to store."""
        return self._request("compile", config, shape, 0, compile_timeout_s, compile_timeout_s)

    def evaluate(
        self,
        config: dict[str, Any],
        shape: dict[str, int],
        *,
        num_tests: int = 30,
        compile_timeout_s: float = 180.0,
        run_timeout_s: float = 120.0,
    ) -> TrialResult:
        """Compile, check and time one config. Never raises for a candidate's failure: that is a status."""
        return self._request("eval", config, shape, num_tests, compile_timeout_s, run_timeout_s)

    def _request(
        self,
        kind: str,
        config: dict[str, Any],
        shape: dict[str, int],
        num_tests: int,
        compile_timeout_s: float,
        run_timeout_s: float,
    ) -> TrialResult:
        if self._proc is None or not self._proc.is_alive():
            self._restart() if self.info is not None else self.start()
        conn = self._conn
        conn.send((kind, dict(config), dict(shape), num_tests))
        phase, deadline = "compile", compile_timeout_s
        compile_s = None
        while True:
            t0 = time.perf_counter()
            if not conn.poll(deadline):
                self._kill()
                return TrialResult(
                    TrialStatus.TIMEOUT,
                    dict(config),
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
                    dict(config),
                    compile_s=compile_s,
                    error=f"worker {_signal_name(code)} during {phase}; worker restarted",
                )
            if msg[0] == "compiled":
                phase, deadline, compile_s = "run", run_timeout_s, msg[1]
                continue
            if msg[0] == "shape_error":
                raise ShapeInputError(msg[1])
            if msg[0] == "result":
                _, payload, restart = msg
                if restart:
                    self._reap()
                    self._kill()
                return TrialResult.from_dict(payload)
            deadline = max(0.0, deadline - (time.perf_counter() - t0))

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._proc.join(timeout=5)
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
