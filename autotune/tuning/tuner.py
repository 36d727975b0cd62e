"""The search of one kernel file: starts the workers (one timing worker per device, a compile pool), then
searches each shape with the one search loop (``tuning.shape_search.ShapeSearch``) on them.

Never imports the user's kernel file and never initializes CUDA (the workers do)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from autotune import imports, timeline
from autotune.devices import ALL, parse_devices
from autotune.engine import Backend, EvalOptions, Pipeline, ProcessBackend, WorkerInfo
from autotune.env import env_hash
from autotune.errors import SettingsError
from autotune.settings import SearchSettings, default_compile_workers
from autotune.shapes import Shape, check_shape, format_shape, parse_shapes
from autotune.space.space import Space
from autotune.store import Owner
from autotune.trial import config_hash
from autotune.tuning.finalists import Finalist
from autotune.tuning.report import ShapeReport, TrialEvent
from autotune.tuning.shape_search import SearchEngine, SearchStore, ShapeSearch

__all__ = ["Finalist", "ShapeReport", "TrialEvent", "Tuner", "parse_shapes"]

log = logging.getLogger("autotune.tuner")

#: (backend, compile workers) -> the pipeline that drives the backend's evaluators
PipelineFactory = Callable[[Backend, int], Pipeline]


class Tuner:
    """Searches one kernel file's shapes on one or more devices. Use as a context manager (owns the
    worker processes)."""

    def __init__(
        self,
        kernel_path: str,
        store: Any,
        settings: SearchSettings,
        on_event: Callable[[TrialEvent], None] | None = None,
        backend: Backend | None = None,
        pipeline: PipelineFactory | None = None,
        wait_for_study: bool = True,
        long_lived: bool = False,
    ):
        """``pipeline``: how the backend's evaluators are driven (default: the threaded ``Pipeline``; a
        replay's ``SerialPipeline`` makes a simulated search depend on its seed alone).
        ``wait_for_study``: False, a shape's end does not wait on an Optuna study writer still starting
        (``StudyWriter``'s ``wait_for_start``; ``autotune search``: the next search adds what it missed).
        ``long_lived`` (``autotune serve``): the compile workers warm up on the default config
        (``Pipeline.warm_compilers``), a study writer is kept started for the next shape, and a shape's writer
        finishes its study copy in the background: a request is answered without waiting on either (0.5 s
        and 0.2-0.3 s of a handed-over 1-evaluation search on an H100); closing the tuner waits for the copy."""
        self.wait_for_study = wait_for_study
        self.long_lived = long_lived
        #: study copies finishing in the background (``long_lived``)
        self._closing: list[threading.Thread] = []
        #: seconds closing waits for study copies still finishing (a test on a loaded machine waits longer)
        self.closing_wait_s = _CLOSING_WAIT_S
        #: the first shape's study writer, started beside the workers (its imports take seconds)
        self._writer: Any = None
        self.kernel_path = kernel_path
        self.store = store
        self.settings = settings
        self.on_event = on_event
        self.backend = backend or ProcessBackend(
            kernel_path,
            EvalOptions(
                num_tests=settings.num_tests,
                compile_timeout_s=settings.compile_timeout_s,
                run_timeout_s=settings.run_timeout_s,
                start_timeout_s=settings.start_timeout_s,
                env=dict(settings.worker_env),
            ),
        )
        self._make_pipeline: PipelineFactory = pipeline or (lambda b, workers: Pipeline(b, [], workers))
        self.owner = Owner()
        self._features: dict[str, dict[str, dict[str, float]] | None] = {}
        self.pipeline: Pipeline | None = None
        self.info: WorkerInfo | None = None
        self.infos: list[WorkerInfo] = []
        self.space: Space | None = None
        self._preload: threading.Thread | None = None

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._preload is not None:
            # a daemon thread still inside an extension's import (scikit-learn's OpenMP, torch) when the
            # interpreter exits aborts the process ("terminate called without an active exception"):
            # a search that fails early (a bad --shape) waits for it
            self._preload.join(timeout=60)
            self._preload = None
        if self._writer is not None:  # started, never given a shape
            self._writer.close(quiet=True)
            self._writer = None
        deadline = time.monotonic() + self.closing_wait_s
        for t in self._closing:  # past this, what a copy did not write the next search of its shape adds
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._closing.clear()
        if self.pipeline is not None:
            with timeline.phase("stop the workers"):
                self.pipeline.close()

    @property
    def broken(self) -> bool:
        """True once a stage of the workers ended on an error that is no trial's (a shape whose inputs
        could not be built): nothing more is evaluated, a long-lived owner starts a new ``Tuner``."""
        return self.pipeline is not None and self.pipeline.failed is not None

    # ------------------------------------------------------------------ start

    def start(self) -> WorkerInfo:
        """Start one timing worker per device (``--devices all``: every GPU the first worker sees) and the
        compile pool. GPUs of different models would need different keys: refused."""
        s = self.settings
        devices = parse_devices(s.devices)
        # The compile pool starts before the first timing worker, so their start-ups (torch, Triton and
        # the kernel file's imports: seconds each) overlap. Automatic size: cores - 1 beside GPUs; none
        # beside a CPU timing worker, whose measurements compiling processes would disturb.
        workers = s.compile_workers
        if workers is None:
            wants_gpu = devices == ALL or any(d.is_cuda for d in devices) or (not devices and _gpu_present())
            # never more than one shape's budget can keep busy: each of them imports torch and Triton,
            # beside the timing worker's own start-up (a 1-evaluation search started 15)
            workers = (
                min(default_compile_workers(), s.trials or default_compile_workers()) if wants_gpu else 0
            )
        self.pipeline = self._make_pipeline(self.backend, workers)
        self.pipeline.warm_compilers = self.long_lived
        self.pipeline.start_compilers()
        self._preload = _preload_strategy(s.strategy)
        self._writer = self._study_writer()
        timeline.mark(f"{workers} compile worker(s) spawning")
        try:
            first = self.backend.timer("" if devices in ((), ALL) else str(devices[0]))
            self.pipeline.timers.append(first)
            with timeline.phase("start the first timing worker (until Ready)"):
                info = first.start()
            started = {0: info}
            if devices == ALL:
                if info.device_count < 1 or not info.device.startswith("cuda"):
                    raise SettingsError("--devices all: this machine's torch sees no CUDA GPU")
                first.device = "cuda:0"
                started = {0: WorkerInfo(info.meta, info.facts, info.env, "cuda:0", info.device_count)}
                self.pipeline.timers += [self.backend.timer(f"cuda:{i}") for i in range(1, info.device_count)]
            elif len(devices) > 1:
                self.pipeline.timers += [self.backend.timer(str(d)) for d in devices[1:]]
            self.infos = self.pipeline.start(started)
        except BaseException:
            self.pipeline.close()
            raise
        hashes = {env_hash(i.env) for i in self.infos}
        if len(hashes) > 1:
            names = sorted({f"{i.device}={i.env.get('gpu_name')}" for i in self.infos})
            raise SettingsError(
                f"--devices mixes GPU models or software ({', '.join(names)}): results are keyed per model; "
                "run one search per model"
            )
        self.info = self.infos[0]
        self.space = Space.from_dict(self.info.meta.space, source=self.info.meta.space_source)
        # A space nothing on this device satisfies is bad input: said now (bounded time), before the
        # database is written to.
        self.space.find_valid(self.info.facts)
        return self.info

    def features(self, shape: dict[str, int], configs: list[dict[str, Any]]) -> list[dict[str, float]] | None:
        """The kernel file's analytic features of ``configs`` on ``shape``, computed by the first timing
        worker (only between shapes: nothing is in flight then) and cached; None without a hook."""
        assert self.pipeline is not None and self.info is not None
        timer = self.pipeline.timers[0]
        fn = getattr(timer, "features", None)
        if fn is None:
            return None
        cache = self._features.setdefault(format_shape(shape), {})
        if cache is None:
            return None
        todo = {config_hash(c): c for c in configs if config_hash(c) not in cache}
        if todo:
            rows = fn(dict(shape), list(todo.values()), dict(self.info.facts))
            if rows is None:
                self._features[format_shape(shape)] = None
                return None
            cache.update(zip(todo, rows, strict=True))
        return [cache[config_hash(c)] for c in configs]

    def _study_writer(self) -> Any:
        """A study writer not yet bound to a study, or None when the store has no database to write to."""
        from autotune.store.optuna_study import StudyWriter

        if getattr(self.store, "db", None) is None:
            return None
        return StudyWriter(self.store, wait_for_start=self.wait_for_study)

    def _bind_writer(self, study_name: str, space: Space, attrs: dict[str, Any] | None = None) -> Any:
        """The writer of a shape's study: the one started beside the workers, then a new one per shape;
        ``attrs``: the study's user attributes (kernel, shape, device)."""
        writer, self._writer = self._writer or self._study_writer(), None
        if self.long_lived:
            self._writer = self._study_writer()  # the next shape's, importing Optuna meanwhile
            self._closing[:] = [t for t in self._closing if t.is_alive()]  # in place: each writer's list
            return _ClosingInBackground(writer.bind(study_name, space, attrs), self._closing)
        return writer.bind(study_name, space, attrs)

    def resolve_shapes(self, shapes: list[dict[str, int]] | None) -> list[Shape]:
        assert self.info is not None
        params = self.info.meta.shape_params
        return [check_shape(s, params) for s in (shapes or self.info.meta.default_shapes)]

    # ------------------------------------------------------------------ one shape

    def search_shape(self, shape: Shape, *, warm_start: list[dict[str, Any]] | None = None) -> ShapeReport:
        """``warm_start``: configs evaluated first (after the default), before the strategy's proposals, e.g.
        the best configs of the same shape under an older environment (nightly re-tunes); those not valid
        in the space here are skipped."""
        assert self.info is not None and self.pipeline is not None and self.space is not None
        if self._preload is not None:
            # never import the strategy's modules beside the preloading thread: two threads importing
            # scikit-learn's circular modules at once can see one half-initialized (an internal error)
            self._preload.join()
            self._preload = None
        store = self.store
        # a search killed with -9 left its claims running: close them (same host: pid gone; others: lease)
        store.claims.close_stale()
        attrs = {"kernel": self.info.meta.name, "shape": dict(shape), "device": self.info.env.get("gpu_name")}
        search = ShapeSearch(
            shape,
            SearchEngine(self.pipeline, tuple(self.infos), self.space, self.features),
            SearchStore.of(store),
            self.settings,
            owner=self.owner,
            study=lambda name, space: self._bind_writer(name, space, attrs),
            on_event=self.on_event,
        )
        search.warm_start(warm_start or ())
        return search.run()


