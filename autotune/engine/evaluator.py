"""The ``Evaluator`` interface and its implementations (as Kernel Tuner's runners: replaying a recorded
landscape is one more runner, not a patch on the search loop).

- ``Worker`` (``engine.worker``): a spawn-ed process per device that compiles, checks and times;
- ``SimulatedEvaluator`` (``engine.simulated``): answers from a recorded landscape or a function.

A ``Backend`` makes evaluators: one timing evaluator per device and any number of compile-only ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from autotune.engine.messages import WorkerInfo
from autotune.engine.worker import EvalOptions, Worker
from autotune.trial import TrialResult


@runtime_checkable
class Evaluator(Protocol):
    """Evaluates configs of one kernel on one device. Candidate failures are statuses, never exceptions."""

    device: str

    def start(self) -> WorkerInfo: ...

    def compile(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult: ...

    def evaluate(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """Makes the evaluators of one search."""

    def timer(self, device: str) -> Evaluator: ...

    def compiler(self) -> Evaluator: ...


@dataclass
class ProcessBackend:
    """Real workers: spawn-ed processes that import the kernel file."""

    kernel_path: str
    options: EvalOptions

    def timer(self, device: str) -> Evaluator:
        # a replacement in standby beside each GPU timer (a CUDA context and a warm profiler are seconds
        # to start); beside a CPU timer the machine's cores are better left to the work
        return Worker(self.kernel_path, device, self.options, standby=not device.startswith("cpu"))

    def compiler(self) -> Evaluator:
        # Compile-only workers run on the default device: a kernel file compiles for the inputs it builds
        # there (Triton needs the target GPU's arch); they never time anything.
        return Worker(self.kernel_path, "", self.options, timing=False)
