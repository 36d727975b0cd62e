"""The search of one kernel file: for each shape, a strategy proposes, the pipeline evaluates, the store keeps.

Per shape:
- the key's stored trials (any process, any earlier run) are loaded and told to the strategy, so a search
  resumes and reuses; a config measured once under a key is never measured again (a failed one is not
  retried);
- proposals are filtered (invalid: stored as ``invalid``, never compiled; known; claimed elsewhere), then
  claimed in the database before compiling, so concurrent searchers on any host never measure one config
  twice; what others measure meanwhile is read back every ``refresh_s`` and told to the strategy;
- results are stored as they arrive (one transaction: trial + claim done) and written to the shape's
  Optuna study in batches (``search.study_sync``).

Never imports the user's kernel file and never initializes CUDA (the workers do)."""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from autotune.devices import ALL, parse_devices
from autotune.engine import Backend, Candidate, EvalOptions, Pipeline, ProcessBackend, WorkerInfo
from autotune.engine.leases import LeaseKeeper
from autotune.env import env_hash
from autotune.errors import SettingsError, SpaceError
from autotune.search import HistoryPoint, StrategyContext, canonical_name, make_strategy
from autotune.search.base import MAX_STALE, load_history
from autotune.settings import SearchSettings, default_compile_workers
from autotune.shapes import Shape, check_shape, format_shape
from autotune.space.space import Space
from autotune.store import ClaimState, Owner
from autotune.trial import KIND_RETIME, KIND_SEARCH, TrialResult, TrialStatus, config_hash, median_spread

if TYPE_CHECKING:
    from autotune.store.protocols import SearchStore

log = logging.getLogger("autotune.tuner")

#: how often the loop reads what other processes stored for the shape
_REFRESH_S = 2.0
#: adaptive run timeout: a candidate may take this many times the default config's device time for the calls
#: of one evaluation (the check, a warm-up and two profiled rounds of --num-tests), never less than the floor
#: (the profiler's start-up in a fresh worker takes about a second), nor more than --run-timeout
_RUN_TIMEOUT_FACTOR = 100.0
_RUN_TIMEOUT_FLOOR_S = 10.0
#: a stored trial missing from the Optuna study is adopted by a new search after this long (its writer
#: flushes every 2 s), or at once when its process is known dead
_ADOPT_AFTER_S = 60.0


@dataclass
class TrialEvent:
    """Reported to the progress callback after every evaluation this process finishes."""

    shape: Shape
    result: TrialResult
    reused: bool
    evaluations: int
    budget: int
    best: TrialResult | None


@dataclass
class Finalist:
    """A top config measured again, interleaved with the others, before a best is declared."""

    config: dict[str, Any]
    #: the search's one measurement, then the median and (max - min) / median over all of them
    first_s: float
    median_s: float
    spread: float | None
    samples: int


@dataclass
class ShapeReport:
    shape: Shape
    shape_key: str
    study_name: str
    best: TrialResult | None
    default: TrialResult | None
    evaluations: int
    reused: int
    invalid: int
    statuses: Counter[str] = field(default_factory=Counter)
    total_statuses: dict[str, int] = field(default_factory=dict)
    valid_configs: int | None = None
    exhaustive: bool = False
    budget: int = 0
    wall_s: float = 0.0
    #: configs another process held while this one searched (measured there, reused here)
    busy: int = 0
    #: main-loop seconds per finished evaluation (strategy, filtering, claims, store), waits excluded
    loop_s_per_trial: float | None = None
    #: idle seconds of the timing workers between two evaluations (median, p90)
    device_gap_s: tuple[float, float] | None = None
    devices: tuple[str, ...] = ()
    #: the strategy that searched (after resolving: a small space under --trials is searched exhaustively)
    strategy: str = ""
    #: the re-timed finalists, fastest first
    finalists: list[Finalist] = field(default_factory=list)
    #: what the strategy learned from before this shape's first result: measurements of the kernel under
    #: other keys (other shapes, devices, versions, spaces) and how many keys they came from
    history_points: int = 0
    history_keys: int = 0

    @property
    def within_noise(self) -> bool:
        """Whether the re-timed runner-up is within the winner's measured spread: either may be the best."""
        if len(self.finalists) < 2:
            return False
        a, b = self.finalists[0], self.finalists[1]
        noise = max(a.spread or 0.0, b.spread or 0.0)
        return b.median_s <= a.median_s * (1.0 + noise)

    @property
    def speedup(self) -> float | None:
        if self.best and self.default and self.default.time_s and self.best.time_s:
            return self.default.time_s / self.best.time_s
        return None


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(0.9 * len(xs))) - 1)]


