"""The results database (SQLite file or Postgres): trials, tuning keys and the best config of each key.

Optuna keeps its own tables in the same database (the study is named by ``KeyInfo.study_name``); these
tables are the source of truth for results and for the runtime lookup (``autotune.lookup``).

Every SQLAlchemy/driver failure leaves this package as a ``StoreError`` whose message carries the
masked URL, never the password. Alembic is imported only by the schema methods, so the lookup path
stays light."""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import URL, Column, MetaData, String, Table, create_engine, event, func, inspect, select
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError
from sqlalchemy.orm import Session

from ..env import ENV_KEY_FIELDS
from ..env import env_hash as compute_env_hash
from ..errors import DatabaseUnreachableError, SchemaOutOfDateError, StoreError
from ..records import BestRecord
from ..trial import TrialResult, TrialStatus, config_hash
from .models import (
    VERSION_TABLE,
    BestConfigRow,
    EnvironmentRow,
    KernelRow,
    ShapeRow,
    TrialRow,
    TuningKeyRow,
    utcnow,
)
from .urls import default_db_path, default_db_url, mask_url, normalize_db_url, url_secrets

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "BestRecord",
    "KeyInfo",
    "Store",
    "default_db_path",
    "default_db_url",
    "dtypes_key",
    "mask_url",
    "migrations_dir",
    "normalize_db_url",
    "study_name",
]

#: execution option that makes a SQLite transaction start with BEGIN IMMEDIATE (see Store._sqlite_events)
_WRITE = "autotune_write"
#: Postgres advisory-lock key serializing migrations across processes ("autotune" in ASCII)
_MIGRATION_LOCK_KEY = 0x6175746F74756E65
_DEFAULT_CONNECT_TIMEOUT_S = 10
_SQLITE_BUSY_TIMEOUT_S = 60.0

#: every Store's engine: a forked child must not reuse its parent's pooled connections (the sockets are
#: shared; SQLAlchemy's documented remedy is dispose(close=False) in the child)
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    for engine in list(_engines):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_connections_in_child)


@dataclass(frozen=True)
class KeyInfo:
    """A tuning key: what a best config is valid for, and the Optuna study that searches it."""

    id: int
    study_name: str
    kernel_id: int
    shape_id: int
    environment_id: int
    kernel_name: str
    source_hash: str
    space_hash: str
    shape_key: str
    dtypes_key: str
    env_hash: str


def dtypes_key(dtypes: Mapping[str, str]) -> str:
    """Canonical JSON text of a dtypes mapping (part of the shape's identity)."""
    return json.dumps({str(k): str(v) for k, v in dtypes.items()}, sort_keys=True, separators=(",", ":"))


def env_columns(env: Mapping[str, Any]) -> dict[str, Any]:
    """The environments row of an ``autotune.env.environment()`` dict: its identity fields."""
    cols: dict[str, Any] = {f: str(env.get(f, "")) for f in ENV_KEY_FIELDS}
    cols["sm_count"] = int(env.get("sm_count") or 0)
    return cols


def study_name(
    kernel_name: str, shape_key: str, dtypes_key: str, env_hash: str, space_hash: str, source_hash: str
) -> str:
    """Deterministic Optuna study name of a key: every process tuning the same key joins one study."""
    dh = hashlib.sha256(dtypes_key.encode()).hexdigest()[:8]
    return f"{kernel_name}|{shape_key}|{dh}|{env_hash[:12]}|{space_hash[:12]}|{source_hash[:12]}"


def migrations_dir() -> Path:
    """The Alembic script directory: shipped in the wheel as ``autotune/_migrations``, else the
    checkout's top-level ``alembic/`` (editable install / running from source)."""
    pkg = Path(__file__).resolve().parent.parent
    for candidate in (pkg / "_migrations", pkg.parent / "alembic"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreError(
        f"autotune's database migrations are missing (looked in {pkg / '_migrations'} and "
        f"{pkg.parent / 'alembic'}): reinstall autotune"
    )


def _alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    # ConfigParser interpolates '%': escape it in the path
    cfg.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    return cfg


@lru_cache(maxsize=1)
def _head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config()).get_current_head() or ""


def _known_revision(rev: str) -> bool:
    from alembic.script import ScriptDirectory

    try:
        return ScriptDirectory.from_config(_alembic_config()).get_revision(rev) is not None
    except Exception:
        return False


