"""The database copy of a shape's Optuna study, written in batches off the hot path.

The search loop hands finished results to ``StudyWriter.add``; a background thread writes them with
``Study.add_trials`` every ``interval_s`` and at ``close``. The study therefore holds only finished trials:
COMPLETE with the measured time, or FAIL with ``autotune_status`` — nothing stays RUNNING when a process
dies, and optuna-dashboard shows real times. At start, trials of our table that the study lacks (a process
killed before its last flush) are added, so the study converges to the trials table."""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..trial import TrialResult
from .optuna_strategy import frozen_trial

log = logging.getLogger("autotune.search")


class StudyWriter:
    def __init__(self, store: Any, study_name: str, space: Any, *, interval_s: float = 2.0):
        import optuna
        from optuna.trial import TrialState

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self.interval_s = interval_s
        self._storage = store.optuna_storage()
        self.study = optuna.create_study(
            study_name=study_name, storage=self._storage, direction="minimize", load_if_exists=True
        )
        self._buffer: list[Any] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self.written = 0
        self.errors: list[str] = []
        existing = self.study.get_trials(deepcopy=False)
        self.known_ids = {t.user_attrs.get("autotune_trial_id") for t in existing}
        # A RUNNING trial can only come from an older autotune killed mid-trial: close it.
        for t in existing:
            if t.state == TrialState.RUNNING:
                self._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        self._thread = threading.Thread(target=self._run, name="autotune-study-writer", daemon=True)
        self._thread.start()

    def add(self, trial_id: int, result: TrialResult, **attrs: Any) -> None:
        if trial_id in self.known_ids:
            return
        self.known_ids.add(trial_id)
        t = frozen_trial(self.space, result, {"autotune_trial_id": trial_id, **attrs})
        with self._lock:
            self._buffer.append(t)

    def _flush(self) -> None:
        with self._lock:
            batch, self._buffer = self._buffer, []
        if not batch:
            return
        try:
            self.study.add_trials(batch)
            self.written += len(batch)
        except Exception as e:  # the trials table stays the record of truth; the next run re-adds them
            self.errors.append(f"{type(e).__name__}: {e}"[:300])
            log.warning("could not write %d trials to the Optuna study: %s", len(batch), self.errors[-1])

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            self._flush()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=120)
        self._flush()
        self._storage.engine.dispose()
