"""The database copy of a shape's Optuna study, written off the hot path by a writer process.

The search loop hands finished results to ``StudyWriter.add``; a spawned writer process adds them to the
study (one transaction each, as ``Study.add_trial`` does). Optuna's ORM costs several milliseconds per trial:
in the search's own process that time (and the GIL) came out of every trial's budget, and capped a multi-
device search at a fraction of its devices (bench/sim_pipeline.py); in its own process it costs nothing there.

The study holds only finished trials: COMPLETE with the measured time, or FAIL with ``autotune_status`` —
nothing stays RUNNING when a process dies, and optuna-dashboard shows real times. At start, stored trials
that the study lacks and no live process will write (``Store.settled_trials``) are adopted, so the study
converges to the trials table, which stays the record of truth."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
from typing import Any

from ..trial import TrialResult
from .optuna_strategy import frozen_trial

log = logging.getLogger("autotune.search")

#: seconds the writer process waits for work before checking that its parent is still alive
_POLL_S = 1.0


def _writer_main(url: str, engine_kwargs: dict[str, Any], study_name: str, q: Any, done: Any) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parent = os.getppid()
    storage = optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, skip_compatibility_check=True)
    study = optuna.load_study(study_name=study_name, storage=storage)
    written, errors = 0, []
    while True:
        try:
            item = q.get(timeout=_POLL_S)
        except queue.Empty:
            if os.getppid() != parent:  # the search was killed: nothing more will come
                break
            continue
        if item is None:
            break
        try:
            study.add_trial(item)
            written += 1
        except Exception as e:  # the next run adopts what is missing
            errors.append(f"{type(e).__name__}: {e}"[:300])
    storage.engine.dispose()
    done.put((written, errors))


class StudyWriter:
    def __init__(self, store: Any, study_name: str, space: Any):
        import optuna
        from optuna.trial import TrialState

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        # Created (with Optuna's tables, under our migration lock) and read here: which trials it holds.
        storage = store.optuna_storage()
        try:
            study = optuna.create_study(
                study_name=study_name, storage=storage, direction="minimize", load_if_exists=True
            )
            existing = study.get_trials(deepcopy=False)
            self.known_ids = {t.user_attrs.get("autotune_trial_id") for t in existing}
            # A RUNNING trial can only come from an older autotune killed mid-trial: close it.
            for t in existing:
                if t.state == TrialState.RUNNING:
                    storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        finally:
            storage.engine.dispose()
        ctx = mp.get_context("spawn")
        self._q = ctx.Queue()
        self._done = ctx.Queue()
        self._proc = ctx.Process(
            target=_writer_main,
            args=(store.url, store.optuna_engine_kwargs(), study_name, self._q, self._done),
            daemon=True,
            name="autotune-study-writer",
        )
        self._proc.start()
        self.written = 0
        self.errors: list[str] = []

    def add(self, trial_id: int, result: TrialResult, **attrs: Any) -> None:
        if trial_id in self.known_ids:
            return
        self.known_ids.add(trial_id)
        self._q.put(frozen_trial(self.space, result, {"autotune_trial_id": trial_id, **attrs}))

    def close(self, timeout_s: float = 600.0) -> None:
        """Wait until every trial handed over is written (the study is complete when the search ends)."""
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
        for e in self.errors[:3]:
            log.warning("could not write a trial to the Optuna study: %s", e)
