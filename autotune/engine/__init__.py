"""The evaluation engine: evaluators (process-backed and simulated), typed messages, the compile/timing
pipeline and claim leases. It never knows which strategy proposed a config."""

from autotune.engine.evaluator import (
    Backend,
    Evaluator,
    Landscape,
    ProcessBackend,
    SimulatedBackend,
    SimulatedEvaluator,
)
from autotune.engine.messages import Candidate, KernelMeta, WorkerInfo
from autotune.engine.pipeline import Outcome, Pipeline
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
    "ShapeInputError",
    "SimulatedBackend",
    "SimulatedEvaluator",
    "Worker",
    "WorkerInfo",
]