class Tuner:
    """Searches one kernel file's shapes on one or more devices. Use as a context manager (owns the
    worker processes)."""

    def __init__(
        self,
        kernel_path: str,
        store: SearchStore | None,
        settings: SearchSettings,
        on_event: Callable[[TrialEvent], None] | None = None,
        backend: Backend | None = None,
    ):
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
        self.owner = Owner()
        self._features: dict[str, dict[str, dict[str, float]] | None] = {}
        self.pipeline: Pipeline | None = None
        self.info: WorkerInfo | None = None
        self.infos: list[WorkerInfo] = []
        self.space: Space | None = None

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pipeline is not None:
            self.pipeline.close()

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
            workers = default_compile_workers() if wants_gpu else 0
        self.pipeline = Pipeline(self.backend, [], workers)
        self.pipeline.start_compilers()
        try:
            first = self.backend.timer("" if devices in ((), ALL) else str(devices[0]))
            self.pipeline.timers.append(first)
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

    def resolve_shapes(self, shapes: list[dict[str, int]] | None) -> list[Shape]:
        assert self.info is not None
        params = self.info.meta.shape_params
        return [check_shape(s, params) for s in (shapes or self.info.meta.default_shapes)]

    # ------------------------------------------------------------------ one shape

    def search_shape(self, shape: Shape, *, warm_start: list[dict[str, Any]] | None = None) -> ShapeReport:
        """``warm_start``: configs evaluated first (after the default), before the strategy's proposals, e.g.
        the best configs of the same shape under an older environment (nightly re-tunes); those not valid
        in the space here are skipped."""
        assert self.info is not None and self.pipeline is not None
        from autotune.store.optuna_study import StudyWriter

        run = _ShapeRun(self, shape)
        for config in warm_start or ():
            try:
                config = run.space.normalize(config)
            except SpaceError:  # a param the space no longer has
                continue
            if not run.space.check(config, run.facts) and config not in run.first:
                run.first.append(config)
        writer = StudyWriter(self.store, run.key.study_name, run.space)
        failed = False
        try:
            with LeaseKeeper(self.store.claims, self.owner, self.settings.lease_s):
                run.seed_from_store(writer)
                run.loop(writer)
                run.retime()
        except BaseException:
            failed = True
            # Interrupted or failed: hand unfinished claims back at once (others need not wait for the lease).
            try:
                self.store.claims.release(self.owner)
            except Exception:
                log.debug("releasing claims failed", exc_info=True)
            raise
        finally:
            writer.close(quiet=failed)
        return run.finish()


