"""One lock for importing heavy packages (Optuna, scikit-learn) from more than one thread.

A search imports the strategy's modules on a thread while its workers start (``tuning/tuner.py``), and a new
database is created on another thread meanwhile (``cli/search.py``), which imports Optuna's storage to create
its tables. Two threads importing a package whose modules import each other can see one half-initialized:
on the H200 an exhaustive search on a new database died with ``KeyError: 'optuna.study'``. Whoever imports
them off the main thread holds this lock."""

from __future__ import annotations

import threading

#: re-entrant: an import under the lock may import more under it
LOCK = threading.RLock()
