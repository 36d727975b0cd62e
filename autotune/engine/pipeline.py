"""The evaluation pipeline: a compile pool feeding one timing worker per device.

    submit(candidate) -> compile queue -> N compile evaluators (CPU processes; fill Triton's disk cache)
                      -> compiled queue -> one timing evaluator per device (check + time)
                      -> results queue -> next_result()

Threads drive the evaluators (each evaluator is a process handle, so the threads only wait on pipes).
The search loop keeps enough candidates in flight that a GPU never waits on a compiler while work remains.
A candidate whose worker died (killed from outside, or the config crashed it) is evaluated once more on a
fresh worker before it is recorded ``crashed``; a typed CUDA fault (``engine.faults``) is final at once.
The pipeline knows nothing of strategies or the database."""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from autotune.engine.evaluator import Backend, Evaluator
from autotune.engine.faults import is_worker_death
from autotune.engine.messages import Candidate, WorkerInfo
from autotune.trial import TrialResult, TrialStatus

log = logging.getLogger("autotune.engine")


@dataclass(frozen=True)
class Outcome:
    candidate: Candidate
    result: TrialResult
    device: str
    started: float  # time.monotonic() when its timing began (or its compile failed)
    finished: float
    #: handed back unevaluated (a deadline passed while it waited: ``Pipeline.drop_pending``)
    dropped: bool = False


@dataclass
class DeviceStats:
    """When each timing evaluator was busy: its idle gaps are the orchestrator's overhead per trial."""

    device: str
    spans: list[tuple[float, float]] = field(default_factory=list)

    def gaps(self) -> list[float]:
        return [b[0] - a[1] for a, b in zip(self.spans, self.spans[1:], strict=False)]


