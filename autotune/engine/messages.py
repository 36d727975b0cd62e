"""Typed values that cross process boundaries: what a worker learnt at start, and each message on the pipe
between the orchestrator and a worker (frozen dataclasses, as Optuna's ``FrozenTrial``; no tagged tuples,
no dicts read by string key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from autotune.trial import TrialResult


@dataclass(frozen=True)
class KernelMeta:
    """What the orchestrator knows of a kernel file, sent by the worker that imported it."""

    name: str
    path: str
    source_hash: str
    space: dict[str, Any]
    space_source: str
    default_config: dict[str, Any]
    default_shapes: tuple[dict[str, int], ...]
    shape_params: tuple[str, ...]
    dtypes: dict[str, str]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelMeta:
        return cls(
            name=str(d["name"]),
            path=str(d.get("path", "")),
            source_hash=str(d["source_hash"]),
            space=dict(d["space"]),
            space_source=str(d.get("space_source", "<inline>")),
            default_config=dict(d["default_config"]),
            default_shapes=tuple(dict(s) for s in d["default_shapes"]),
            shape_params=tuple(d["shape_params"]),
            dtypes=dict(d.get("dtypes", {})),
        )


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker learnt at start: the kernel, the device's facts and environment."""

    meta: KernelMeta
    facts: dict[str, int]
    env: dict[str, Any]
    device: str
    #: GPUs this worker's process can see (resolves ``--devices all``); 0 on the CPU
    device_count: int = 0


@dataclass(frozen=True)
class Job:
    """Orchestrator -> worker: compile (only) or evaluate one config on one shape."""

    kind: Literal["compile", "eval"]
    config: dict[str, Any]
    shape: dict[str, int]
    num_tests: int = 30
    #: racing (``SearchSettings.race``): (timed calls first, the per-call time over which the config is not
    #: timed further); None: all ``num_tests``
    race: tuple[int, float] | None = None


@dataclass(frozen=True)
class FeaturesJob:
    """Orchestrator -> worker: the kernel file's analytic features of configs on a shape (its optional
    ``features(config, shape, facts)`` hook), for the ``auto`` strategy's models."""

    shape: dict[str, int]
    configs: list[dict[str, Any]]
    facts: dict[str, int]


@dataclass(frozen=True)
class FeatureRows:
    """Worker -> orchestrator: one dict per config, or None when the kernel declares no features (or they
    failed: ``error``)."""

    rows: list[dict[str, float]] | None
    error: str | None = None


@dataclass(frozen=True)
class Stop:
    """Orchestrator -> worker: exit cleanly."""


@dataclass(frozen=True)
class Ready:
    info: WorkerInfo


@dataclass(frozen=True)
class Warm:
    """A timing worker's warm-up is done (``bench.warm_up``: the profiler's first session and the flush
    buffer, paid while the compile pool compiles the first configs): it measures from now on. ``error``:
    the warm-up failed (the first measurement reports it as that candidate's status)."""

    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class StartFailed:
    error_type: str
    message: str


@dataclass(frozen=True)
class Compiled:
    """Compilation finished; checking and timing start (the run timeout starts now)."""

    compile_s: float
    #: seconds the bench will spend on its own work beyond the candidate's calls (the cache flush before
    #: each timed call: a second or more per measurement on a CPU with a large cache, whatever the kernel's
    #: speed): added to the run timeout, so a fast valid config is never a ``timeout`` for it
    overhead_s: float = 0.0


@dataclass(frozen=True)
class Checked:
    """The candidate's first call of the run returned (it is slow if it then runs out of time, not hung)."""


@dataclass(frozen=True)
class Done:
    result: TrialResult
    #: the CUDA context may be poisoned: the worker exits and is replaced
    restart: bool = False


@dataclass(frozen=True)
class ShapeFailed:
    """The kernel file could not build inputs/reference for a shape (a bug in the file, not a config)."""

    message: str


@dataclass(frozen=True)
class Candidate:
    """A config on its way through the pipeline."""

    config: dict[str, Any]
    config_hash: str
    shape: dict[str, int]
    #: evaluations of this config so far in this process (a crash of an outside-killed worker retries once)
    attempt: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
