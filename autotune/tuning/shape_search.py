"""The one search loop: one shape, a strategy proposing, the engine evaluating, the store keeping.

``autotune search`` (through ``Tuner``, on worker processes), nightly re-tunes and ``autotune replay`` (on a
simulated backend) all run this loop. Per shape:

- the key's stored trials (any process, any earlier run) are loaded and told to the strategy, so a search
  resumes and reuses; a config measured once under a key is never measured again (a failed one is not
  retried);
- proposals are filtered (invalid: stored as ``invalid``, never compiled; known; claimed elsewhere), then
  claimed in the database before compiling, so concurrent searchers on any host never measure one config
  twice; what others measure meanwhile is read back every ``_REFRESH_S`` and told to the strategy;
- results are stored as they arrive (one transaction: trial + claim done) and handed to the shape's
  Optuna study writer, when there is one;
- the finalists are re-timed (``tuning.finalists``) and the best row refreshed.

What the loop does for a strategy (history, exhaustive when small, proposals in flight) comes from its
``StrategyInfo``, never from its name. Never imports the user's kernel file, never initializes CUDA."""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from typing import Any, Protocol

from autotune import timeline
from autotune.engine import Candidate, Outcome, Pipeline, WorkerInfo
from autotune.engine.faults import label as fault_label
from autotune.engine.leases import LeaseKeeper
from autotune.engine.pipeline import DeviceStats
from autotune.errors import SettingsError, SpaceError
from autotune.search import StrategyContext, StrategyInfo, choose_strategy, stopping
from autotune.search.base import MAX_STALE, FeatureFn, HistoryPoint, load_history
from autotune.settings import SearchSettings
from autotune.shapes import Shape, format_shape
from autotune.space.space import Space
from autotune.store import ClaimState, KeyInfo, Owner
from autotune.store.protocols import ClaimStore, KeyStore, TrialStore
from autotune.store.protocols import HistorySource as HistoryStore
from autotune.trial import KIND_SEARCH, TrialResult, TrialStatus, config_hash
from autotune.tuning.finalists import retime
from autotune.tuning.report import ShapeReport, TrialEvent

log = logging.getLogger("autotune.tuner")

#: how often the loop reads what other processes stored for the shape
_REFRESH_S = 2.0
#: adaptive run timeout: a candidate may take this many times the default config's device time for the calls
#: of one evaluation (the check, a warm-up and two profiled rounds of --num-tests), never less than the floor
#: (a GPU timing worker starts its profiler before its first job; a valid config slower than the bound has
#: returned its first call, and is retried under --run-timeout), nor more than --run-timeout
_RUN_TIMEOUT_FACTOR = 100.0
_RUN_TIMEOUT_FLOOR_S = 5.0
#: a stored trial missing from the Optuna study is adopted by a new search after this long (its writer
#: flushes every 2 s), or at once when its process is known dead
_ADOPT_AFTER_S = 60.0

Stamped = tuple[TrialResult, datetime | None, datetime | None]


# ------------------------------------------------------------------------------------------- what it is given


@dataclass(frozen=True)
class SearchEngine:
    """What a started engine gives each shape's search."""

    pipeline: Pipeline
    #: one per timing device; the first's kernel meta, facts and environment key the results
    infos: tuple[WorkerInfo, ...]
    space: Space
    #: the kernel file's analytic features of configs on a shape (computed in a worker), if it has any
    features: FeatureFn | None = None


@dataclass(frozen=True)
class SearchStore:
    """The store roles a shape's search uses (one ``Store`` plays them all: ``SearchStore.of``)."""

    keys: KeyStore
    trials: TrialStore
    claims: ClaimStore
    history: HistoryStore

    @classmethod
    def of(cls, store: Any) -> SearchStore:
        return cls(store.keys, store.trials, store.claims, store.history)


class StudySink(Protocol):
    """Where finished trials go besides the store (``store.optuna_study.StudyWriter``)."""

    def add(self, trial_id: int, result: TrialResult, **attrs: Any) -> None: ...

    def close(self, *, quiet: bool = False) -> None: ...


class _NoStudy:
    def add(self, trial_id: int, result: TrialResult, **attrs: Any) -> None:
        pass

    def close(self, *, quiet: bool = False) -> None:
        pass


