"""The results database (SQLite file or Postgres): tuning keys, trials, claims and the best config of each key.

Split by concern, composed into one ``Store``:

- ``database``: engine, one session scope, the error boundary (every SQLAlchemy/driver failure leaves as a
  ``StoreError`` with the masked URL, never the password);
- ``schema``: revisions, ``upgrade`` (ours and Optuna's tables) under one cross-process lock;
- ``keys``: key identity and the Optuna study name;
- ``trials``: storing and reading results, the best row;
- ``claims``: who measures which config (unique rows with leases), so no config is measured twice;
- ``requests``: shapes asked for at run time and not tuned; ``verifications``: re-measured bests, nightly runs;
- ``transfer``: other keys' measurements of a kernel (any compatible space), for the ``auto`` strategy;
- ``rows``: record <-> row mappings derived from the dataclasses; ``models``: the tables; ``urls``.

Optuna keeps its own tables in the same database (the study is named by ``KeyInfo.study_name``); these
tables are the source of truth for results and for the runtime lookup (``autotune.lookup``). Alembic is
imported only by the schema methods, so the lookup path stays light."""

from __future__ import annotations

from autotune.records import BestRecord
from autotune.store.claims import Claim, ClaimQueries, ClaimState, Owner
from autotune.store.history import HistoryQueries
from autotune.store.keys import KeyInfo, KeyQueries, dtypes_key, env_columns, study_name
from autotune.store.requests import RequestCount, RequestQueries, ShapeRequest
from autotune.store.schema import SchemaManager, alembic_config, migrations_dir, version_table
from autotune.store.transfer import TransferQueries
from autotune.store.trials import TrialQueries
from autotune.store.urls import default_db_path, default_db_url, mask_url, normalize_db_url
from autotune.store.verifications import NightlyRun, Verification, VerificationQueries

__all__ = [
    "BestRecord",
    "Claim",
    "ClaimState",
    "KeyInfo",
    "NightlyRun",
    "Owner",
    "RequestCount",
    "ShapeRequest",
    "Store",
    "Verification",
    "default_db_path",
    "default_db_url",
    "dtypes_key",
    "env_columns",
    "mask_url",
    "migrations_dir",
    "normalize_db_url",
    "study_name",
]

# kept for callers of the wave-1 private names (tests, alembic/env.py)
_alembic_config = alembic_config
_version_table = version_table


class Store(
    TransferQueries,
    HistoryQueries,
    VerificationQueries,
    RequestQueries,
    ClaimQueries,
    TrialQueries,
    KeyQueries,
    SchemaManager,
):
    """One results database. Cheap to construct: nothing connects until the first call."""