#: Alembic's version table, read without importing Alembic (so diagnosing a missing schema stays cheap)
_version_table = Table(VERSION_TABLE, MetaData(), Column("version_num", String(32), primary_key=True))


def _current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revs = sorted(conn.scalars(select(_version_table.c.version_num)).all())
    # several rows would mean branches we never create: report them as one unknown revision
    return ",".join(revs) or None


def _utc(dt: datetime | None) -> datetime | None:
    """Aware UTC (naive input is local time, as ``datetime.now()`` gives); SQLite hands back naive UTC."""
    return None if dt is None else dt.astimezone(timezone.utc)


def _from_db_time(dt: datetime) -> datetime:
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    """A plain-JSON copy (tuples -> lists, odd values -> str), keeping the key order."""
    return json.loads(json.dumps(dict(d), default=str))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _trial_result(row: TrialRow) -> TrialResult:
    return TrialResult(
        status=TrialStatus(row.status),
        config=dict(row.config),
        time_s=row.time_s,
        mean_s=row.mean_s,
        min_s=row.min_s,
        spread=row.spread,
        launches=row.launches,
        tflops=row.tflops,
        gbps=row.gbps,
        compile_s=row.compile_s,
        error=row.error,
        worker=row.worker,
        hostname=row.hostname,
        measured=bool(row.measured),
        kernels=dict(row.kernels or {}),
    )


def _best_record(row: BestConfigRow) -> BestRecord:
    return BestRecord(
        kernel_name=row.kernel_name,
        shape_key=row.shape_key,
        dims=dict(row.dims),
        dtypes=json.loads(row.dtypes_key),
        device_name=row.device_name,
        cc=row.cc,
        env_hash=row.env_hash,
        torch=row.torch,
        triton=row.triton,
        source_hash=row.source_hash,
        space_hash=row.space_hash,
        config=dict(row.config),
        time_s=row.time_s,
        tflops=row.tflops,
        updated_at=_from_db_time(row.updated_at),
        key_id=row.key_id,
        trial_id=row.trial_id,
    )


