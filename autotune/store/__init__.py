"""The results database (SQLite file or Postgres): tuning keys, trials, claims and the best config of each key.

A ``Store`` holds one ``Database`` (engine, one session scope, the error boundary: every SQLAlchemy/driver
failure leaves as a ``StoreError`` with the masked URL, never the password) and exposes it through roles,
each a small class over that Database, typed for consumers by the Protocols of ``protocols``:

- ``store.schema``: revisions, ``upgrade`` (ours and Optuna's tables) under one cross-process lock;
- ``store.keys``: key identity and the Optuna study name;
- ``store.claims``: who measures which config (unique rows with leases), so no config is measured twice;
- ``store.trials``: storing results (marking their claims done through the claims role) and reading them,
  the best row of each key;
- ``store.history``: every key's state (``KeyState``), and other keys' measurements of a kernel (any
  compatible space) for the ``auto`` strategy;
- ``store.requests``: shapes asked for at run time and not tuned; ``store.verifications``: re-measured
  bests, nightly runs; ``store.services``: ``autotune serve``'s heartbeats and its queue (the requests).

``Store.open`` is the one create-or-check policy (the CLI, nightly and the report open through it; the
runtime lookup opens read-only without a check, as it reads the revision itself without Alembic);
``rows``: record <-> row mappings derived from the dataclasses; ``models``: the tables; ``urls``;
``optuna_study``: the Optuna study copy, the one module that knows Optuna's private models.

Optuna keeps its own tables in the same database (the study is named by ``KeyInfo.study_name``); these
tables are the source of truth for results and for the runtime lookup (``autotune.runtime.lookup``).
Alembic is imported only by the schema role's methods, so the lookup path stays light."""

from __future__ import annotations

from autotune.records import BestRecord, KeyState
from autotune.store.claims import Claim, Claims, ClaimState, Owner
from autotune.store.database import Database
from autotune.store.history import History
from autotune.store.keys import KeyInfo, Keys, dtypes_key, env_columns, study_name
from autotune.store.requests import RequestCount, Requests, ShapeRequest
from autotune.store.schema import Schema, alembic_config, migrations_dir, version_table
from autotune.store.services import Service, Services, Version, Work
from autotune.store.trials import Trials
from autotune.store.urls import default_db_path, default_db_url, mask_url, normalize_db_url
from autotune.store.verifications import NightlyRun, Verification, Verifications

__all__ = [
    "BestRecord",
    "Claim",
    "ClaimState",
    "Database",
    "KeyInfo",
    "KeyState",
    "NightlyRun",
    "Owner",
    "ROLES",
    "RequestCount",
    "Service",
    "Services",
    "ShapeRequest",
    "Store",
    "Verification",
    "Version",
    "Work",
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

#: the roles of a Store, by attribute name (tests pin that a Store has exactly these)
ROLES = ("schema", "keys", "claims", "trials", "history", "requests", "verifications", "services")


class Store:
    """One results database, through its roles. Cheap to construct: nothing connects until the first call.

    The roles share the one ``db`` and call each other only explicitly: the trials role is given the
    claims role (a stored search trial marks its claim done in the same transaction), and the database
    asks the schema role why a statement failed (a missing or older schema names its fix)."""

    def __init__(self, url: str | None = None, *, readonly: bool = False) -> None:
        self.db = Database(url, readonly=readonly)
        self.schema = Schema(self.db)
        self.db.diagnose = self.schema.diagnose
        self.keys = Keys(self.db)
        self.claims = Claims(self.db)
        self.trials = Trials(self.db, self.claims)
        self.history = History(self.db)
        self.requests = Requests(self.db)
        self.verifications = Verifications(self.db)
        self.services = Services(self.db)

    @classmethod
    def open(cls, url: str | None = None, *, create: bool = False, readonly: bool = False) -> Store:
        """The store at ``url`` (None: ``AUTOTUNE_DB``, else the default SQLite file), checked to be at this
        autotune's schema revision (else a ``StoreError`` that says what to run): the one create-or-check
        policy of the CLI, nightly jobs and reports. ``create``: a database without our schema (a missing
        SQLite file, an empty database) is created in place, under the migration lock; one with an older
        schema is never migrated implicitly (``autotune db upgrade`` does that, since other processes may
        be reading it). ``readonly``: never writes (SQLite: opened read-only, not even a checkpoint;
        Postgres: read-only transactions). Both: a database without our schema is returned unchecked and
        left as it is (``store.schema.missing()`` says so), for a caller that creates it later with
        ``store.schema.create()`` (a search, once its kernel file loaded) or never (a dry run)."""
        if not readonly:
            cls._refuse_early(url)
        store = cls(url, readonly=readonly)
        try:
            if create and store.schema.missing():
                if not readonly:
                    store.schema.create()
                return store
            store.schema.check()
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _refuse_early(cls, url: str | None) -> None:
        """Check an existing schema over a read-only connection first: a command that refuses (an outdated
        or newer schema) must leave the database byte for byte as it was, and a writable SQLite connection
        alone changes the file (it switches the journal to WAL)."""
        probe = cls(url, readonly=True)
        try:
            if not probe.schema.missing():
                probe.schema.check()
        finally:
            probe.close()

    @property
    def url(self) -> str:
        return self.db.url

    @property
    def masked_url(self) -> str:
        """The URL with any password masked: what messages show."""
        return self.db.masked_url

    @property
    def readonly(self) -> bool:
        return self.db.readonly

    def __repr__(self) -> str:
        return f"Store({self.masked_url!r}, readonly={self.readonly})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (the store stays usable: it reconnects on the next call)."""
        self.db.close()
