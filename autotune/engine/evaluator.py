"""The ``Evaluator`` interface and its implementations (as Kernel Tuner's runners: replaying a recorded
landscape is one more runner, not a patch on the tuner).

- ``Worker`` (``engine.worker``): a spawn-ed process per device that compiles, checks and times;
- ``SimulatedEvaluator``: answers from a recorded landscape (``bench/landscapes/*.json``) or a function,
  optionally sleeping to stand in for compile and measurement time, so the whole pipeline (claims, store,
  strategies) runs and is measured on a CPU with any number of fake devices.

A ``Backend`` makes evaluators: one timing evaluator per device and any number of compile-only ones."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from autotune.engine.messages import KernelMeta, WorkerInfo
from autotune.engine.worker import EvalOptions, Worker
from autotune.shapes import format_shape
from autotune.trial import TrialResult, TrialStatus, config_hash


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
        return Worker(self.kernel_path, device, self.options)

    def compiler(self) -> Evaluator:
        # Compile-only workers run on the default device: a kernel file compiles for the inputs it builds
        # there (Triton needs the target GPU's arch); they never time anything.
        return Worker(self.kernel_path, "", self.options)


# ------------------------------------------------------------------------------------------- simulation

#: (config, shape) -> result; the simulated evaluator's answer
Answer = Callable[[dict[str, Any], dict[str, int]], TrialResult]


@dataclass
class Landscape:
    """Recorded results per (shape, config): what a simulated evaluator answers."""

    meta: KernelMeta
    facts: dict[str, int]
    env: dict[str, Any]
    #: shape key -> config hash -> recorded result
    results: dict[str, dict[str, TrialResult]] = field(default_factory=dict)

    def answer(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        rec = self.results.get(format_shape(shape), {}).get(config_hash(config))
        if rec is None:
            return TrialResult(TrialStatus.LAUNCH_FAILED, dict(config), error="not in the landscape")
        return TrialResult(
            rec.status, dict(config), time_s=rec.time_s, tflops=rec.tflops, error=rec.error, measured=True
        )

    @classmethod
    def from_files(
        cls,
        paths: Sequence[str | Path],
        *,
        space: Any,
        default_config: Mapping[str, Any],
        facts: Mapping[str, int],
        name: str | None = None,
        dtypes: Mapping[str, str] | None = None,
    ) -> Landscape:
        """Landscapes as ``bench/landscape.py`` records them (one JSON per shape, every config's time)."""
        from autotune.tuning.landscape import config_results

        results: dict[str, dict[str, TrialResult]] = {}
        shapes, gpu, kernel = [], "simulated", name
        for p in paths:
            doc = json.loads(Path(p).read_text())
            shape = {k: int(v) for k, v in doc["shape"].items()}
            shapes.append(shape)
            gpu, kernel = doc.get("gpu", gpu), kernel or doc.get("kernel", "simulated")
            results.setdefault(format_shape(shape), {}).update(config_results(doc["configs"], space))
        meta = KernelMeta(
            name=f"{kernel}_sim",
            path="simulated",
            source_hash="simulated",
            space=space.to_dict(),
            space_source=space.source,
            default_config=dict(default_config),
            default_shapes=tuple(shapes),
            shape_params=tuple(shapes[0]) if shapes else (),
            dtypes=dict(dtypes or {}),
        )
        env = {
            "device_kind": "sim",
            "gpu_name": f"{gpu} (simulated)",
            "cc": "sim",
            "sm_count": int(facts.get("sm_count", 0)),
            "driver": "sim",
            "cuda": "sim",
            "torch": "sim",
            "triton": "sim",
            "hostname": "sim",
        }
        return cls(meta, dict(facts), env, results)


class SimulatedEvaluator:
    """An ``Evaluator`` without a device: answers from ``answer`` (e.g. ``Landscape.answer``), sleeping
    ``compile_s`` / ``eval_s`` (or ``eval_scale`` x the answered time x num_tests) to stand in for the work."""

    def __init__(
        self,
        info: WorkerInfo,
        answer: Answer,
        *,
        device: str = "sim:0",
        compile_s: float = 0.0,
        eval_s: float = 0.0,
        features: Any = None,
    ):
        self.info = info
        self._features = features
        self.device = device
        self._answer = answer
        self.compile_s = compile_s
        self.eval_s = eval_s
        self.calls: list[tuple[str, str]] = []  # (kind, config hash): what this evaluator was asked

    def start(self) -> WorkerInfo:
        return WorkerInfo(self.info.meta, self.info.facts, self.info.env, self.device, self.info.device_count)

    def compile(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        self.calls.append(("compile", config_hash(config)))
        if self.compile_s:
            time.sleep(self.compile_s)
        res = self._answer(dict(config), dict(shape))
        if res.status is TrialStatus.COMPILE_FAILED:
            return res
        return TrialResult(TrialStatus.OK, dict(config), compile_s=self.compile_s)

    def evaluate(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        self.calls.append(("eval", config_hash(config)))
        if self.eval_s:
            time.sleep(self.eval_s)
        res = self._answer(dict(config), dict(shape))
        res.device = self.device
        res.worker = res.worker or f"sim:{self.device}"
        return res

    def features(
        self, shape: dict[str, int], configs: list[dict[str, Any]], facts: dict[str, int]
    ) -> list[dict[str, float]] | None:
        """The kernel's features from ``features(config, shape, facts)`` when one was given, else None."""
        if self._features is None:
            return None
        return [dict(self._features(dict(c), dict(shape), dict(facts))) for c in configs]

    def close(self) -> None:
        pass


@dataclass
class SimulatedBackend:
    """Simulated evaluators sharing one answer function; ``devices`` fake devices."""

    info: WorkerInfo
    answer: Answer
    compile_s: float = 0.0
    eval_s: float = 0.0
    #: the kernel's features(config, shape, facts), if any (e.g. loaded from its file for a replay)
    features: Any = None
    made: list[SimulatedEvaluator] = field(default_factory=list)

    def timer(self, device: str) -> Evaluator:
        ev = SimulatedEvaluator(
            self.info, self.answer, device=device, compile_s=0.0, eval_s=self.eval_s, features=self.features
        )
        self.made.append(ev)
        return ev

    def compiler(self) -> Evaluator:
        ev = SimulatedEvaluator(self.info, self.answer, device="sim-compile", compile_s=self.compile_s)
        self.made.append(ev)
        return ev