class Store:
    """One results database. Cheap to construct: nothing connects until the first call."""

    def __init__(self, url: str | None = None, *, readonly: bool = False) -> None:
        self.url = normalize_db_url(url) if url is not None else default_db_url()
        self.masked_url = mask_url(self.url)
        self.readonly = readonly
        self._secrets = url_secrets(self.url)
        sa_url = make_url(self.url)
        self.is_sqlite = sa_url.get_backend_name() == "sqlite"
        db = sa_url.database if self.is_sqlite else None
        #: the SQLite file, None for Postgres or an in-memory database
        self.sqlite_path: str | None = db if db and db != ":memory:" and not db.startswith("file:") else None
        try:
            self.engine: Engine = self._create_engine(sa_url)
            _engines.add(self.engine)
        except (SQLAlchemyError, ImportError) as e:
            raise StoreError(
                f"cannot use database {self.masked_url}: {self._scrub(_first_line(e))}"
                + (
                    " (install psycopg: pip install 'autotune[postgres]')"
                    if isinstance(e, ImportError)
                    else ""
                )
            ) from None

    def __repr__(self) -> str:
        return f"Store({self.masked_url!r}, readonly={self.readonly})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def optuna_engine_kwargs(self) -> dict[str, Any]:
        """``engine_kwargs`` for ``optuna.storages.RDBStorage(store.url, engine_kwargs=...)``: the same busy
        timeout (SQLite; pysqlite's default is 5 s, too short for several tuner processes) or connect
        timeout (Postgres) as this store."""
        if self.is_sqlite:
            return {"connect_args": {"timeout": _SQLITE_BUSY_TIMEOUT_S}}
        return {"pool_pre_ping": True, "connect_args": {"connect_timeout": _DEFAULT_CONNECT_TIMEOUT_S}}

    def close(self) -> None:
        """Close the pooled connections (a Store stays usable: it reconnects on the next call)."""
        self.engine.dispose()

    # ---------------------------------------------------------------- engine and sessions

    def _create_engine(self, sa_url: URL) -> Engine:
        if not self.is_sqlite:
            connect_args: dict[str, Any] = {}
            if "connect_timeout" not in sa_url.query:  # an unreachable host must fail fast, not hang
                connect_args["connect_timeout"] = _DEFAULT_CONNECT_TIMEOUT_S
            if self.readonly:
                connect_args["options"] = "-c default_transaction_read_only=on"
            return create_engine(sa_url, pool_pre_ping=True, connect_args=connect_args)
        connect_args = {} if "timeout" in sa_url.query else {"timeout": _SQLITE_BUSY_TIMEOUT_S}
        if self.readonly and self.sqlite_path:
            # mode=ro: never creates the file, never writes (the lookup runs inside users' programs)
            sa_url = URL.create(
                "sqlite", database=f"file:{quote(self.sqlite_path)}", query={"mode": "ro", "uri": "true"}
            )
        engine = create_engine(sa_url, connect_args=connect_args)
        self._sqlite_events(engine)
        return engine

    def _sqlite_events(self, engine: Engine) -> None:
        path, readonly = self.sqlite_path, self.readonly

        @event.listens_for(engine, "do_connect")
        def _make_parent_dir(dialect: Any, conn_rec: Any, cargs: Any, cparams: Any) -> None:
            if path and not readonly:
                os.makedirs(os.path.dirname(path), exist_ok=True)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, conn_rec: Any) -> None:
            # pysqlite's own implicit BEGIN is deferred and skips reads; turn it off and let the "begin"
            # hook below emit BEGIN itself (SQLAlchemy's documented recipe).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            if not readonly:
                # WAL: readers (lookups, `autotune show`) never block the writing tuner processes
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # A writer takes the write lock up front (waiting up to the busy timeout): a deferred
            # transaction that reads and then writes fails at once with SQLITE_BUSY when another
            # process wrote in between, instead of waiting.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _error(self, e: BaseException, *, diagnose: bool = True) -> StoreError:
        """The StoreError to raise for a SQLAlchemy/driver/OS error; ``diagnose``: on a failed statement,
        check the schema revision to tell the user to upgrade."""
        if isinstance(e, StoreError):
            return e
        reason = self._scrub(_first_line(e.orig if isinstance(e, DBAPIError) and e.orig is not None else e))
        if isinstance(e, OSError) or (
            isinstance(e, DBAPIError) and (e.statement is None or e.connection_invalidated)
        ):
            # no statement: the failure happened while connecting
            return DatabaseUnreachableError(f"cannot connect to database {self.masked_url}: {reason}")
        if diagnose and isinstance(e, (OperationalError, ProgrammingError)):
            # most likely a missing/older table: say so, with the command that fixes it
            try:
                self.check_schema()
            except StoreError as schema_error:
                return schema_error
            except Exception:
                pass
        return StoreError(f"database {self.masked_url}: {reason}")

    @contextmanager
    def _guard(self, *, diagnose: bool = True) -> Iterator[None]:
        try:
            yield
        except (SQLAlchemyError, OSError) as e:
            raise self._error(e, diagnose=diagnose) from e

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction: commit on success, roll back on any error (as Optuna's RDB storage does)."""
        if write and self.readonly:
            raise StoreError(f"database {self.masked_url} is open read-only")
        session = Session(self.engine, expire_on_commit=False)
        try:
            with self._guard():
                try:
                    if write:
                        session.connection(execution_options={_WRITE: True})
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        finally:
            session.close()

    # ---------------------------------------------------------------- schema

    def schema_status(self) -> tuple[str | None, str]:
        """(revision the database is at, or None without a schema; revision this autotune needs)."""
        return self._current_revision(), _head_revision()

    def _current_revision(self) -> str | None:
        with self._guard(diagnose=False), self.engine.connect() as conn:
            return _current_revision(conn)

    def _upgrade_hint(self) -> str:
        return f"run `autotune db upgrade --db {self.masked_url}`"

    def check_schema(self) -> None:
        """Raise unless the database is exactly at this autotune's schema revision."""
        current = self._current_revision()
        if current is None:  # decided before importing Alembic for the head: the lookup's common error
            raise SchemaOutOfDateError(
                f"database {self.masked_url} has no autotune schema: {self._upgrade_hint()}"
            )
        head = _head_revision()
        if current == head:
            return
        if not _known_revision(current):
            raise StoreError(self._newer_message(current, head))
        raise SchemaOutOfDateError(
            f"database {self.masked_url} is at revision {current}, this autotune needs "
            f"{head}: {self._upgrade_hint()}"
        )

    def _newer_message(self, current: str, head: str) -> str:
        return (
            f"database {self.masked_url} is at revision {current}, which this autotune does not know (it "
            f"needs {head}): a newer autotune upgraded it; upgrade autotune to use this database"
        )

    def upgrade(self) -> tuple[str | None, str]:
        """Bring our schema to head, and create/upgrade Optuna's tables; returns (our revision before,
        after). Idempotent, and safe when several processes upgrade at once: everything runs under one
        lock (Postgres: an advisory lock; SQLite: a lock file), our migration in one transaction."""
        if self.readonly:
            raise StoreError(f"database {self.masked_url} is open read-only: cannot upgrade it")
        from alembic import command, util

        cfg = _alembic_config()
        with self._migration_file_lock(), self._guard(diagnose=False), self.engine.connect() as conn:
            if not self.is_sqlite:
                conn.execute(select(func.pg_advisory_lock(_MIGRATION_LOCK_KEY)))
                conn.commit()
            try:
                with conn.execution_options(**{_WRITE: True}).begin():
                    before = _current_revision(conn)
                    if before is not None and not _known_revision(before):
                        raise StoreError(self._newer_message(before, _head_revision()))
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, "head")
                    after = _current_revision(conn)
                # after our commit: on SQLite, Optuna's own connections would wait on our write lock
                self._upgrade_optuna()
            except util.CommandError as e:
                raise StoreError(f"cannot upgrade database {self.masked_url}: {self._scrub(str(e))}") from e
            finally:
                if not self.is_sqlite:
                    conn.rollback()  # a failed statement leaves the transaction aborted
                    conn.execute(select(func.pg_advisory_unlock(_MIGRATION_LOCK_KEY)))
                    conn.commit()
        return before, after or _head_revision()

    def _upgrade_optuna(self) -> None:
        """Create Optuna's tables (or upgrade them from an older Optuna) while we hold the migration lock:
        Optuna's own first-run table creation races when several searches start on an empty database
        (optuna/optuna#1092, where its maintainers advise migrating before starting workers)."""
        try:
            from optuna.storages import RDBStorage
        except ImportError:  # optuna is a dependency of autotune, but the store does not need it
            return
        storage = RDBStorage(
            self.url, engine_kwargs=self.optuna_engine_kwargs(), skip_compatibility_check=True
        )
        try:
            current = storage.get_current_version()
            if current != storage.get_head_version() and current in storage.get_all_versions():
                storage.upgrade()
        finally:
            storage.engine.dispose()

    def _migration_file_lock(self) -> Any:
        """SQLite: an exclusive flock on ``<db>.lock``, so one process migrates while the others wait
        (BEGIN IMMEDIATE alone would give up after the busy timeout on a long migration)."""
        if not self.sqlite_path:
            return nullcontext()
        try:
            import fcntl
        except ImportError:  # not POSIX: BEGIN IMMEDIATE still serializes the migration
            return nullcontext()

        @contextmanager
        def lock() -> Iterator[None]:
            path = self.sqlite_path + ".lock"  # type: ignore[operator]
            with self._guard(diagnose=False):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock

        return lock()

    # ---------------------------------------------------------------- keys and trials

    def ensure_key(
        self,
        kernel_name: str,
        source_hash: str,
        space_hash: str,
        space_def: Mapping[str, Any],
        shape: Mapping[str, int],
        shape_key: str,
        dtypes: Mapping[str, str],
        env: Mapping[str, Any],
    ) -> KeyInfo:
        """Get or create the kernel, environment, shape and tuning-key rows of one key."""
        dkey = dtypes_key(dtypes)
        ehash = compute_env_hash(env)
        with self._session(write=True) as s:
            kernel = self._get_or_create(s, KernelRow, {"name": kernel_name, "source_hash": source_hash}, {})
            env_row = self._get_or_create(s, EnvironmentRow, {"env_hash": ehash}, env_columns(env))
            shape_row = self._get_or_create(
                s,
                ShapeRow,
                {"kernel_name": kernel_name, "shape_key": shape_key, "dtypes_key": dkey},
                {"dims": {str(k): int(v) for k, v in shape.items()}, "dtypes": json.loads(dkey)},
            )
            key = self._get_or_create(
                s,
                TuningKeyRow,
                {
                    "kernel_id": kernel.id,
                    "space_hash": space_hash,
                    "shape_id": shape_row.id,
                    "environment_id": env_row.id,
                },
                {
                    "space": _jsonable(space_def),
                    "study_name": study_name(kernel_name, shape_key, dkey, ehash, space_hash, source_hash),
                },
            )
            return KeyInfo(
                id=key.id,
                study_name=key.study_name,
                kernel_id=kernel.id,
                shape_id=shape_row.id,
                environment_id=env_row.id,
                kernel_name=kernel_name,
                source_hash=source_hash,
                space_hash=space_hash,
                shape_key=shape_key,
                dtypes_key=dkey,
                env_hash=ehash,
            )

    @staticmethod
    def _get_or_create(s: Session, model: type[Any], ident: dict[str, Any], extra: dict[str, Any]) -> Any:
        stmt = select(model).filter_by(**ident)
        row = s.scalars(stmt).first()
        if row is not None:
            return row
        try:
            with s.begin_nested():  # a savepoint: losing the race must not abort the whole transaction
                row = model(**ident, **extra)
                s.add(row)
            return row
        except IntegrityError:
            # another process inserted the same row between our select and insert: use theirs
            return s.scalars(stmt).one()

    def find_trial(self, key_id: int, config_hash: str) -> TrialResult | None:
        """The most recent stored result of a config under a key (for reuse), or None."""
        with self._session() as s:
            row = s.scalars(
                select(TrialRow)
                .where(TrialRow.key_id == key_id, TrialRow.config_hash == config_hash)
                .order_by(TrialRow.id.desc())
                .limit(1)
            ).first()
            return None if row is None else _trial_result(row)

    def record_trial(
        self,
        key_id: int,
        result: TrialResult,
        *,
        optuna_trial_number: int | None = None,
        reused_from: int | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
    ) -> int:
        """Store one result; returns its id. ``finished_at`` defaults to now."""
        row = TrialRow(
            key_id=key_id,
            optuna_trial_number=optuna_trial_number,
            config=_jsonable(result.config),
            config_hash=config_hash(result.config),
            status=TrialStatus(result.status).value,
            time_s=result.time_s,
            mean_s=result.mean_s,
            min_s=result.min_s,
            spread=result.spread,
            launches=result.launches,
            tflops=result.tflops,
            gbps=result.gbps,
            compile_s=result.compile_s,
            error=result.error,
            kernels=_jsonable(result.kernels) if result.kernels else None,
            worker=result.worker,
            hostname=result.hostname,
            measured=bool(result.measured),
            reused_from=reused_from,
            started_at=_utc(started_at),
            finished_at=_utc(finished_at) or utcnow(),
        )
        with self._session(write=True) as s:
            s.add(row)
            s.flush()
            return row.id

    def refresh_best(self, key_id: int) -> BestRecord | None:
        """Point the key's best_configs row at its fastest ok+measured trial (or drop it if none)."""
        with self._session(write=True) as s:
            # row lock: two processes refreshing one key serialize, so the later one sees every trial
            key = s.get(TuningKeyRow, key_id, with_for_update=True)
            if key is None:
                raise StoreError(f"database {self.masked_url}: no tuning key {key_id}")
            trial = s.scalars(
                select(TrialRow)
                .where(
                    TrialRow.key_id == key_id,
                    TrialRow.status == TrialStatus.OK.value,
                    TrialRow.measured.is_(True),
                    TrialRow.time_s.is_not(None),
                )
                .order_by(TrialRow.time_s, TrialRow.id)
                .limit(1)
            ).first()
            best = s.scalars(select(BestConfigRow).where(BestConfigRow.key_id == key_id)).first()
            if trial is None:
                if best is not None:
                    s.delete(best)
                return None
            if best is None or best.trial_id != trial.id:
                kernel = s.get_one(KernelRow, key.kernel_id)
                shape = s.get_one(ShapeRow, key.shape_id)
                env = s.get_one(EnvironmentRow, key.environment_id)
                if best is None:
                    best = BestConfigRow(key_id=key_id)
                    s.add(best)
                best.trial_id, best.config, best.time_s, best.tflops = (
                    trial.id,
                    trial.config,
                    trial.time_s,
                    trial.tflops,
                )
                best.kernel_name, best.source_hash, best.space_hash = (
                    kernel.name,
                    kernel.source_hash,
                    key.space_hash,
                )
                best.shape_key, best.dims, best.dtypes_key = shape.shape_key, shape.dims, shape.dtypes_key
                best.device_name, best.cc, best.env_hash = env.gpu_name, env.cc, env.env_hash
                best.torch, best.triton, best.updated_at = env.torch, env.triton, utcnow()
                s.flush()
            return _best_record(best)

    # ---------------------------------------------------------------- reading

    def best(
        self, kernel_name: str, shape_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]:
        """Best configs of a kernel (optionally one shape / one device), newest first."""
        stmt = select(BestConfigRow).where(BestConfigRow.kernel_name == kernel_name)
        if shape_key is not None:
            stmt = stmt.where(BestConfigRow.shape_key == shape_key)
        if device_name is not None:
            stmt = stmt.where(BestConfigRow.device_name == device_name)
        with self._session() as s:
            rows = s.scalars(stmt.order_by(BestConfigRow.updated_at.desc(), BestConfigRow.id.desc())).all()
            return [_best_record(r) for r in rows]

    def trial_counts(self, key_id: int) -> dict[str, int]:
        """Number of stored trials of a key, by status (statuses with none are absent)."""
        with self._session() as s:
            rows = s.execute(
                select(TrialRow.status, func.count(TrialRow.id))
                .where(TrialRow.key_id == key_id)
                .group_by(TrialRow.status)
            ).all()
            return {status: int(n) for status, n in rows}

    def trials(self, key_id: int) -> list[TrialResult]:
        """Every stored trial of a key, oldest first."""
        with self._session() as s:
            rows = s.scalars(select(TrialRow).where(TrialRow.key_id == key_id).order_by(TrialRow.id)).all()
            return [_trial_result(r) for r in rows]

    def trial_numbers(self, key_id: int) -> list[int]:
        """The Optuna trial numbers recorded under a key (oldest first; rows without one are skipped)."""
        with self._session() as s:
            return list(
                s.scalars(
                    select(TrialRow.optuna_trial_number)
                    .where(TrialRow.key_id == key_id, TrialRow.optuna_trial_number.is_not(None))
                    .order_by(TrialRow.id)
                )
            )

    def summary(self, kernel_name: str | None = None) -> list[dict[str, Any]]:
        """One row per tuning key, for ``autotune show``."""
        stmt = (
            select(TuningKeyRow, KernelRow, ShapeRow, EnvironmentRow, BestConfigRow)
            .join(KernelRow, KernelRow.id == TuningKeyRow.kernel_id)
            .join(ShapeRow, ShapeRow.id == TuningKeyRow.shape_id)
            .join(EnvironmentRow, EnvironmentRow.id == TuningKeyRow.environment_id)
            .outerjoin(BestConfigRow, BestConfigRow.key_id == TuningKeyRow.id)
            .order_by(KernelRow.name, ShapeRow.shape_key, TuningKeyRow.id)
        )
        if kernel_name is not None:
            stmt = stmt.where(KernelRow.name == kernel_name)
        with self._session() as s:
            counts: dict[int, dict[str, int]] = {}
            for key_id, status, n in s.execute(
                select(TrialRow.key_id, TrialRow.status, func.count(TrialRow.id)).group_by(
                    TrialRow.key_id, TrialRow.status
                )
            ):
                counts.setdefault(key_id, {})[status] = int(n)
            out = []
            for key, kernel, shape, env, best in s.execute(stmt):
                c = counts.get(key.id, {})
                out.append(
                    {
                        "key_id": key.id,
                        "kernel": kernel.name,
                        "source_hash": kernel.source_hash[:12],
                        "shape": shape.shape_key,
                        "dtypes": dict(shape.dtypes),
                        "device": env.gpu_name,
                        "cc": env.cc,
                        "env_hash": env.env_hash[:12],
                        "torch": env.torch,
                        "triton": env.triton,
                        "study_name": key.study_name,
                        "trials": sum(c.values()),
                        "counts": c,
                        "best_time_s": best.time_s if best else None,
                        "best_tflops": best.tflops if best else None,
                    }
                )
            return out
