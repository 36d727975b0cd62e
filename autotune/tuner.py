"""The ask/tell loop: Optuna proposes, the worker measures, the store keeps.

The Optuna study lives in the same database as our tables, under a name derived from the stored key, so
a search resumes where it stopped and several processes (one per GPU, on one host or many) can join one
study. Our ``trials`` table, not Optuna's, is the record of truth: it keeps the status of every candidate,
and a config already evaluated under a key is reused, never measured again (a failed one is not retried).

Never imports the user's kernel file (the worker does) and never initializes CUDA."""

from __future__ import annotations

import logging
import math
import random
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .settings import SearchSettings
from .shapes import Shape, check_shape, format_shape
from .space import Space
from .trial import TrialResult, TrialStatus, canonical_config, config_hash
from .worker import Worker, WorkerInfo

log = logging.getLogger("autotune.tuner")

#: value told to Optuna for a config that is invalid or failed: worse than any real time, so the sampler
#: learns to avoid the region (TPE ranks values; the number itself does not matter)
_PENALTY_S = 1e3
#: proposals that bring nothing new (invalid or already evaluated) tolerated before a random unseen
#: valid config is enqueued instead
_MAX_STALE_PROPOSALS = 25


@dataclass
class TrialEvent:
    """Reported to the progress callback after every proposal."""

    shape: Shape
    result: TrialResult
    reused: bool
    evaluations: int
    budget: int
    best: TrialResult | None


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

    @property
    def speedup(self) -> float | None:
        if self.best and self.default and self.default.time_s and self.best.time_s:
            return self.default.time_s / self.best.time_s
        return None


def _make_sampler(name: str, seed: int | None) -> Any:
    import optuna

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # grid/exhaustive enqueue every valid config themselves (conditional spaces do not fit GridSampler);
    # a TPE sampler then only serves the asks that come after the queue is empty (never, within budget).
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, n_startup_trials=8)


def _suggest(trial: Any, space: Space, facts: dict[str, int]) -> dict[str, Any]:
    """Define-by-run: conditional parameters are asked only when their condition holds."""
    config: dict[str, Any] = {}
    for p in space.params:
        if p.active(config, facts):
            config[p.name] = trial.suggest_categorical(p.name, list(p.choices))
    return config


