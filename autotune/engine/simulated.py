"""Evaluation without a device (as Kernel Tuner's simulation runner: replaying a recorded landscape is one
more backend, not a patch on the search loop).

- ``Landscape``: a landscape file, every config of a search space measured on one shape on one device
  (``data/landscapes/*.json``; ``autotune landscape export`` writes one from a database key);
- ``SimulatedKernel``: a kernel as a worker would describe it, answering from one landscape per shape;
- ``SimulatedEvaluator`` / ``SimulatedBackend``: evaluators that answer from a function (e.g.
  ``SimulatedKernel.answer``), optionally sleeping to stand in for compile and measurement time, so the
  whole search (claims, store, strategies) runs and is measured on a CPU with any number of fake devices;
- ``SerialPipeline``: the pipeline without threads, for a search whose trajectory must depend on its seed
  alone (``autotune replay``).

Landscape file format (JSON, one file per kernel x shape x device)::

    {
      "format": "autotune-landscape", "version": 1,
      "kernel": "gemm_fp8",                 # the kernel's stored name
      "device_name": "NVIDIA H200",         # GPU model (or cpu)
      "facts": {"sm_count": 132, ...},      # device facts the space's constraints use
      "shape": {"M": 64, "N": 2112, "K": 7168},
      "space": {...},                       # the search space, as in search_spaces/*.yaml (or "space_file":
                                            #   a path relative to this file)
      "space_hash": "...",                  # Space.hash() of it
      "default_config": {...},              # the kernel's default config (a search starts from it)
      "configs": [                          # every config measured (a replay of a config missing here
        {"config": {...}, "status": "ok",   #   answers launch_failed)
         "time_s": 4.5e-05, "error": null}, # status: ok | invalid | compile_failed | launch_failed |
        ...                                 #   wrong_result | timeout | crashed
      ]
    }

Extra keys are kept and ignored (the H200 recordings in data/landscapes/ carry cuBLASLt times and the check's
metrics)."""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.engine.evaluator import Backend, Evaluator
from autotune.engine.messages import Candidate, KernelMeta, WorkerInfo
from autotune.engine.pipeline import DeviceStats, Outcome, Pipeline
from autotune.engine.worker import EvalOptions
from autotune.errors import SettingsError
from autotune.shapes import format_shape
from autotune.space.space import Space
from autotune.trial import TrialResult, TrialStatus, config_hash

FORMAT = "autotune-landscape"
VERSION = 1

#: (config, shape) -> result; the simulated evaluator's answer
Answer = Callable[[dict[str, Any], dict[str, int]], TrialResult]


# ------------------------------------------------------------------------------------------- landscapes


@dataclass
class Landscape:
    """One landscape file: the recorded result of every config of ``space`` on one shape and device."""

    kernel: str
    device_name: str
    facts: dict[str, int]
    shape: dict[str, int]
    space: Space
    default_config: dict[str, Any] | None
    #: config hash -> result
    results: dict[str, TrialResult] = field(default_factory=dict)
    path: str = ""

    @property
    def shape_key(self) -> str:
        return format_shape(self.shape)

    @property
    def best_s(self) -> float:
        return min((r.time_s for r in self.results.values() if r.timed), default=math.inf)

    def answer(self, config: Mapping[str, Any], shape: Mapping[str, int] | None = None) -> TrialResult:
        """The recorded result of ``config`` (``launch_failed`` when it was not recorded)."""
        rec = self.results.get(config_hash(dict(config)))
        if rec is None:
            return TrialResult(TrialStatus.LAUNCH_FAILED, dict(config), error="not in the landscape")
        return TrialResult(rec.status, dict(config), time_s=rec.time_s, tflops=rec.tflops, error=rec.error)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "kernel": self.kernel,
            "device_name": self.device_name,
            "facts": dict(self.facts),
            "shape": dict(self.shape),
            "space": self.space.to_dict(),
            "space_hash": self.space.hash(),
            "default_config": self.default_config,
            "configs": [
                {"config": r.config, "status": r.status.value, "time_s": r.time_s, "error": r.error}
                for r in self.results.values()
            ],
        }


def config_results(configs: list[dict[str, Any]], space: Space) -> dict[str, TrialResult]:
    """A landscape file's ``configs`` entries as results by config hash (configs normalized in ``space``)."""
    results: dict[str, TrialResult] = {}
    if not isinstance(configs, list) or not configs:
        raise ValueError("'configs' is empty: a landscape needs recorded configs")
    for i, c in enumerate(configs):
        cfg = space.normalize(c["config"])
        status = TrialStatus(c["status"])
        results[config_hash(cfg)] = TrialResult(
            status,
            cfg,
            time_s=_time_s(c.get("time_s"), status, i),
            tflops=c.get("tflops"),
            error=c.get("error"),
        )
    return results