class _Failure:
    """An error a stage cannot turn into a trial status (the kernel file cannot build a shape's inputs,
    a worker cannot restart): re-raised by ``next_result``."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class Pipeline:
    def __init__(self, backend: Backend, devices: list[str], compile_workers: int):
        self.backend = backend
        self.timers: list[Evaluator] = [backend.timer(d) for d in devices]
        self.compile_workers = compile_workers
        self._compile_q: queue.Queue[Candidate | None] = queue.Queue()
        self._timing_q: queue.Queue[Candidate | None] = queue.Queue()
        self._results: queue.Queue[Outcome | _Failure] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._compilers: list[Evaluator] = []
        self._stopping = threading.Event()
        #: set at a deadline: candidates not yet timing are handed back instead of evaluated
        self._dropping = threading.Event()
        self.stats: dict[str, DeviceStats] = {}
        self.in_flight = 0
        self._compilers_started = False
        #: each compile worker compiles the kernel's default config at its first default shape as soon as
        #: it started (a long-lived owner: ``autotune serve``). A process's first Triton compile costs
        #: ~0.5 s even from the disk cache; warm, a request's first candidate compiles in milliseconds
        self.warm_compilers = False
        #: the error a stage could not turn into a trial status: the stage's thread has ended, so this
        #: pipeline evaluates nothing more (its owner starts a new one: ``Tuner.broken``)
        self.failed: BaseException | None = None

    @property
    def depth(self) -> int:
        """Candidates in flight that keep every stage busy: each compiler one ahead, each device four (so
        the search refills it in batches, one claim transaction per batch, before it runs dry)."""
        return self.compile_workers + 4 * len(self.timers)

    @property
    def low_water(self) -> int:
        """Refill below this many in flight: every compiler and device still has one queued."""
        return self.compile_workers + 2 * len(self.timers)

    # ------------------------------------------------------------------ lifecycle

    def start_compilers(self) -> None:
        """Start the compile pool's threads (each starts its worker process: torch and the kernel file's
        imports). Called before the timing workers start, so both start-ups overlap. Idempotent."""
        if self._compilers_started:
            return
        self._compilers_started = True
        for _ in range(self.compile_workers):
            t = threading.Thread(target=self._compile_loop, daemon=True, name="compiler")
            t.start()
            self._threads.append(t)

    def start(self, started: dict[int, WorkerInfo] | None = None) -> list[WorkerInfo]:
        """Start the compile pool and the timing evaluators (in parallel) and their threads; ``started``
        gives infos of timers the caller already started."""
        started = dict(started or {})
        self.start_compilers()
        todo = [i for i in range(len(self.timers)) if i not in started]
        if todo:
            with ThreadPoolExecutor(len(todo)) as ex:
                for i, info in zip(todo, ex.map(lambda i: self.timers[i].start(), todo), strict=True):
                    started[i] = info
        infos = [started[i] for i in range(len(self.timers))]
        for ev, info in zip(self.timers, infos, strict=True):
            self.stats[info.device] = DeviceStats(info.device)
            t = threading.Thread(target=self._time_loop, args=(ev, info.device), daemon=True, name="timer")
            t.start()
            self._threads.append(t)
        return infos

    def close(self) -> None:
        """Stop every thread and evaluator (kills worker processes still busy). The evaluators close in
        parallel: each waits for its process to exit, and 16 closing one by one took seconds."""
        self._stopping.set()
        for _ in range(self.compile_workers):
            self._compile_q.put(None)
        for _ in self.timers:
            self._timing_q.put(None)

        def close(ev: Evaluator) -> None:
            try:
                ev.close()
            except Exception:  # closing must never hide the error that ended the search
                log.debug("closing an evaluator failed", exc_info=True)

        evaluators = [*self.timers, *self._compilers]
        if evaluators:
            with ThreadPoolExecutor(len(evaluators)) as ex:
                list(ex.map(close, evaluators))
        for t in self._threads:
            t.join(timeout=10)

    # ------------------------------------------------------------------ flow

    def set_run_timeout(self, seconds: float | None) -> None:
        """A run bound of the timing workers from now on, below their fixed ``--run-timeout`` (None: that
        one). The search bounds runs short until the shape has a time, then adapts the bound to the default
        config's time: a hanging candidate should not cost the full fixed bound. A candidate that may be
        slow rather than hung is retried under the fixed one (``EvalOptions.run_bound_s``)."""
        for ev in self.timers:
            options = getattr(ev, "options", None)
            if options is not None:
                options.run_bound_s = seconds

    def set_race(self, race: tuple[int, float] | None) -> None:
        """Racing from now on (``SearchSettings.race``): (timed calls first, the per-call time over which a
        config is not timed further), or None: every measurement takes all its calls."""
        for ev in self.timers:
            options = getattr(ev, "options", None)
            if options is not None:
                options.race = race

    def submit(self, candidate: Candidate) -> None:
        self.in_flight += 1
        (self._compile_q if self.compile_workers else self._timing_q).put(candidate)

    def drop_pending(self) -> list[Candidate]:
        """At a deadline: hand back every candidate that has not started timing. Those still queued are
        returned now; one compiling now, or taken by a timing worker in the meantime, comes back from
        ``next_result`` as a ``dropped`` outcome. Only evaluations already timing finish."""
        self._dropping.set()
        dropped: list[Candidate] = []
        for q in (self._compile_q, self._timing_q):
            while True:
                try:
                    cand = q.get_nowait()
                except queue.Empty:
                    break
                if cand is None:  # a stop sentinel: not ours to take
                    q.put(None)
                    break
                dropped.append(cand)
        self.in_flight -= len(dropped)
        return dropped

    def accept(self) -> None:
        """Evaluate submitted candidates again (a new shape after a deadline)."""
        self._dropping.clear()

    def _dropped(self, cand: Candidate) -> None:
        now = time.monotonic()
        self._results.put(Outcome(cand, TrialResult(TrialStatus.OK, dict(cand.config)), "", now, now, True))

    def next_result(self, timeout: float | None = None) -> Outcome | None:
        """The next finished candidate, or None after ``timeout`` seconds."""
        try:
            item = self._results.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, _Failure):
            self.failed = item.exc
            raise item.exc
        self.in_flight -= 1
        return item

    # ------------------------------------------------------------------ stages

    def _compile_loop(self) -> None:
        ev = self.backend.compiler()
        self._compilers.append(ev)
        try:
            info = ev.start()
        except Exception as e:
            self._results.put(_Failure(e))
            return
        if self.warm_compilers and info.meta.default_shapes:
            try:
                ev.compile(dict(info.meta.default_config), dict(info.meta.default_shapes[0]))
            except Exception:  # a warm-up only: the first real job says what is wrong, as a trial status
                log.debug("warming a compile worker failed", exc_info=True)
        while not self._stopping.is_set():
            cand = self._compile_q.get()
            if cand is None:
                return
            t0 = time.monotonic()
            try:
                res = ev.compile(cand.config, cand.shape)
            except Exception as e:
                self._results.put(_Failure(e))
                return
            if res.status is TrialStatus.OK and self._dropping.is_set():
                self._dropped(cand)
            elif res.status is TrialStatus.OK:
                self._timing_q.put(cand)
            elif is_worker_death(res) and cand.attempt == 0 and not self._stopping.is_set():
                self._compile_q.put(replace(cand, attempt=1))
            else:
                self._results.put(Outcome(cand, res, "compile", t0, time.monotonic()))

    def _time_loop(self, ev: Evaluator, device: str) -> None:
        stats = self.stats[device]
        while not self._stopping.is_set():
            cand = self._timing_q.get()
            if cand is None:
                return
            if self._dropping.is_set():
                self._dropped(cand)
                continue
            t0 = time.monotonic()
            try:
                res = ev.evaluate(cand.config, cand.shape)
                if is_worker_death(res) and cand.attempt == 0 and not self._stopping.is_set():
                    log.info(
                        "worker died on %s (%s): retrying once on a fresh worker", cand.config, res.error
                    )
                    cand = replace(cand, attempt=1)
                    res = ev.evaluate(cand.config, cand.shape)
            except Exception as e:
                self._results.put(_Failure(e))
                return
            t1 = time.monotonic()
            stats.spans.append((t0, t1))
            self._results.put(Outcome(cand, res, device, t0, t1))
