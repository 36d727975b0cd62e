"""The database copy of a shape's Optuna study, written off the hot path by a writer process.

The search loop hands finished results to ``StudyWriter.add`` as plain data; a spawned writer process turns
them into finished Optuna trials and adds them to the study (one transaction each, as ``Study.add_trial``).
Optuna's ORM costs several milliseconds per trial: in the search's own process that time (and the GIL) came
out of every trial's budget, and capped a multi-device search at a fraction of its devices
(measured on simulated devices, wave 2). The search process never even imports Optuna for it.

The study holds only finished trials: COMPLETE with the measured time, or FAIL with ``autotune_status`` —
nothing stays RUNNING when a process dies, and optuna-dashboard shows real times. Trials are keyed by
``autotune_trial_id``: the writer skips those the study already holds, so a new search can hand over every
stored trial that no live process will write (``store.claims.settled_trials``) and the study converges to the
trials table, which stays the record of truth."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import time
import warnings
from typing import TYPE_CHECKING, Any

from autotune.procs import ensure_resource_tracker, shielded, start_shielded
from autotune.trial import TrialResult

if TYPE_CHECKING:
    from autotune.store.protocols import SearchStore

log = logging.getLogger("autotune.search")

#: seconds the writer process waits for work before checking that its parent is still alive
_POLL_S = 1.0
#: trials written per transaction at most
_BATCH = 256
#: seconds a failed or interrupted search waits for its writer (Ctrl-C must end the command promptly)
_CLOSE_FAILED_S = 10.0


#: the study's one objective, as optuna-dashboard names it (instead of "Objective 0")
METRIC_NAMES = ["time_s"]


def _open_study(
    url: str, study_name: str, study_attrs: dict[str, Any] | None = None
) -> tuple[Any, Any, set[Any]]:
    """The study (created if missing, under the migration lock) and the trial ids it holds; a RUNNING
    trial can only come from an older autotune killed mid-trial: it is closed as FAIL. The study is named
    for people (its name is a hash): its metric name, and ``study_attrs`` (kernel, shape, device) as user
    attributes."""
    import optuna
    from optuna.trial import TrialState

    from autotune.store import Store

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = Store(url).schema.optuna_storage()
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction="minimize", load_if_exists=True
    )
    if study.metric_names != METRIC_NAMES:
        with warnings.catch_warnings():  # experimental since Optuna 3.2, and what the dashboard reads
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(METRIC_NAMES)
    for key, value in (study_attrs or {}).items():
        if study.user_attrs.get(key) != value:
            study.set_user_attr(key, value)
    existing = study.get_trials(deepcopy=False)
    for t in existing:
        if t.state == TrialState.RUNNING:
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    return storage, study, {t.user_attrs.get("autotune_trial_id") for t in existing}


def _bulk_add(storage: Any, study_id: int, trials: list[Any]) -> None:
    """Add finished trials in one transaction of plain inserts (an INSERT per trial for its id, one
    executemany per child table), as ``Study.add_trial`` would store them. ``add_trial`` goes through
    Optuna's ORM at ~7 ms a trial, which capped a multi-device search (wave 2, simulated devices); this uses
    Optuna's private table models, so any failure falls back to ``add_trial`` (the caller's job)."""
    import json

    from optuna.distributions import distribution_to_json
    from optuna.storages._rdb import models as m
    from optuna.storages._rdb.storage import _create_scoped_session
    from sqlalchemy import func, insert, select, update

    with _create_scoped_session(storage.scoped_session) as session:
        # A write first: it locks the study row (Postgres) or takes SQLite's write lock before anything is
        # read, so numbering is serialized with every other writer and a read-then-write SQLite
        # transaction never deadlocks against another process's (Optuna locks the row for update).
        touched = session.execute(
            update(m.StudyModel)
            .where(m.StudyModel.study_id == study_id)
            .values(study_name=m.StudyModel.study_name)
        ).rowcount
        if touched != 1:
            raise LookupError(f"no Optuna study {study_id}")
        number = session.scalar(
            select(func.count(m.TrialModel.trial_id)).where(m.TrialModel.study_id == study_id)
        )
        params, values, attrs = [], [], []
        for t in trials:
            trial_id = session.execute(
                insert(m.TrialModel).values(
                    number=number,
                    study_id=study_id,
                    state=t.state,
                    datetime_start=t.datetime_start,
                    datetime_complete=t.datetime_complete,
                )
            ).inserted_primary_key[0]
            number += 1
            for name, value in t.params.items():
                dist = t.distributions[name]
                params.append(
                    {
                        "trial_id": trial_id,
                        "param_name": name,
                        "param_value": dist.to_internal_repr(value),
                        "distribution_json": distribution_to_json(dist),
                    }
                )
            if t.value is not None:
                stored, kind = m.TrialValueModel.value_to_stored_repr(t.value)
                values.append({"trial_id": trial_id, "objective": 0, "value": stored, "value_type": kind})
            for key, value in t.user_attrs.items():
                attrs.append({"trial_id": trial_id, "key": key, "value_json": json.dumps(value)})
        for model, rows in (
            (m.TrialParamModel, params),
            (m.TrialValueModel, values),
            (m.TrialUserAttributeModel, attrs),
        ):
            if rows:
                session.execute(insert(model), rows)


def _bulk_add_retrying(storage: Any, study_id: int, batch: list[Any], errors: list[str]) -> bool:
    """``_bulk_add`` with a few retries (a busy or deadlocked database); False: fall back to add_trial."""
    import random
    import time

    for attempt in range(5):
        try:
            _bulk_add(storage, study_id, batch)
            return True
        except Exception as e:
            last = f"bulk insert failed ({type(e).__name__}: {e})"[:300]
            time.sleep(random.random() * 0.1 * (attempt + 1))
    errors.append(last + "; adding trials one by one")
    return False


def _import_ahead() -> Any:
    """Optuna, SQLAlchemy and the store (seconds, paid before the search needs the writer): ``frozen_trial``."""
    import optuna  # noqa: F401

    from autotune.search.optuna_strategy import frozen_trial
    from autotune.store import Store  # noqa: F401

    return frozen_trial


def _writer_main(q: Any, done: Any, lock: Any, ready: Any, url: str) -> None:
    """Import Optuna and SQLAlchemy (``ready`` then), take the study to write from the queue ((name, space, user attrs);
    None: nothing to write), open it and write what comes."""
    from autotune.space import Space

    frozen_trial = _import_ahead()
    ready.set()
    bind = q.get()
    if bind is None:
        done.put((0, []))
        return
    study_name, space, study_attrs = bind[0], Space.from_dict(bind[1]), bind[2]
    parent = os.getppid()
    written, errors = 0, []
    try:
        storage, study, known = _open_study(url, study_name, study_attrs)
    except Exception as e:
        done.put((0, [f"cannot open the Optuna study: {type(e).__name__}: {e}"[:300]]))
        return
    closing, bulk = False, True
    while not closing:
        try:
            items = [q.get(timeout=_POLL_S)]
        except queue.Empty:
            if os.getppid() != parent:  # the search was killed: nothing more will come
                break
            continue
        while len(items) < _BATCH:  # whatever else is waiting goes in the same transaction
            try:
                items.append(q.get_nowait())
            except queue.Empty:
                break
        if None in items:
            closing = True
            items = [i for i in items if i is not None]
        batch = []
        for trial_id, result, attrs in items:
            if trial_id not in known:
                known.add(trial_id)
                batch.append(
                    frozen_trial(
                        space, TrialResult.from_dict(result), {"autotune_trial_id": trial_id, **attrs}
                    )
                )
        if not batch:
            continue
        with lock:  # SQLite: take turns with the search's writes instead of polling the file lock
            if bulk and _bulk_add_retrying(storage, study._study_id, batch, errors):
                written += len(batch)
                continue
            bulk = False
            for trial in batch:
                try:
                    study.add_trial(trial)
                    written += 1
                except Exception as e:  # the next run hands it over again
                    errors.append(f"{type(e).__name__}: {e}"[:300])
    storage.engine.dispose()
    done.put((written, errors))


class StudyWriter:
    """The writer process of one study on ``store``'s database (it shares the store's SQLite write lock).

    A writer can be started before its study is known (``StudyWriter(store)``, then ``bind``): the search
    starts one beside its workers, so the seconds of importing Optuna and SQLAlchemy pass while they start.

    ``wait_for_start``: False, the search's end does not wait on a writer still starting (importing Optuna
    and SQLAlchemy: seconds, longer than a short search): it is stopped, and what it had not written stays in
    the trials table for the next search of the shape to add (``ShapeSearch.seed_from_store`` hands the
    trials of a dead process over again). A writer past its imports is waited for: it opens the study and
    writes a batch in a fraction of a second."""

    def __init__(
        self,
        store: SearchStore,
        study_name: str | None = None,
        space: Any = None,
        study_attrs: dict[str, Any] | None = None,
        *,
        wait_for_start: bool = True,
    ):
        """``study_attrs``: the study's user attributes (kernel, shape, device: what its hash name hides)."""
        ctx = mp.get_context("spawn")
        ensure_resource_tracker()
        self._q = ctx.Queue()
        self._done = ctx.Queue()
        self._ready = ctx.Event()
        self._lock = store.db.process_write_lock(ctx)
        self._proc = ctx.Process(
            target=shielded,
            args=(_writer_main, self._q, self._done, self._lock, self._ready, store.url),
            daemon=True,
            name="autotune-study-writer",
        )
        start_shielded(self._proc)  # Ctrl-C must not kill it mid-write: close() decides
        self.bound = False
        if study_name is not None:
            self.bind(study_name, space, study_attrs)
        self._sent: set[int] = set()
        self.wait_for_start = wait_for_start
        self.written = 0
        self.errors: list[str] = []
        #: the copy was left incomplete at close (the next search adds the rest)
        self.abandoned = False

    def bind(self, study_name: str, space: Any, study_attrs: dict[str, Any] | None = None) -> StudyWriter:
        """The study this writer writes (once), with its user attributes."""
        assert not self.bound, "a study writer writes one study"
        self.bound = True
        self._q.put((study_name, space.to_dict(), study_attrs))
        return self

    def add(self, trial_id: int, result: TrialResult, **attrs: Any) -> None:
        if trial_id in self._sent:
            return
        self._sent.add(trial_id)
        self._q.put((trial_id, result.to_dict(), attrs))

    def close(self, timeout_s: float = 600.0, *, quiet: bool = False) -> None:
        """Wait until every trial handed over is written (the study is complete when the search ends), unless
        the writer is still starting and ``wait_for_start`` is False. ``quiet``: the search already failed
        or was interrupted (e.g. Ctrl-C, the database went away): report nothing more, and wait at most
        ``_CLOSE_FAILED_S`` (the next run adds the rest). A writer that died is never waited for."""
        self._q.put(None)
        if not self.bound or (not self.wait_for_start and not self._ready.is_set()):
            self._abandon()  # nothing to write, or not waited for
            return
        deadline = time.monotonic() + (min(timeout_s, _CLOSE_FAILED_S) if quiet else timeout_s)
        while True:
            try:
                self.written, self.errors = self._done.get(timeout=0.2)
                break
            except queue.Empty:
                if not self._proc.is_alive() and self._done.empty():
                    log.debug("the Optuna study writer exited with %s", self._proc.exitcode)
                    break
                if time.monotonic() > deadline:
                    if not quiet:
                        log.warning(
                            "the Optuna study writer did not finish in %.0f s; the next run adds the rest",
                            timeout_s,
                        )
                    self._abandon()
                    return
        self._proc.join(timeout=2)
        if self._proc.is_alive():
            self._proc.kill()
        for e in [] if quiet else self.errors[:3]:
            log.warning("Optuna study: %s", e)

    def _abandon(self) -> None:
        """Stop the writer without waiting for its copy. It is killed while this process holds the shared
        SQLite write lock, so never inside one of its transactions and never holding the lock; a batch it
        had written stays (each is one transaction), the rest is added by the next search."""
        self.abandoned = self.bound
        self._q.cancel_join_thread()  # nobody will read what is queued: exiting must not wait to flush it
        with self._lock:
            self._proc.kill()
            self._proc.join(timeout=10)
        if self.abandoned:
            log.info("the Optuna study copy was left incomplete; the next search of the shape adds the rest")