def _time_s(value: Any, status: TrialStatus, i: int) -> float | None:
    """A recorded time: an ``ok`` result needs a positive, finite number of seconds (0, negative, NaN, a
    string or none would turn every regret into nan or -100 %); other results' times are not used."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if status is not TrialStatus.OK:
        return float(value) if ok else None
    if not ok:
        raise ValueError(f"configs[{i}]: an ok result needs time_s > 0 in seconds (got {value!r:.40})")
    return float(value)


def load_landscape(path: str | Path, *, space: Space | None = None) -> Landscape:
    """Read and check one landscape file; a malformed one is a ``SettingsError`` naming it. ``space``:
    read it in this space instead of the file's (e.g. the space it was recorded with, kept beside it)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
        if doc.get("format", FORMAT) != FORMAT or int(doc.get("version", VERSION)) > VERSION:
            raise ValueError(f"not an {FORMAT} v{VERSION} file")
        space = space or _file_space(doc, p)
        default = doc.get("default_config")
        land = Landscape(
            kernel=str(doc["kernel"]),
            device_name=str(doc.get("device_name") or doc.get("gpu") or "unknown"),
            facts={str(k): int(v) for k, v in (doc.get("facts") or {}).items()},
            shape={str(k): int(v) for k, v in doc["shape"].items()},
            space=space,
            default_config=space.normalize(default) if default else None,
            results=config_results(doc["configs"], space),
            path=str(p),
        )
        if not math.isfinite(land.best_s):
            raise ValueError("no ok config with a time: there is no best to measure regret against")
        return land
    except SettingsError:
        raise
    except Exception as e:  # one line per bad file, whatever is wrong in it
        raise SettingsError(f"{p}: not a usable landscape file: {str(e)[:200]}") from None


def _file_space(doc: Mapping[str, Any], p: Path) -> Space:
    if "space" in doc:
        return Space.from_dict(doc["space"], source=f"{p}:space")
    if "space_file" in doc:
        return Space.from_yaml(p.parent / doc["space_file"])
    raise ValueError("no 'space' (or 'space_file')")


def simulated_env(device_name: str, facts: Mapping[str, int]) -> dict[str, Any]:
    """The environment a landscape's device is keyed under in a store (recorded landscapes carry no
    software versions: "replay" stands for them)."""
    return {
        "device_kind": "cuda",
        "gpu_name": device_name,
        "cc": "replay",
        "sm_count": int(facts.get("sm_count", 0)),
        "driver": "replay",
        "cuda": "replay",
        "torch": "replay",
        "triton": "replay",
    }


