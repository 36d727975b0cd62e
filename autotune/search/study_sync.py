"""The database copy of a shape's Optuna study, written off the hot path by a writer process.

The search loop hands finished results to ``StudyWriter.add`` as plain data; a spawned writer process turns
them into finished Optuna trials and adds them to the study (one transaction each, as ``Study.add_trial``).
Optuna's ORM costs several milliseconds per trial: in the search's own process that time (and the GIL) came
out of every trial's budget, and capped a multi-device search at a fraction of its devices
(bench/sim_pipeline.py). The search process never even imports Optuna for it.

The study holds only finished trials: COMPLETE with the measured time, or FAIL with ``autotune_status`` —
nothing stays RUNNING when a process dies, and optuna-dashboard shows real times. Trials are keyed by
``autotune_trial_id``: the writer skips those the study already holds, so a new search can hand over every
stored trial that no live process will write (``Store.settled_trials``) and the study converges to the
trials table, which stays the record of truth."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
from typing import Any

from ..trial import TrialResult

log = logging.getLogger("autotune.search")

#: seconds the writer process waits for work before checking that its parent is still alive
_POLL_S = 1.0


def _open_study(url: str, study_name: str) -> tuple[Any, Any, set[Any]]:
    """The study (created if missing, under the migration lock) and the trial ids it holds; a RUNNING
    trial can only come from an older autotune killed mid-trial: it is closed as FAIL."""
    import optuna
    from optuna.trial import TrialState

    from ..store import Store

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = Store(url).optuna_storage()
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction="minimize", load_if_exists=True
    )
    existing = study.get_trials(deepcopy=False)
    for t in existing:
        if t.state == TrialState.RUNNING:
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
    return storage, study, {t.user_attrs.get("autotune_trial_id") for t in existing}


def _writer_main(url: str, study_name: str, space_def: dict[str, Any], q: Any, done: Any, lock: Any) -> None:
    from ..space import Space
    from .optuna_strategy import frozen_trial

    space = Space.from_dict(space_def)
    parent = os.getppid()
    written, errors = 0, []
    try:
        storage, study, known = _open_study(url, study_name)
    except Exception as e:
        done.put((0, [f"cannot open the Optuna study: {type(e).__name__}: {e}"[:300]]))
        return
    while True:
        try:
            item = q.get(timeout=_POLL_S)
        except queue.Empty:
            if os.getppid() != parent:  # the search was killed: nothing more will come
                break
            continue
        if item is None:
            break
        trial_id, result, attrs = item
        if trial_id in known:
            continue
        known.add(trial_id)
        try:
            study.add_trial(
                frozen_trial(space, TrialResult.from_dict(result), {"autotune_trial_id": trial_id, **attrs})
            )
            written += 1
        except Exception as e:  # the next run hands it over again
            errors.append(f"{type(e).__name__}: {e}"[:300])
    storage.engine.dispose()
    done.put((written, errors))


class StudyWriter:
    def __init__(self, store: Any, study_name: str, space: Any):
        ctx = mp.get_context("spawn")
        self._q = ctx.Queue()
        self._done = ctx.Queue()
        lock = store.process_write_lock(ctx)
        self._proc = ctx.Process(
            target=_writer_main,
            args=(store.url, study_name, space.to_dict(), self._q, self._done, lock),
            daemon=True,
            name="autotune-study-writer",
        )
        self._proc.start()
        self._sent: set[int] = set()
        self.written = 0
        self.errors: list[str] = []

    def add(self, trial_id: int, result: TrialResult, **attrs: Any) -> None:
        if trial_id in self._sent:
            return
        self._sent.add(trial_id)
        self._q.put((trial_id, result.to_dict(), attrs))

    def close(self, timeout_s: float = 600.0, *, quiet: bool = False) -> None:
        """Wait until every trial handed over is written (the study is complete when the search ends).
        ``quiet``: the search already failed (e.g. the database went away): report nothing more."""
        self._q.put(None)
        try:
            self.written, self.errors = self._done.get(timeout=timeout_s)
        except queue.Empty:
            log.warning(
                "the Optuna study writer did not finish in %.0f s; the next run adds the rest", timeout_s
            )
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()
        for e in [] if quiet else self.errors[:3]:
            log.warning("Optuna study: %s", e)