class Tuner:
    """Searches one kernel file's shapes on one device. Use as a context manager (owns the worker)."""

    def __init__(
        self,
        kernel_path: str,
        store: Any,
        settings: SearchSettings,
        on_event: Callable[[TrialEvent], None] | None = None,
    ):
        self.kernel_path = kernel_path
        self.store = store
        self.settings = settings
        self.on_event = on_event
        self.worker = Worker(
            kernel_path, settings.device, env=settings.worker_env, start_timeout_s=settings.start_timeout_s
        )
        self.info: WorkerInfo | None = None
        self.space: Space | None = None
        self._pool: list[Worker] = []

    def __enter__(self) -> Tuner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.close()
        for w in self._pool:
            w.close()

    def start(self) -> WorkerInfo:
        self.info = self.worker.start()
        self.space = Space.from_dict(self.info.meta["space"], source=self.info.meta["space_source"])
        return self.info

    def resolve_shapes(self, shapes: list[dict[str, int]] | None) -> list[Shape]:
        assert self.info is not None
        params = self.info.meta["shape_params"]
        if not shapes:
            return [check_shape(s, params) for s in self.info.meta["default_shapes"]]
        return [check_shape(s, params) for s in shapes]

    # -- one shape ---------------------------------------------------------------------------------
    def search_shape(self, shape: Shape) -> ShapeReport:
        import optuna

        assert self.info is not None and self.space is not None
        meta, facts, s = self.info.meta, self.info.facts, self.settings
        space = self.space
        shape_key = format_shape(shape)
        key = self.store.ensure_key(
            meta["name"],
            meta["source_hash"],
            space.hash(),
            space.to_dict(),
            dict(shape),
            shape_key,
            meta["dtypes"],
            self.info.env,
        )
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        storage = optuna.storages.RDBStorage(self.store.url, engine_kwargs=self.store.optuna_engine_kwargs())
        study = optuna.create_study(
            study_name=key.study_name,
            storage=storage,
            direction="minimize",
            sampler=_make_sampler(s.sampler, s.seed),
            load_if_exists=True,
        )
        started = time.monotonic()
        deadline = started + s.timeout_s if s.timeout_s > 0 else math.inf
        report = ShapeReport(shape, shape_key, key.study_name, None, None, 0, 0, 0)

        default = dict(meta["default_config"])
        default_problems = space.check(default, facts)
        if default_problems:
            log.warning(
                "default config %s is not valid in the space: %s", default, "; ".join(default_problems)
            )

        # One enumeration serves the count, the exhaustive queue and the fallback below (counting a space
        # costs the same as enumerating it).
        valid = list(space.enumerate(facts))
        valid_hashes = {config_hash(c) for c in valid}
        report.valid_configs = len(valid)
        exhaustive = s.sampler in ("grid", "exhaustive") or (s.sampler == "tpe" and len(valid) <= s.trials)
        report.exhaustive = exhaustive
        seen = self._evaluated_hashes(key.id)
        # The default config runs first: it is the baseline every speedup is measured against.
        queue: list[dict[str, Any]] = [] if default_problems else [default]
        if exhaustive:
            queue += [c for c in valid if config_hash(c) not in seen]
        if exhaustive and s.compile_workers > 0:
            self._precompile(queue, shape)
        queued = set()
        for c in queue:
            h = config_hash(c)
            if h not in queued:
                study.enqueue_trial(c)
                queued.add(h)

        # An explicit exhaustive search is budgeted by the space, not by --trials.
        report.budget = max(s.trials, len(queued)) if s.sampler in ("grid", "exhaustive") else s.trials
        rng = random.Random(s.seed)
        stale = 0
        while report.evaluations < report.budget and time.monotonic() < deadline:
            if valid_hashes <= seen:
                log.info("%s: every valid config has been evaluated", shape_key)
                break
            trial = study.ask()
            try:
                new = self._step(study, trial, key.id, shape, report, seen)
            except BaseException:
                # Interrupted (Ctrl-C, a store error): leave no Optuna trial RUNNING forever in a resumed study.
                from optuna.trial import TrialState

                study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
                raise
            stale = 0 if new else stale + 1
            if stale >= _MAX_STALE_PROPOSALS:
                # The sampler keeps proposing known or invalid configs: feed it an unseen valid one.
                fresh = [c for c in valid if config_hash(c) not in seen]
                if not fresh:
                    log.info("%s: every valid config has been evaluated", shape_key)
                    break
                study.enqueue_trial(rng.choice(fresh))
                stale = 0

        report.wall_s = time.monotonic() - started
        best = self.store.refresh_best(key.id)
        report.best = self.store.find_trial(key.id, config_hash(best.config)) if best is not None else None
        report.default = None if default_problems else self.store.find_trial(key.id, config_hash(default))
        report.total_statuses = self.store.trial_counts(key.id)
        return report

    def _precompile(self, configs: list[dict[str, Any]], shape: Shape) -> None:
        """Compile ``configs`` in a pool of worker processes before timing starts, so the timing worker
        finds them in the compiler's disk cache (Triton's) instead of compiling one by one."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        if not self._pool:
            self._pool = [
                Worker(
                    self.kernel_path,
                    self.settings.device,
                    env=self.settings.worker_env,
                    start_timeout_s=self.settings.start_timeout_s,
                )
                for _ in range(self.settings.compile_workers)
            ]
        todo = list(configs)
        lock = threading.Lock()
        failed = Counter()

        def drain(w: Worker) -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    cfg = todo.pop()
                res = w.precompile(cfg, dict(shape), compile_timeout_s=self.settings.compile_timeout_s)
                if res.status is not TrialStatus.OK:
                    failed[res.status.value] += 1

        t0 = time.monotonic()
        with ThreadPoolExecutor(len(self._pool)) as ex:
            list(ex.map(drain, self._pool))
        log.info(
            "precompiled %d configs in %.1f s with %d processes (%s)",
            len(configs),
            time.monotonic() - t0,
            len(self._pool),
            dict(failed) or "no failures",
        )

    def _step(
        self, study: Any, trial: Any, key_id: int, shape: Shape, report: ShapeReport, seen: set[str]
    ) -> bool:
        """Handle one proposal; True if it was evaluated (new), False if it was invalid or already known."""
        assert self.info is not None and self.space is not None
        s, facts = self.settings, self.info.facts
        config = _suggest(trial, self.space, facts)
        problems = self.space.check(config, facts)
        if problems:
            res = TrialResult(TrialStatus.INVALID, config, error="; ".join(problems))
            self._finish(study, trial, key_id, res, report, reused=False)
            return False
        h = config_hash(config)
        known = self.store.find_trial(key_id, h)
        if known is not None:
            self._finish(study, trial, key_id, known, report, reused=True)
            return False
        started = datetime.now(timezone.utc)
        res = self.worker.evaluate(
            config,
            dict(shape),
            num_tests=s.num_tests,
            compile_timeout_s=s.compile_timeout_s,
            run_timeout_s=s.run_timeout_s,
        )
        res.worker = res.worker or f"{self.info.env.get('hostname')}:worker"
        res.hostname = res.hostname or self.info.env.get("hostname")
        report.evaluations += 1
        seen.add(h)
        self._finish(study, trial, key_id, res, report, reused=False, started_at=started)
        return True

    def _evaluated_hashes(self, key_id: int) -> set[str]:
        return {config_hash(t.config) for t in self.store.trials(key_id)}

    def _finish(
        self,
        study: Any,
        trial: Any,
        key_id: int,
        res: TrialResult,
        report: ShapeReport,
        *,
        reused: bool,
        started_at: datetime | None = None,
    ) -> None:
        from optuna.trial import TrialState

        now = datetime.now(timezone.utc)
        if reused:
            report.reused += 1
        else:
            self.store.record_trial(
                key_id, res, optuna_trial_number=trial.number, started_at=started_at or now, finished_at=now
            )
            report.statuses[res.status.value] += 1
            if res.status is TrialStatus.INVALID:
                report.invalid += 1
        trial.set_user_attr("autotune_status", res.status.value)
        trial.set_user_attr("autotune_reused", reused)
        trial.set_user_attr("config", canonical_config(res.config))
        if res.status is TrialStatus.OK and res.time_s is not None and res.measured:
            study.tell(trial, res.time_s)
        elif res.status is TrialStatus.OK:
            study.tell(trial, state=TrialState.FAIL)  # unmeasured placeholder: nothing to learn from
        else:
            study.tell(trial, _PENALTY_S)
        best_row = self.store.refresh_best(key_id) if res.status is TrialStatus.OK and not reused else None
        if self.on_event is not None:
            best = None
            if best_row is not None:
                best = TrialResult(
                    TrialStatus.OK, best_row.config, time_s=best_row.time_s, tflops=best_row.tflops
                )
            self.on_event(
                TrialEvent(dict(report.shape), res, reused, report.evaluations, report.budget, best)
            )


def parse_shapes(texts: list[str] | None) -> list[dict[str, int]]:
    """Syntax-check ``--shape`` strings before anything starts (names are checked against the kernel later)."""
    from .shapes import parse_shape

    return [parse_shape(t) for t in texts or []]