@dataclass
class SimulatedKernel:
    """A kernel as its worker would describe it (meta, device facts, environment), answering each shape
    from that shape's landscape."""

    meta: KernelMeta
    facts: dict[str, int]
    env: dict[str, Any]
    #: shape key -> its landscape
    landscapes: dict[str, Landscape] = field(default_factory=dict)

    def answer(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        land = self.landscapes.get(format_shape(shape))
        if land is None:
            return TrialResult(TrialStatus.LAUNCH_FAILED, dict(config), error="not in the landscape")
        return land.answer(config)

    def info(self, device: str = "sim:0", device_count: int = 1) -> WorkerInfo:
        return WorkerInfo(self.meta, dict(self.facts), dict(self.env), device, device_count)

    @classmethod
    def of(
        cls,
        landscapes: Sequence[Landscape],
        *,
        default_config: Mapping[str, Any] | None = None,
        facts: Mapping[str, int] | None = None,
        dtypes: Mapping[str, str] | None = None,
    ) -> SimulatedKernel:
        """The kernel of ``landscapes`` (one per shape; the first gives the space, device and default)."""
        first = landscapes[0]
        facts = dict(facts if facts is not None else first.facts)
        default = default_config if default_config is not None else first.default_config
        meta = KernelMeta(
            name=first.kernel,
            path="simulated",
            source_hash="simulated",
            space=first.space.to_dict(),
            space_source=first.space.source,
            default_config=dict(default or {}),
            default_shapes=tuple(dict(land.shape) for land in landscapes),
            shape_params=tuple(first.shape),
            dtypes=dict(dtypes or {}),
        )
        env = simulated_env(first.device_name, facts)
        return cls(meta, facts, env, {land.shape_key: land for land in landscapes})


class Noisy:
    """An ``Answer`` with measurement noise injected: each timed sample of ``answer`` times a seeded
    log-normal factor (``sigma``: its log's standard deviation), and, with probability ``lucky``, times
    ``lucky_factor`` instead (the one lucky sample that crowned a wrong best). ``slow``: configs (by hash)
    whose true time is multiplied (a regression of a stored best). The true times stay ``answer``'s."""

    def __init__(
        self,
        answer: Answer,
        *,
        sigma: float,
        seed: int = 0,
        lucky: float = 0.0,
        lucky_factor: float = 0.6,
        slow: Mapping[str, float] | None = None,
    ):
        import random

        self.answer, self.sigma, self.lucky, self.lucky_factor = answer, sigma, lucky, lucky_factor
        self.slow = dict(slow or {})
        self.rng = random.Random(seed)

    def true_s(self, config: Mapping[str, Any], shape: Mapping[str, int]) -> float | None:
        res = self.answer(dict(config), dict(shape))
        if res.time_s is None:
            return None
        return res.time_s * self.slow.get(config_hash(config), 1.0)

    def __call__(self, config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        res = self.answer(config, shape)
        true = self.true_s(config, shape)
        if true is None or res.status is not TrialStatus.OK:
            return res
        factor = (
            self.lucky_factor if self.rng.random() < self.lucky else self.rng.lognormvariate(0, self.sigma)
        )
        t = true * factor
        return replace(
            res, time_s=t, tflops=res.tflops * res.time_s / t if res.tflops and res.time_s else None
        )


# ------------------------------------------------------------------------------------------- evaluators


class SimulatedEvaluator:
    """An ``Evaluator`` without a device: answers from ``answer`` (e.g. ``SimulatedKernel.answer``),
    sleeping ``compile_s`` / ``eval_s`` to stand in for the work."""

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
        #: what the search set (``Pipeline.set_race``); a landscape's time is what it is, so nothing races
        #: here, but ``races`` keeps the bound each evaluation was asked under
        self.options = EvalOptions()
        self.races: list[tuple[int, float] | None] = []

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
        self.races.append(self.options.race)
        if self.eval_s:
            time.sleep(self.eval_s)
        res = self._answer(dict(config), dict(shape))
        return replace(res, device=self.device, worker=res.worker or f"sim:{self.device}")

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

    @classmethod
    def of(cls, kernel: SimulatedKernel, **kw: Any) -> SimulatedBackend:
        """A backend answering from ``kernel``'s landscapes."""
        return cls(kernel.info(), kernel.answer, **kw)

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


class SerialPipeline(Pipeline):
    """The pipeline as a replay drives it: no threads; the candidates are evaluated one at a time, in the
    order submitted, when the search waits for a result, and none is ready "meanwhile"
    (``next_result(timeout=0)`` is None), as behind a device slower than the search loop. So a search's
    trajectory depends on its seed alone. ``depth``: the candidates in flight of the pipeline it stands
    for (the H200 host's: 15 compile workers + 4 for its device = 19); it refills, as that one does, when
    two per device have finished."""

    def __init__(self, backend: Backend, devices: list[str], depth: int):
        super().__init__(backend, devices, compile_workers=0)
        self._depth = max(1, depth)
        self._queue: deque[Candidate] = deque()
        self._turn = 0

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def low_water(self) -> int:
        return max(1, self._depth - 2 * max(1, len(self.timers)))

    def start_compilers(self) -> None:
        pass

    def start(self, started: dict[int, WorkerInfo] | None = None) -> list[WorkerInfo]:
        started = dict(started or {})
        infos = [started[i] if i in started else ev.start() for i, ev in enumerate(self.timers)]
        for info in infos:
            self.stats[info.device] = DeviceStats(info.device)
        return infos

    def close(self) -> None:
        for ev in self.timers:
            ev.close()

    def submit(self, candidate: Candidate) -> None:
        self.in_flight += 1
        self._queue.append(candidate)

    def drop_pending(self) -> list[Candidate]:
        dropped = list(self._queue)
        self._queue.clear()
        self.in_flight -= len(dropped)
        return dropped

    def next_result(self, timeout: float | None = None) -> Outcome | None:
        if not self._queue or timeout == 0:
            return None
        cand = self._queue.popleft()
        self.in_flight -= 1
        ev = self.timers[self._turn % len(self.timers)]
        self._turn += 1
        device = ev.device
        t0 = time.monotonic()
        res = ev.evaluate(cand.config, cand.shape)
        if res.status is TrialStatus.CRASHED and cand.attempt == 0:  # as the threaded pipeline: once more
            cand = replace(cand, attempt=1)
            res = ev.evaluate(cand.config, cand.shape)
        t1 = time.monotonic()
        self.stats.setdefault(device, DeviceStats(device)).spans.append((t0, t1))
        return Outcome(cand, res, device, t0, t1)
