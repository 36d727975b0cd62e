"""What consumers of the store type against: one small Protocol per role (a ``Store``'s ``trials`` is a
``TrialStore``, its ``history`` a ``HistorySource``...), and the few bundles of roles that a consumer reads
together. A function taking ``HistorySource`` accepts a Store's history role or anything shaped like it (a
test double, an in-memory store), and a reader can follow a config from its caller into the store.

Plain typing, nothing here touches a database. Consumers outside ``store/`` import it under
``TYPE_CHECKING`` only, so that typing them never loads the store (nor SQLAlchemy) on their import path."""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from autotune.records import BestRecord, KeyState
from autotune.trial import TrialResult

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from autotune.store.claims import Claim, Owner
    from autotune.store.database import Database
    from autotune.store.keys import KeyInfo
    from autotune.store.models import TrialRow
    from autotune.store.requests import RequestCount, ShapeRequest
    from autotune.store.verifications import NightlyRun, Verification

__all__ = [
    "ClaimStore",
    "HistorySource",
    "KeyStore",
    "PlanSource",
    "RequestStore",
    "SchemaStore",
    "SearchStore",
    "StoreReader",
    "TrialStore",
    "VerificationStore",
]

# ---------------------------------------------------------------- roles


@runtime_checkable
class TrialStore(Protocol):
    """Results and best configs (``autotune.store.trials``)."""

    def record(
        self,
        key_id: int,
        result: TrialResult,
        *,
        optuna_trial_number: int | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
    ) -> int: ...

    def record_many(
        self,
        key_id: int,
        items: list[tuple[TrialResult, datetime | None, datetime | None]],
        *,
        optuna_trial_number: int | None = None,
    ) -> list[int]: ...

    def find(self, key_id: int, config_hash: str) -> TrialResult | None: ...

    def recorded(self, key_id: int, *, retimed: bool = False) -> list[TrialResult]: ...

    def since(self, key_id: int, after_id: int) -> list[tuple[int, TrialResult]]: ...

    def counts(self, key_id: int) -> dict[str, int]: ...

    def reopen(self, key_id: int) -> int: ...

    def refresh_best(self, key_id: int, default_hash: str | None = None) -> BestRecord | None: ...

    def best(
        self, kernel_name: str, shape_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]: ...


@runtime_checkable
class ClaimStore(Protocol):
    """Who measures which config (``autotune.store.claims``)."""

    def claim(
        self, key_id: int, config_hash: str, owner: Owner, *, device: str = "", lease_s: float
    ) -> Claim: ...

    def claim_many(
        self, key_id: int, config_hashes: list[str], owner: Owner, *, device: str = "", lease_s: float
    ) -> dict[str, Claim]: ...

    def renew(self, owner: Owner, *, lease_s: float) -> int: ...

    def release(self, owner: Owner, config_hashes: list[str] | None = None) -> int: ...

    def running(self, key_id: int) -> dict[str, str]: ...

    def settled_trials(self, key_id: int, *, older_than_s: float) -> set[int]: ...

    def complete(self, s: Session, key_id: int, row: TrialRow) -> None: ...


@runtime_checkable
class KeyStore(Protocol):
    """Tuning keys (``autotune.store.keys``)."""

    def ensure(
        self,
        kernel_name: str,
        source_hash: str,
        space_hash: str,
        space_def: Any,
        shape: Any,
        shape_key: str,
        dtypes: Any,
        env: Any,
    ) -> KeyInfo: ...

    def space(self, key_id: int) -> dict[str, Any]: ...


@runtime_checkable
class HistorySource(Protocol):
    """What the database knows across keys (``autotune.store.history``)."""

    def key_states(self, kernel_name: str | None = None) -> list[KeyState]: ...

    def transfer(
        self,
        kernel_name: str,
        space_hash: str,
        env: dict[str, Any],
        exclude_key_id: int | None = None,
        params: Collection[str] | None = None,
    ) -> list[tuple[int, dict[str, int], dict[str, Any], float, float, str]]: ...


@runtime_checkable
class RequestStore(Protocol):
    """Shapes asked for at run time (``autotune.store.requests``)."""

    def add(self, counts: list[RequestCount]) -> None: ...

    def recorded(
        self,
        kernel_name: str | None = None,
        *,
        device_name: str | None = None,
        since: datetime | None = None,
    ) -> list[ShapeRequest]: ...


@runtime_checkable
class VerificationStore(Protocol):
    """Re-measured bests and nightly runs (``autotune.store.verifications``)."""

    def record(self, v: Verification) -> int: ...

    def recorded(
        self,
        key_id: int | None = None,
        *,
        config_hash: str | None = None,
        kernel_name: str | None = None,
        since: datetime | None = None,
    ) -> list[Verification]: ...

    def start_run(
        self, run_id: str, job_name: str, hostname: str, *, expires_at: datetime | None = None
    ) -> None: ...

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any]) -> None: ...

    def runs(self, *, since: datetime | None = None) -> list[NightlyRun]: ...


@runtime_checkable
class SchemaStore(Protocol):
    """Schema revisions and upgrades (``autotune.store.schema``)."""

    def status(self) -> tuple[str | None, str]: ...

    def missing(self) -> bool: ...

    def check(self) -> None: ...

    def upgrade(self) -> tuple[str | None, str]: ...

    def migration_lock(self) -> AbstractContextManager[None]: ...


# ---------------------------------------------------------------- bundles of roles a consumer reads together


@runtime_checkable
class StoreReader(Protocol):
    """What the reports, the nightly job and the exports read: every key's state, its trials, the requests
    and verifications, and where they come from (``masked_url``, for messages)."""

    @property
    def masked_url(self) -> str: ...

    @property
    def trials(self) -> TrialStore: ...

    @property
    def keys(self) -> KeyStore: ...

    @property
    def history(self) -> HistorySource: ...

    @property
    def requests(self) -> RequestStore: ...

    @property
    def verifications(self) -> VerificationStore: ...


@runtime_checkable
class PlanSource(Protocol):
    """What the nightly planner reads: every key's state and the requested shapes (a Store, or a dry run's
    empty stand-in for a database without a schema)."""

    @property
    def history(self) -> HistorySource: ...

    @property
    def requests(self) -> RequestStore: ...


@runtime_checkable
class SearchStore(Protocol):
    """What a search writes and reads: keys, claims, trials, other keys' history; ``url`` and ``db`` for
    its Optuna study writer, which opens the same database in its own process (and, on SQLite, shares the
    database's write lock)."""

    @property
    def url(self) -> str: ...

    @property
    def db(self) -> Database: ...

    @property
    def keys(self) -> KeyStore: ...

    @property
    def claims(self) -> ClaimStore: ...

    @property
    def trials(self) -> TrialStore: ...

    @property
    def history(self) -> HistorySource: ...