class _ShapeRun:
    """The state of one shape's search."""

    def __init__(self, tuner: Tuner, shape: Shape):
        assert tuner.info is not None and tuner.space is not None and tuner.pipeline is not None
        self.t = tuner
        self.s = tuner.settings
        self.store = tuner.store
        self.pipeline = tuner.pipeline
        self.shape = dict(shape)
        meta, self.facts, self.space = tuner.info.meta, tuner.info.facts, tuner.space
        self.shape_key = format_shape(shape)
        self.started = time.monotonic()
        self.deadline = self.started + self.s.timeout_s if self.s.timeout_s > 0 else math.inf
        self.key = self.store.keys.ensure(
            meta.name,
            meta.source_hash,
            self.space.hash(),
            self.space.to_dict(),
            dict(shape),
            self.shape_key,
            meta.dtypes,
            tuner.info.env,
        )
        self.report = ShapeReport(self.shape, self.shape_key, self.key.study_name, None, None, 0, 0, 0)
        self.report.devices = tuple(i.device for i in tuner.infos)
        self.default = dict(meta.default_config)
        problems = self.space.check(self.default, self.facts)
        if problems:
            log.warning("default config %s is not valid in the space: %s", self.default, "; ".join(problems))
            self.default = None  # type: ignore[assignment]
        # Small spaces are listed once (exhaustive order, fallback proposals); larger ones are only ever
        # sampled, never materialized, after a bounded check that anything in them is valid.
        listed = _load_configs(self.s.configs_file, self.space, self.facts) if self.s.configs_file else None
        if listed is not None:
            self.valid = listed
        elif self.space.enumerable(self.facts):
            self.valid: list[dict[str, Any]] | None = list(self.space.enumerate(self.facts))
            if not self.valid:
                raise SpaceError(f"{self.space.source}: no config satisfies the constraints on this device")
        else:
            self.valid = None  # sampled, never listed (Tuner.start checked that something is valid)
        self.report.valid_configs = len(self.valid) if self.valid is not None else None
        name = "exhaustive" if listed is not None else canonical_name(self.s.strategy)
        if name in ("tpe", "auto") and self.valid is not None and len(self.valid) <= self.s.trials:
            name = "exhaustive"  # the whole valid space fits the budget: no model needed
        if name == "exhaustive" and self.valid is None:
            size = self.space.size_unconstrained(self.facts)
            raise SettingsError(
                f"--strategy exhaustive over {size:,} combinations: too many to list; use tpe or random"
            )
        self.report.exhaustive = name == "exhaustive"
        self.report.strategy = name
        self.report.budget = self.s.trials
        # what the store knows of other shapes (devices, versions): the auto strategy's training data, and
        # the order of a budgeted exhaustive search
        history: list[HistoryPoint] = []
        if name in ("auto", "exhaustive") and listed is None:
            history = load_history(self.store.history, meta.name, self.space, tuner.info.env, self.key.id)
        self.report.history_points = len(history)
        self.report.history_keys = len({h.group for h in history})
        ctx = StrategyContext(
            self.space,
            self.facts,
            self.s.seed,
            self.valid,
            shape=dict(shape),
            shape_params=tuple(meta.shape_params),
            default=self.default,
            history=history,
            features=tuner.features,
            budget=self.s.trials,
        )
        self.strategy = make_strategy(name, ctx)
        self.rng = random.Random(self.s.seed)
        self.known: dict[str, TrialResult] = {}
        self.busy: set[str] = set()
        self.in_flight: dict[str, Candidate] = {}
        self.mine: set[int] = set()
        self.last_id = 0
        # The default config runs first (the baseline of every speedup), except with --configs: exactly those.
        self.first: list[dict[str, Any]] = (
            [self.default] if self.default is not None and listed is None else []
        )
        self.best: TrialResult | None = None
        self.loop_s = 0.0
        self.finished = 0
        self.started_at: dict[str, datetime] = {}
        # until this shape's default config has run, candidates get the fixed bound
        self.pipeline.set_run_timeout(self.s.run_timeout_s)
        self.pipeline.accept()
        self.cut = False  # the deadline passed and the candidates not yet timing were handed back

    # -- what the store knows

    def seed_from_store(self, writer: Any) -> None:
        """Learn every stored result of the key; hand the Optuna study writer the trials that no live
        process will write there (it skips those the study already holds)."""
        stored = self.store.trials.since(self.key.id, 0)
        settled = (
            self.store.claims.settled_trials(self.key.id, older_than_s=_ADOPT_AFTER_S) if stored else set()
        )
        for trial_id, res in stored:
            self._learn(trial_id, res)
            if trial_id in settled and res.kind == KIND_SEARCH:
                writer.add(trial_id, res)

    def _learn(self, trial_id: int, res: TrialResult) -> None:
        """A stored result, from any process: reuse it and tell the strategy."""
        self.last_id = max(self.last_id, trial_id)
        if trial_id in self.mine or res.kind != KIND_SEARCH:  # a finalist's re-timing is not a new result
            return
        h = config_hash(res.config)
        first_time = h not in self.known
        self.known[h] = res
        self.busy.discard(h)
        if first_time:
            self.strategy.tell(res.config, res)
            self._note_best(res)

    def refresh(self) -> None:
        """What other processes stored meanwhile (they write their own trials to the Optuna study)."""
        for trial_id, res in self.store.trials.since(self.key.id, self.last_id):
            self._learn(trial_id, res)

    def _note_best(self, res: TrialResult) -> None:
        ok = res.timed
        if ok and (self.best is None or res.time_s < (self.best.time_s or math.inf)):
            self.best = res

    # -- proposals

    def _budget_left(self) -> bool:
        return self.report.evaluations < self.s.trials and time.monotonic() < self.deadline

    def _depth(self) -> int:
        """Candidates in flight that keep every stage busy: each compiler one ahead, each device four (so
        the pipeline is refilled in batches, one claim transaction per batch, before it runs dry); fewer
        when the strategy asks for small batches (``max_in_flight``)."""
        full = self.pipeline.compile_workers + 4 * len(self.pipeline.timers)
        return min(full, getattr(self.strategy, "max_in_flight", None) or full)

    def _low_water(self) -> int:
        """Refill when fewer than this are in flight: every compiler and device still has one queued."""
        return min(self._depth(), self.pipeline.compile_workers + 2 * len(self.pipeline.timers))

    def _unseen(self) -> dict[str, Any] | None:
        """A valid config nobody has evaluated or claimed: the fallback when the strategy repeats itself."""
        taken = self.known.keys() | self.busy | self.in_flight.keys()
        if self.valid is not None:
            fresh = [c for c in self.valid if config_hash(c) not in taken]
            return self.rng.choice(fresh) if fresh else None
        for _ in range(200):
            try:
                c = self.space.sample(self.rng, self.facts)
            except Exception:
                return None
            if config_hash(c) not in taken:
                return c
        return None

    def fill(self, writer: Any) -> None:
        """Propose, filter, claim and submit until the pipeline is full, the budget is spent or nothing
        is left. Each round costs two transactions at most (the invalid ones, the claims)."""
        stale = 0
        while len(self.in_flight) < self._depth() and self._budget_left():
            want = self._depth() - len(self.in_flight)
            batch, self.first = self.first[:want], self.first[want:]
            if len(batch) < want and not self.strategy.exhausted:
                batch += self.strategy.propose(want - len(batch))
            if not batch:
                return
            fresh: dict[str, dict[str, Any]] = {}
            invalid: list[TrialResult] = []
            room = min(want, self.s.trials - self.report.evaluations)
            for config in batch:
                h = config_hash(config)
                if len(fresh) >= room or h in fresh:
                    self.strategy.tell(config, None)
                elif h in self.known or h in self.in_flight or h in self.busy:
                    self.strategy.tell(config, self.known.get(h))
                else:
                    problems = self.space.check(config, self.facts)
                    if problems:
                        res = TrialResult(TrialStatus.INVALID, dict(config), error="; ".join(problems))
                        self.known[h] = res
                        invalid.append(res)
                        self.strategy.tell(config, res)
                    else:
                        fresh[h] = config
            self._record_invalid(invalid, writer)
            submitted = self._claim_and_submit(fresh) if fresh else 0
            stale = 0 if submitted else stale + len(batch)
            if stale >= MAX_STALE:
                unseen = self._unseen()
                if unseen is None:
                    return
                self.first.append(unseen)
                stale = 0

    def _record_invalid(self, invalid: list[TrialResult], writer: Any) -> None:
        if not invalid:
            return
        ids = self.store.trials.record_many(self.key.id, [(r, None, None) for r in invalid])
        for trial_id, res in zip(ids, invalid, strict=True):
            self.mine.add(trial_id)
            writer.add(trial_id, res)
            self.report.invalid += 1
            self.report.statuses[res.status.value] += 1

    def _claim_and_submit(self, fresh: dict[str, dict[str, Any]]) -> int:
        """Claim new valid configs in one transaction; submit those that are ours. Returns how many."""
        claims = self.store.claims.claim_many(self.key.id, list(fresh), self.t.owner, lease_s=self.s.lease_s)
        submitted = 0
        learn = False
        for h, config in fresh.items():
            state = claims[h].state
            if state is ClaimState.CLAIMED:
                self.in_flight[h] = Candidate(dict(config), h, self.shape)
                self.started_at[h] = datetime.now(timezone.utc)
                self.pipeline.submit(self.in_flight[h])
                self.report.evaluations += 1
                submitted += 1
            elif state is ClaimState.DONE:
                self.report.reused += 1
                learn = True
                self.strategy.tell(config, None)  # its stored result is told by refresh() below
            else:
                self.busy.add(h)
                self.report.busy += 1
                self.strategy.tell(config, None)
        if learn:
            self.refresh()  # measured elsewhere meanwhile: learn it (and whatever else is new)
        return submitted

    # -- the loop

    def loop(self, writer: Any) -> None:
        next_refresh = time.monotonic() + _REFRESH_S
        while True:
            t0 = time.monotonic()
            if len(self.in_flight) < self._low_water():
                self.fill(writer)
            self.loop_s += time.monotonic() - t0
            if not self.in_flight:
                break  # budget spent, or nothing left that nobody else holds
            out = self.pipeline.next_result(timeout=max(0.05, next_refresh - time.monotonic()))
            t0 = time.monotonic()
            if out is not None:
                # whatever else finished meanwhile is stored in the same transaction
                outs = [out]
                while len(outs) < 64 and (more := self.pipeline.next_result(timeout=0)) is not None:
                    outs.append(more)
                self._store_outcomes(outs, writer)
            if time.monotonic() >= next_refresh:
                self.refresh()
                next_refresh = time.monotonic() + _REFRESH_S
            if not self.cut and time.monotonic() >= self.deadline:
                self._cut_at_deadline()
            self.loop_s += time.monotonic() - t0

    def _cut_at_deadline(self) -> None:
        """``--timeout`` holds within the evaluations timing when it passes: the candidates still queued or
        compiling are handed back (claims released, not counted, told to the strategy as not evaluated)."""
        self.cut = True
        self._hand_back(self.pipeline.drop_pending())

    def _hand_back(self, cands: list[Candidate]) -> None:
        if not cands:
            return
        for c in cands:
            self.in_flight.pop(c.config_hash, None)
            self.started_at.pop(c.config_hash, None)
            self.report.evaluations -= 1
            self.strategy.tell(c.config, None)
        self.store.claims.release(self.t.owner, [c.config_hash for c in cands])

    def _store_outcomes(self, outs: list[Any], writer: Any) -> None:
        dropped = [o.candidate for o in outs if o.dropped]
        if dropped:
            self._hand_back(dropped)
            outs = [o for o in outs if not o.dropped]
            if not outs:
                return
        now = datetime.now(timezone.utc)
        for out in outs:
            self.in_flight.pop(out.candidate.config_hash, None)
            out.result.device = out.result.device or out.device
        ids = self.store.trials.record_many(
            self.key.id,
            [(o.result, self.started_at.pop(o.candidate.config_hash, None), now) for o in outs],
        )
        for trial_id, out in zip(ids, outs, strict=True):
            cand, res = out.candidate, out.result
            self.mine.add(trial_id)
            self.known[cand.config_hash] = res
            writer.add(trial_id, res, autotune_device=out.device)
            self.strategy.tell(cand.config, res)
            self.report.statuses[res.status.value] += 1
            self.finished += 1
            self._note_best(res)
            if res.status is TrialStatus.OK and self.default is not None and res.config == self.default:
                calls = 2 * self.s.num_tests + 4
                adapted = max(_RUN_TIMEOUT_FLOOR_S, _RUN_TIMEOUT_FACTOR * (res.time_s or 0.0) * calls)
                self.pipeline.set_run_timeout(min(self.s.run_timeout_s, adapted))
            if self.t.on_event is not None:
                self.t.on_event(
                    TrialEvent(dict(self.shape), res, False, self.finished, self.report.budget, self.best)
                )

    def retime(self) -> None:
        """Measure the top ``--retime-top`` configs of the key again, ``--retime-rounds`` rounds interleaved
        (A B C, B C A, ...) on one device, before the best is declared: one sample of a ~1 % noisy
        measurement can crown the wrong config. Stored as ``retime`` trials; the best row then keeps the
        median and spread of each config's measurements (``store.trials.refresh_best``)."""
        k, rounds = self.s.retime_top, self.s.retime_rounds
        if k < 1 or rounds < 1 or not self.finished or time.monotonic() >= self.deadline:
            return  # nothing measured here (a rerun that only reused results), or the time is up
        ranked = sorted((r for r in self.known.values() if r.timed), key=lambda r: r.time_s or math.inf)
        top = ranked[:k]
        if not top:
            return
        timer = self.pipeline.timers[0]
        samples: dict[str, list[float]] = {config_hash(r.config): [r.time_s or 0.0] for r in top}
        for rnd in range(rounds):
            if time.monotonic() >= self.deadline:
                break  # --timeout holds: the rounds done so far count
            order = top[rnd % len(top) :] + top[: rnd % len(top)]
            results = []
            for r in order:
                started = datetime.now(timezone.utc)
                res = timer.evaluate(dict(r.config), dict(self.shape))
                res.kind, res.device = KIND_RETIME, res.device or self.report.devices[0]
                if res.timed:
                    samples[config_hash(r.config)].append(res.time_s or 0.0)
                results.append((res, started, datetime.now(timezone.utc)))
            self.store.trials.record_many(self.key.id, [x for x in results if x[0].timed])
        for r in top:
            times = samples[config_hash(r.config)]
            median, spread = median_spread(times)
            self.report.finalists.append(
                Finalist(dict(r.config), r.time_s or 0.0, median, spread, len(times))
            )
        self.report.finalists.sort(key=lambda f: f.median_s)

    def finish(self) -> ShapeReport:
        r = self.report
        r.wall_s = time.monotonic() - self.started
        best = self.store.trials.refresh_best(self.key.id)
        r.best = self.store.trials.find(self.key.id, config_hash(best.config)) if best is not None else None
        if r.best is not None and best is not None and (best.samples or 1) > 1:
            r.best.time_s = best.time_s  # the re-timed median
        r.default = self.store.trials.find(self.key.id, config_hash(self.default)) if self.default else None
        r.total_statuses = self.store.trials.counts(self.key.id)
        if self.finished:
            r.loop_s_per_trial = self.loop_s / self.finished
        gaps = [g for st in self.pipeline.stats.values() for g in st.gaps() if g >= 0]
        if gaps:
            r.device_gap_s = (statistics.median(gaps), _p90(gaps))
        for st in self.pipeline.stats.values():
            st.spans.clear()  # per shape
        return r


