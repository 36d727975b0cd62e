"""The evaluation engine: evaluators (process-backed and simulated), typed messages, the compile/timing
pipeline and claim leases. It never knows which strategy proposed a config."""

from autotune.engine.evaluator import Backend, Evaluator, ProcessBackend
from autotune.engine.messages import Candidate, KernelMeta, WorkerInfo
from autotune.engine.pipeline import Outcome, Pipeline
from autotune.engine.simulated import (
    Landscape,
    SerialPipeline,
    SimulatedBackend,
    SimulatedEvaluator,
    SimulatedKernel,
    load_landscape,
)
from autotune.engine.worker import EvalOptions, ShapeInputError, Worker

__all__ = [
    "Backend",
    "Candidate",
    "EvalOptions",
    "Evaluator",
    "KernelMeta",
    "Landscape",
    "Outcome",
    "Pipeline",
    "ProcessBackend",
    "SerialPipeline",
    "ShapeInputError",
    "SimulatedBackend",
    "SimulatedEvaluator",
    "SimulatedKernel",
    "Worker",
    "WorkerInfo",
    "load_landscape",
]
