"""The evaluation engine: evaluators (process-backed and simulated), typed messages, the compile/timing
pipeline and claim leases. It never knows which strategy proposed a config."""

from .evaluator import Backend, Evaluator, Landscape, ProcessBackend, SimulatedBackend, SimulatedEvaluator
from .messages import Candidate, KernelMeta, WorkerInfo
from .pipeline import Outcome, Pipeline
from .worker import EvalOptions, ShapeInputError, Worker

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