def _gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU, without importing torch or initializing CUDA (the
    orchestrator never does): the driver's control device exists."""
    import os

    return os.path.exists("/dev/nvidiactl")


def _load_configs(path: str, space: Space, facts: dict[str, int]) -> list[dict[str, Any]]:
    """``--configs FILE``: a JSON list of configs, normalized and checked against the space (one line
    per problem: a config outside the space is the user's mistake, not a trial)."""
    import json
    from pathlib import Path

    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SettingsError(f"--configs {path}: {str(e)[:200]}") from None
    if not isinstance(raw, list) or not raw:
        raise SettingsError(f"--configs {path}: expected a non-empty JSON list of configs")
    out, seen = [], set()
    for i, c in enumerate(raw):
        cfg = space.normalize(c)
        problems = space.check(cfg, facts)
        if problems:
            raise SettingsError(
                f"--configs {path}: config {i} is not valid here: {'; '.join(problems)[:300]}"
            )
        if config_hash(cfg) not in seen:
            seen.add(config_hash(cfg))
            out.append(cfg)
    return out


def parse_shapes(texts: list[str] | None) -> list[dict[str, int]]:
    """Syntax-check ``--shape`` strings before anything starts (names are checked against the kernel later)."""
    from autotune.shapes import parse_shape

    return [parse_shape(t) for t in texts or []]