#: seconds closing a long-lived tuner waits for study copies still finishing (SIGTERM: exit within 10 s)
_CLOSING_WAIT_S = 5.0


class _ClosingInBackground:
    """A shape's study writer whose ``close`` returns at once and finishes on a thread (``Tuner.long_lived``);
    a failed search's close stays in the foreground (it is short: ``quiet``)."""

    def __init__(self, writer: Any, closing: list[threading.Thread]):
        self._writer, self._closing = writer, closing

    def add(self, trial_id: int, result: Any, **attrs: Any) -> None:
        self._writer.add(trial_id, result, **attrs)

    def close(self, *, quiet: bool = False) -> None:
        if quiet:
            self._writer.close(quiet=True)
            return
        t = threading.Thread(target=self._writer.close, name="autotune-study-close", daemon=True)
        t.start()
        self._closing.append(t)


def _preload_strategy(name: str) -> threading.Thread:
    """Import the strategy's modules on a thread while the workers start (seconds in which this process
    only waits), not after them on the path to the first proposal: the ``auto`` strategy's Optuna, NumPy
    and scikit-learn took seconds there."""

    def load() -> None:
        with timeline.phase(f"preload strategy {name}'s modules (thread)"):
            # Everything under the lock, the registry's look-up too: it imports the strategy's module and
            # with it Optuna, while a new database's Optuna tables import Optuna on another thread (unlocked,
            # an H100 search with --configs died with KeyError: 'optuna.study')
            try:
                with imports.LOCK:
                    from autotune.search import strategy_info

                    info = strategy_info(name)
                    # a model (auto's, or the exhaustive strategy's order) from the store
                    if info.wants_history:
                        import importlib

                        for module in (
                            "autotune.search.auto",
                            "sklearn.ensemble",
                            "sklearn.gaussian_process",
                        ):
                            importlib.import_module(module)
            except Exception:  # the search imports them again and reports what fails
                log.debug("preloading the strategy failed", exc_info=True)

    thread = threading.Thread(target=load, daemon=True, name="autotune-preload")
    thread.start()
    return thread


def _gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU, without importing torch or initializing CUDA (the
    orchestrator never does): the driver's control device exists."""
    import os

    return os.path.exists("/dev/nvidiactl")