#: (kernel, space, env, exclude_key_id) -> the kernel's measurements under other keys
HistorySource = Callable[[str, Space, Mapping[str, Any], int | None], list[HistoryPoint]]
#: (study name, space) -> the study's writer
StudyFactory = Callable[[str, Space], StudySink]


# ------------------------------------------------------------------------------------------- the loop


class ShapeSearch:
    """The search of one shape. ``history``: where the strategy's history comes from (default: the
    store's other keys); ``study``: the Optuna study writer of the shape, if any."""

    def __init__(
        self,
        shape: Shape,
        engine: SearchEngine,
        store: SearchStore,
        settings: SearchSettings,
        *,
        owner: Owner,
        history: HistorySource | None = None,
        study: StudyFactory | None = None,
        on_event: Callable[[TrialEvent], None] | None = None,
    ):
        self.engine, self.store, self.s, self.owner = engine, store, settings, owner
        self.pipeline = engine.pipeline
        self.on_event = on_event
        self._study = study
        self.shape = dict(shape)
        self.info0 = engine.infos[0]
        self.meta, self.facts, self.space = self.info0.meta, self.info0.facts, engine.space
        self.shape_key = format_shape(shape)
        self.started = time.monotonic()
        self.deadline = self.started + self.s.timeout_s if self.s.timeout_s > 0 else math.inf
        with timeline.phase(f"{self.shape_key}: the shape's key in the database"):
            self.key = self._ensure_key()
        self.report = ShapeReport(self.shape, self.shape_key, self.key.study_name, None, None, 0, 0, 0)
        self.report.devices = tuple(i.device for i in engine.infos)
        self.default = self._default_config()
        with timeline.phase(f"{self.shape_key}: list the valid configs"):
            listed = (
                _load_configs(self.s.configs_file, self.space, self.facts) if self.s.configs_file else None
            )
            self.valid = listed if listed is not None else self._valid_configs()
        self.report.valid_configs = len(self.valid) if self.valid is not None else None
        self._stop_rule(listed)
        self.strategy_info = self._choose(listed is not None)
        with timeline.phase(
            f"{self.shape_key}: strategy {self.strategy_info.name} (history, model, imports)"
        ):
            self.strategy = _Timed(
                self._make_strategy(history or partial(load_history, store.history), listed)
            )
            if self.stopper is not None:  # a stall asks the strategy to change course first (``stopping``)
                self.stopper.change_course = getattr(self.strategy.inner, "change_course", None)
        self._reset(listed is None or (self.default is not None and self.default in listed))

    # -- set-up

    def _stop_rule(self, listed: list[dict[str, Any]] | None) -> None:
        """Without --trials the stopping rule decides, up to its ceilings; --configs lists exactly what to
        evaluate, and the exhaustive strategy every valid config. ``budget``: the most new evaluations;
        ``nominal``: what the strategy plans with."""
        every = listed if listed is not None else self.valid if self.s.strategy == "exhaustive" else None
        rule = stopping.StopSettings.of(self.s) if self.s.trials is None and every is None else None
        self.stopper = (
            stopping.StoppingRule(rule, self.space, self.facts, self.valid, self.s.seed) if rule else None
        )
        self.budget = self.s.trials or (len(every) if every is not None else self.s.stop_max)
        self.nominal = min(self.budget, self.s.nominal_trials)
        if rule is not None and rule.wall_s > 0:
            self.deadline = min(self.deadline, self.started + rule.wall_s)
        self.report.budget = self.budget

    def _ensure_key(self) -> KeyInfo:
        meta = self.meta
        return self.store.keys.ensure(
            meta.name,
            meta.source_hash,
            self.space.hash(),
            self.space.to_dict(),
            dict(self.shape),
            self.shape_key,
            meta.dtypes,
            self.info0.env,
        )

    def _default_config(self) -> dict[str, Any] | None:
        default = dict(self.meta.default_config or {})
        if not default:
            return None
        problems = self.space.check(default, self.facts)
        if problems:
            log.warning("default config %s is not valid in the space: %s", default, "; ".join(problems))
            return None
        return default

    def _valid_configs(self) -> list[dict[str, Any]] | None:
        """Small spaces are listed once (exhaustive order, fallback proposals); larger ones are only ever
        sampled, never materialized, after a bounded check that anything in them is valid."""
        if not self.space.enumerable(self.facts):
            return None  # sampled, never listed (Tuner.start checked that something is valid)
        valid = list(self.space.enumerate(self.facts))
        if not valid:
            raise SpaceError(f"{self.space.source}: no config satisfies the constraints on this device")
        return valid

    def _choose(self, listed: bool) -> StrategyInfo:
        n = len(self.valid) if self.valid is not None else None
        info = choose_strategy(self.s.strategy, valid=n, budget=self.nominal, listed=listed)
        if info.needs_valid_list and self.valid is None:
            size = self.space.size_unconstrained(self.facts)
            raise SettingsError(
                f"--strategy {info.name} over {size:,} combinations: too many to list; use tpe or random"
            )
        self.report.exhaustive = info.exhaustive
        self.report.strategy = info.name
        return info

    def _make_strategy(self, history_source: HistorySource, listed: list[dict[str, Any]] | None) -> Any:
        # what the store knows of other shapes (devices, versions), for a strategy that learns from it;
        # configs the user listed are evaluated as listed
        history: list[HistoryPoint] = []
        if self.strategy_info.wants_history and listed is None:
            history = history_source(self.meta.name, self.space, self.info0.env, self.key.id)
        self.report.history_points = len(history)
        self.report.history_keys = len({h.group for h in history})
        self.report.history_needed = self.strategy_info.min_history
        ctx = StrategyContext(
            self.space,
            self.facts,
            self.s.seed,
            self.valid,
            shape=dict(self.shape),
            shape_params=tuple(self.meta.shape_params),
            default=self.default,
            history=history,
            features=self.engine.features,
            budget=self.nominal,
            device=str(self.info0.env.get("gpu_name", "")),
        )
        return self.strategy_info.factory(ctx)

    def _reset(self, default_first: bool) -> None:
        self.rng = random.Random(self.s.seed)
        self.known: dict[str, TrialResult] = {}
        self.busy: set[str] = set()
        self.in_flight: dict[str, Candidate] = {}
        self.mine: set[int] = set()
        self.last_id = 0
        # The default config runs first (the baseline of every speedup; its time bounds the others' runs);
        # with --configs, only when it is listed: exactly those are evaluated.
        self.first: list[dict[str, Any]] = (
            [self.default] if self.default is not None and default_first else []
        )
        self.best: TrialResult | None = None
        self.loop_s = 0.0
        #: time.monotonic() where the run's phases began (``time_split``)
        self.marks: dict[str, float] = {}
        self.finished = 0
        #: configs put forward (the default and warm starts first, then the strategy's proposals), and how
        #: many of those were known or in flight already
        self.proposals = 0
        self.repeats = 0
        self.started_at: dict[str, datetime] = {}
        # until some config of this shape has a time, a run gets a short bound: one that hangs before the
        # default has run must not cost the full --run-timeout (one that returned once is retried under it)
        self.timed = False
        self.pipeline.set_run_timeout(min(self.s.first_run_timeout_s, self.s.run_timeout_s))
        self.pipeline.accept()
        self.cut = False  # the deadline passed and the candidates not yet timing were handed back

    def warm_start(self, configs: Iterable[dict[str, Any]]) -> None:
        """Configs evaluated first (after the default), before the strategy's proposals, e.g. the best
        configs of the same shape under an older environment (nightly re-tunes); those not valid in the
        space here are skipped."""
        for config in configs:
            try:
                config = self.space.normalize(config)
            except SpaceError:  # a param the space no longer has
                continue
            if not self.space.check(config, self.facts) and config not in self.first:
                self.first.append(config)

    # -- the whole search

    def run(self) -> ShapeReport:
        """Search the shape, re-time its finalists and refresh its best row."""
        with timeline.phase(f"{self.shape_key}: start the Optuna study writer"):
            writer = self._study(self.key.study_name, self.space) if self._study else _NoStudy()
        failed = False
        try:
            with LeaseKeeper(self.store.claims, self.owner, self.s.lease_s):
                if self.s.retry_failed and (n := self.store.trials.reopen(self.key.id)):
                    log.info(
                        "%s: %d timed-out or crashed configs re-opened (--retry-failed)", self.shape_key, n
                    )
                with timeline.phase(f"{self.shape_key}: the key's stored trials"):
                    self.seed_from_store(writer)
                if self.stopper is not None:
                    self._check_stop()  # a rerun whose stored results suffice measures nothing
                self.marks["loop"] = time.monotonic()
                with timeline.phase(f"{self.shape_key}: search loop"):
                    self.loop(writer)
                self.marks["retime"] = time.monotonic()
                self.report.stop_reason = self._stop_reason()  # before re-timing moves the clock on
                with timeline.phase(f"{self.shape_key}: re-time the finalists"):
                    self.retime()
        except BaseException:
            failed = True
            # Interrupted or failed: hand unfinished claims back at once (others need not wait for the lease),
            # and evaluate nothing more of this search that is still queued (a long-lived tuner's pipeline
            # serves the next one, which discards whatever of this one still comes out: ``_ours``).
            self.pipeline.drop_pending()
            self.pipeline.accept()
            try:
                self.store.claims.release(self.owner)
            except Exception:
                log.debug("releasing claims failed", exc_info=True)
            raise
        finally:
            # whatever measures next on this pipeline (another shape, a verification) takes every call
            self.pipeline.set_race(None)
            self.marks["close"] = time.monotonic()
            with timeline.phase(f"{self.shape_key}: close the Optuna study writer"):
                writer.close(quiet=failed)
            self.marks["finish"] = time.monotonic()
        with timeline.phase(f"{self.shape_key}: best row, report"):
            return self.finish()

    # -- what the store knows

    def seed_from_store(self, writer: StudySink) -> None:
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
            self._adapt_run_timeout(res)
            if self.stopper is not None and res.status is not TrialStatus.INVALID:
                self.stopper.observe(res)

    def refresh(self) -> None:
        """What other processes stored meanwhile (they write their own trials to the Optuna study)."""
        for trial_id, res in self.store.trials.since(self.key.id, self.last_id):
            self._learn(trial_id, res)

    def _note_best(self, res: TrialResult) -> None:
        if res.timed and (self.best is None or (res.time_s or math.inf) < (self.best.time_s or math.inf)):
            self.best = res
            if self.s.race and res.time_s:
                # racing (``SearchSettings.race``): a config this far over the best cannot become it
                self.pipeline.set_race((self.s.race_calls, self.s.race * res.time_s))

    # -- proposals

    def _budget_left(self) -> int:
        if time.monotonic() >= self.deadline or (self.stopper is not None and self.stopper.reason):
            return 0
        return max(0, self.budget - self.report.evaluations)

    def _depth(self) -> int:
        """Candidates in flight, for every strategy and budget: as many as keep every stage of the
        pipeline busy. A model-based strategy's smaller batches (max(4, trials/5) once) left 14 of 15
        compile workers idle and ran at a third of the exhaustive strategy's evaluations per second; a
        model keeps a large batch diverse instead."""
        return self.pipeline.depth

    def _low_water(self) -> int:
        """Refill below this: every compile worker and two per device (``Pipeline.low_water``)."""
        return min(self._depth(), self.pipeline.low_water)

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

    def fill(self, writer: StudySink) -> None:
        """Propose, filter, claim and submit until the pipeline is full, the budget is spent or nothing
        is left. Each round costs two transactions at most (the invalid ones, the claims). The strategy
        is never asked for more than the budget can still evaluate."""
        stale = 0
        while len(self.in_flight) < self._depth() and self._budget_left():
            if self.default is not None and config_hash(self.default) in self.in_flight:
                return  # the default goes alone: the others wait for its time (their run bound)
            want = min(self._depth() - len(self.in_flight), self._budget_left())
            if self.first and self.first[0] == self.default:
                want = 1
            batch, self.first = self.first[:want], self.first[want:]
            if len(batch) < want and not self.strategy.exhausted:
                batch += self.strategy.propose(want - len(batch))
            if not batch:
                return
            self.proposals += len(batch)
            fresh = self._filter(batch, want, writer)
            submitted = self._claim_and_submit(fresh) if fresh else 0
            stale = 0 if submitted else stale + len(batch)
            if stale >= MAX_STALE:
                unseen = self._unseen()
                if unseen is None:
                    return
                self.first.append(unseen)
                stale = 0

    def _filter(self, batch: list[dict[str, Any]], room: int, writer: StudySink) -> dict[str, dict[str, Any]]:
        """The new valid configs of ``batch`` (at most ``room``); the others are told back at once (the
        invalid ones stored as such)."""
        fresh: dict[str, dict[str, Any]] = {}
        invalid: list[TrialResult] = []
        for config in batch:
            h = config_hash(config)
            if h in fresh or h in self.known or h in self.in_flight:
                self.repeats += 1
            if len(fresh) >= room or h in fresh:
                self.strategy.tell(config, None)
            elif h in self.known or h in self.in_flight or h in self.busy:
                self.strategy.tell(config, self.known.get(h))
            elif problems := self.space.check(config, self.facts):
                res = TrialResult(TrialStatus.INVALID, dict(config), error="; ".join(problems))
                self.known[h] = res
                invalid.append(res)
                self.strategy.tell(config, res)
            else:
                fresh[h] = config
        self._record_invalid(invalid, writer)
        return fresh

    def _record_invalid(self, invalid: list[TrialResult], writer: StudySink) -> None:
        if not invalid:
            return
        ids = self.store.trials.record_many(self.key.id, [(r, None, None) for r in invalid])
        for trial_id, res in zip(ids, invalid, strict=True):
            self.mine.add(trial_id)
            writer.add(trial_id, res)
            self.report.invalid += 1
            self.report.statuses[res.status.value] += 1
            self.report.faults[fault_label(res)] += 1

    def _claim_and_submit(self, fresh: dict[str, dict[str, Any]]) -> int:
        """Claim new valid configs in one transaction; submit those that are ours. Returns how many."""
        claims = self.store.claims.claim_many(self.key.id, list(fresh), self.owner, lease_s=self.s.lease_s)
        submitted = 0
        learn = False
        for h, config in fresh.items():
            state = claims[h].state
            if state is ClaimState.CLAIMED:
                if not self.report.evaluations:
                    timeline.mark(f"{self.shape_key}: first candidate submitted")
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

    def loop(self, writer: StudySink) -> None:
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

    def _ours(self, out: Outcome) -> bool:
        """Whether ``out`` answers a candidate of this search still in flight. A long-lived tuner's pipeline
        (``autotune serve``) outlives a failed search: the outcomes of the candidates it left in flight
        came out in the next search, which stored them beside its own measurement of the same configs
        (after a disk-full, 2 configs stored twice: issue 45). One of those per (config, shape) is kept."""
        mine = self.in_flight.get(out.candidate.config_hash)
        return mine is not None and mine.shape == out.candidate.shape

    def _hand_back(self, cands: list[Candidate]) -> None:
        if not cands:
            return
        for c in cands:
            self.in_flight.pop(c.config_hash, None)
            self.started_at.pop(c.config_hash, None)
            self.report.evaluations -= 1
            self.strategy.tell(c.config, None)
        self.store.claims.release(self.owner, [c.config_hash for c in cands])

    def _store_outcomes(self, outs: list[Outcome], writer: StudySink) -> None:
        outs = [o for o in outs if self._ours(o)]
        dropped = [o.candidate for o in outs if o.dropped]
        if dropped:
            self._hand_back(dropped)
            outs = [o for o in outs if not o.dropped]
            if not outs:
                return
        now = datetime.now(timezone.utc)
        results = [o.result if o.result.device else replace(o.result, device=o.device) for o in outs]
        for out in outs:
            self.in_flight.pop(out.candidate.config_hash, None)
        ids = self.store.trials.record_many(
            self.key.id,
            [
                (r, self.started_at.pop(o.candidate.config_hash, None), now)
                for o, r in zip(outs, results, strict=True)
            ],
        )
        if not self.finished:
            timeline.mark(f"{self.shape_key}: first result stored")
        for trial_id, out, res in zip(ids, outs, results, strict=True):
            self.mine.add(trial_id)
            self.known[out.candidate.config_hash] = res
            writer.add(trial_id, res, autotune_device=out.device)
            self.strategy.tell(out.candidate.config, res)
            self.report.statuses[res.status.value] += 1
            self.report.faults[fault_label(res)] += 1
            self.finished += 1
            self._note_best(res)
            self._adapt_run_timeout(res)
            if self.stopper is not None:
                self.stopper.observe(res)
            if self.on_event is not None:
                event = TrialEvent(dict(self.shape), res, False, self.finished, self.report.budget, self.best)
                self.on_event(event)
        if self.stopper is not None:
            self._check_stop()

    def _check_stop(self) -> None:
        """The stopping rule's verdict; the configs it wants measured first (the best's neighbours) go
        ahead of the strategy's proposals."""
        assert self.stopper is not None
        self.stopper.check()
        if wanted := self.stopper.take_wanted():
            log.info("%s: %d neighbours of the best to measure before stopping", self.shape_key, len(wanted))
            self.first.extend(wanted)

    def _adapt_run_timeout(self, res: TrialResult) -> None:
        """The default config's time bounds the others' (a hanging candidate need not cost the full bound);
        once any config has a time without the default's, the fixed --run-timeout holds."""
        if res.status is not TrialStatus.OK or not res.timed:
            return
        if self.default is not None and res.config == self.default:
            calls = 2 * self.s.num_tests + 4
            adapted = max(_RUN_TIMEOUT_FLOOR_S, _RUN_TIMEOUT_FACTOR * (res.time_s or 0.0) * calls)
            self.pipeline.set_run_timeout(min(self.s.run_timeout_s, adapted))
            self.timed = True
        elif not self.timed:
            self.pipeline.set_run_timeout(None)
            self.timed = True

    # -- the end

    def retime(self) -> None:
        """The top ``--retime-top`` configs of the key, any would-be best (a first sample faster than the
        stored best's median), the stored best and the default config measured again, interleaved, before
        a best is declared (``tuning.finalists``): a best needs repeated samples, a speed-up paired ones."""
        k, rounds = self.s.retime_top, self.s.retime_rounds
        self.pipeline.set_race(None)  # finalists take every call
        if k < 1 or rounds < 1 or time.monotonic() >= self.deadline:
            return
        top = self._finalists(k)
        if not top:
            return  # nothing measured here, and nothing stored awaits re-timing
        self.report.finalists = retime(
            self.pipeline.timers[0],
            self.shape,
            top,
            rounds=rounds,
            deadline=self.deadline,
            device=self.report.devices[0],
            record=partial(self.store.trials.record_many, self.key.id),
        )

    def _finalists(self, k: int) -> list[TrialResult]:
        """What ``retime`` measures: the k fastest first samples, the would-be bests (each config whose
        one sample beats the stored best's median), the stored best and the default; none when this run
        measured nothing and no would-be best waits (a rerun that only reused results)."""
        ranked = sorted((r for r in self.known.values() if r.timed), key=lambda r: r.time_s or math.inf)
        rows = self.store.trials.best(self.meta.name, self.shape_key)
        stored = next((b for b in rows if b.key_id == self.key.id), None)
        retimed = {h for h, n in self._sample_counts().items() if n > 1}
        bar = stored.time_s if stored is not None else -math.inf  # a first run: the top k decide
        waiting = [r for r in ranked if config_hash(r.config) not in retimed and (r.time_s or math.inf) < bar]
        if not self.finished and not waiting:
            return []
        top = {config_hash(r.config): r for r in [*ranked[:k], *waiting]}
        extra = [stored.config] if stored is not None else []
        extra += [self.default] if self.default is not None else []
        for config in extra:
            h = config_hash(config)
            if h not in top and (res := self.known.get(h)) is not None and res.timed:
                top[h] = res
        return list(top.values())

    def _sample_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.store.trials.recorded(self.key.id, retimed=True):
            if r.timed:
                counts[config_hash(r.config)] = counts.get(config_hash(r.config), 0) + 1
        return counts

    def _stop_reason(self) -> str:
        if self.stopper is not None and self.stopper.reason:
            return self.stopper.reason
        if self.cut or time.monotonic() >= self.deadline:
            timeout = self.s.timeout_s > 0 and time.monotonic() >= self.started + self.s.timeout_s
            return stopping.TIMEOUT if timeout or self.stopper is None else stopping.WALL
        if self.report.evaluations >= self.budget:
            if self.stopper is not None:
                return stopping.CEILING
            return stopping.TRIALS if self.s.trials else stopping.EXHAUSTED  # else every listed/valid config
        return stopping.EXHAUSTED

    def finish(self) -> ShapeReport:
        r = self.report
        r.stop_reason = r.stop_reason or self._stop_reason()
        if self.stopper is not None:
            r.stop_bound, r.stop_noise = self.stopper.bound, self.stopper.noise
        trials = self.store.trials
        best = trials.refresh_best(self.key.id, config_hash(self.default) if self.default else None)
        found = trials.find(self.key.id, config_hash(best.config)) if best is not None else None
        if found is not None and best is not None:
            r.best_samples = best.samples or 1
            r.best_spread = best.spread if r.best_samples > 1 else found.spread
            r.unreliable = (r.best_spread or 0.0) > self.s.unreliable_spread
            if best.ci_low_s is not None and best.ci_high_s is not None:
                r.best_interval = (best.ci_low_s, best.ci_high_s)
            if r.best_samples > 1:
                found = at_time(found, best.time_s)  # the re-timed median: one figure per quantity
        r.best = found
        r.default = trials.find(self.key.id, config_hash(self.default)) if self.default else None
        retimed = {config_hash(f.config): f for f in r.finalists if f.samples > 1}
        if r.default is not None and (f := retimed.get(config_hash(r.default.config))) is not None:
            r.default = at_time(r.default, f.median_s)  # a re-timed default: its median, as the best's
        if best is not None and best.speedup is not None:
            r.paired_speedup, r.speedup_pairs = best.speedup, best.pairs or 0
            if best.speedup_low is not None and best.speedup_high is not None:
                r.speedup_interval = (best.speedup_low, best.speedup_high)
        r.total_statuses = trials.counts(self.key.id)
        if self.finished:
            r.loop_s_per_trial = self.loop_s / self.finished
        gaps = [g for st in self.pipeline.stats.values() for g in st.gaps() if g >= 0]
        if gaps:
            r.device_gap_s = (statistics.median(gaps), _p90(gaps))
        end = time.monotonic()  # the shape's seconds, the best row and report included
        r.wall_s = end - self.started
        r.time_split = self.time_split(end)
        for st in self.pipeline.stats.values():
            st.spans.clear()  # per shape
        return r

    def time_split(self, now: float) -> dict[str, float]:
        """Where this shape's seconds went (``ShapeReport.time_split``). The devices' figures are per device
        and cover the loop only; ``strategy`` is inside ``loop_busy`` (the loop's own work), which overlaps
        the devices' measuring."""
        m = self.marks
        loop, retime = m.get("loop", now), m.get("retime", now)
        close, finish = m.get("close", now), m.get("finish", now)
        # the loop's measurements only (the finalists' re-timings come after it)
        per_device = [
            DeviceStats(st.device, [sp for sp in st.spans if sp[0] < retime])
            for st in self.pipeline.stats.values()
        ]
        spans = [sp for st in per_device for sp in st.spans]
        idle = sum(g for st in per_device for g in st.gaps() if g > 0)
        n = max(1, len(per_device))
        split = {
            "setup": loop - self.started,
            "to_first_measurement": (min(sp[0] for sp in spans) - loop) if spans else retime - loop,
            "measuring": sum(b - a for a, b in spans) / n,
            "device_idle": idle / n,
            "loop_busy": self.loop_s,
            "strategy": self.strategy.seconds,
            "retime": close - retime,
            "close_study": finish - close,
            "finish": now - finish,
        }
        return {k: round(v, 3) for k, v in split.items()}


class _Timed:
    """A strategy whose own seconds (``propose`` and ``tell``) are counted for the report's time split."""

    def __init__(self, strategy: Any):
        self.inner = strategy
        self.seconds = 0.0

    def propose(self, n: int) -> list[dict[str, Any]]:
        t0 = time.monotonic()
        try:
            return self.inner.propose(n)
        finally:
            self.seconds += time.monotonic() - t0

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        t0 = time.monotonic()
        try:
            self.inner.tell(config, result)
        finally:
            self.seconds += time.monotonic() - t0

    @property
    def exhausted(self) -> bool:
        return self.inner.exhausted


def at_time(res: TrialResult, time_s: float | None) -> TrialResult:
    """``res`` at another time (a median over its re-timings): throughputs scaled to that time, so the
    TFLOP/s beside a median are the median's, never the first sample's."""
    if not time_s or not res.time_s:
        return res

    def scaled(x: float | None) -> float | None:
        return x * res.time_s / time_s if x and res.time_s else x

    return replace(res, time_s=time_s, tflops=scaled(res.tflops), gbps=scaled(res.gbps))


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(0.9 * len(xs))) - 1)]


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
