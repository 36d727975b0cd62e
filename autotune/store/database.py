"""The connection to one results database: engine, one session scope, and the error boundary.

Every SQLAlchemy/driver failure leaves through ``Database._error`` as a ``StoreError`` whose message
carries the masked URL, never the password (as Optuna's ``_rdb/storage.py`` funnels every statement
through ``_create_scoped_session``)."""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import URL, create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, ProgrammingError, SQLAlchemyError
from sqlalchemy.orm import Session

from autotune.errors import DatabaseUnreachableError, StoreError
from autotune.store.urls import default_db_url, mask_secrets, mask_url, normalize_db_url, url_secrets

T = TypeVar("T")
#: SQLSTATEs of a transaction that lost a race and may simply run again (deadlock, serialization failure)
_TRANSIENT = {"40P01", "40001"}

#: execution option that makes a SQLite transaction start with BEGIN IMMEDIATE (see _sqlite_events)
WRITE = "autotune_write"
CONNECT_TIMEOUT_S = 10
SQLITE_BUSY_TIMEOUT_S = 60.0

#: every Database's engine: a forked child must not reuse its parent's pooled connections (the sockets
#: are shared; SQLAlchemy's documented remedy is dispose(close=False) in the child)
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    for engine in list(_engines):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_connections_in_child)


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def check_sqlite_writable(path: str) -> None:
    """Refuse, with what to do, a SQLite database that a writer cannot write: the file, its ``-wal`` or
    ``-shm`` immutable (``chattr +i``), read-only or on a read-only mount, or a directory where SQLite
    cannot create them. SQLite would fall back to reading, mapping the ``-shm`` index read-only; a file
    mapped read-only and then truncated or replaced under the process ends it by SIGBUS, with no line
    said (issue 45). Checked before SQLite opens (and maps) anything, by ``access`` (which sees ``+i`` and
    read-only mounts even for root), never by opening: closing another descriptor of the database file
    drops every POSIX lock this process holds on it (SQLite's documented pitfall: disk I/O errors)."""
    for p in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(p) and not os.access(p, os.W_OK):
            raise StoreError(
                f"SQLite database file {p} cannot be written (immutable, read-only or on a read-only "
                "mount): make it writable (chattr -i, chmod u+w, or a read-write mount) and run again"
            )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK):
        raise StoreError(
            f"directory {folder} of SQLite database {path} cannot be written: SQLite creates its -wal "
            "and -shm files beside the database; make the directory writable (chattr -i, chmod u+w) "
            "and run again"
        )


#: seconds between two measurements of a Postgres server's clock offset (``Database.now``)
CLOCK_CHECK_S = 60.0


class Database:
    """One database URL. Cheap to construct: nothing connects until the first call."""

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
        #: what explains a failed statement (a missing or older schema): set by the Store to its schema role's
        #: ``diagnose``, so that the error names the command that fixes it
        self.diagnose: Callable[[], StoreError | None] | None = None
        #: serializes the SQLite writers of this search (its sessions, its Optuna study writer process):
        #: waiting on it wakes at once, where SQLite's busy handler sleeps 1, 2, 5, 10 ms... per retry
        self.write_lock: Any = contextlib.nullcontext()
        #: the Postgres server's clock minus this host's, and when it was last measured (``now``)
        self._clock_offset = timedelta(0)
        self._clock_at = -math.inf
        try:
            self.engine: Engine = self._create_engine(sa_url)
            _engines.add(self.engine)
        except (SQLAlchemyError, ImportError) as e:
            raise StoreError(
                f"cannot use database {self.masked_url}: {self.scrub(first_line(e))}"
                + (
                    " (install psycopg: pip install 'autotune[postgres]')"
                    if isinstance(e, ImportError)
                    else ""
                )
            ) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.masked_url!r}, readonly={self.readonly})"

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (the object stays usable: it reconnects on the next call)."""
        self.engine.dispose()

    def now(self) -> datetime:
        """The time every lease and heartbeat is compared with: the database's clock. A host whose clock ran
        90 s ahead took over live requests and claims (configs measured twice); on Postgres this is this
        host's clock corrected by its offset to the server's, measured at most ``CLOCK_CHECK_S`` ago (a
        failed measurement keeps the last offset). SQLite: this host's clock (one host)."""
        if not self.is_sqlite and time.monotonic() >= self._clock_at + CLOCK_CHECK_S:
            self._clock_at = time.monotonic()
            try:
                with self.engine.connect() as conn:
                    before = datetime.now(timezone.utc)
                    server = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
                    after = datetime.now(timezone.utc)
                self._clock_offset = server.astimezone(timezone.utc) - (before + (after - before) / 2)
            except Exception:  # the database is away: the callers' own statements say so
                pass
        return datetime.now(timezone.utc) + self._clock_offset

    def process_write_lock(self, ctx: Any) -> Any:
        """The write lock to share with a helper process writing to the same database (SQLite only; a
        no-op context otherwise): from now on this Database's write sessions take it too."""
        if not self.is_sqlite:
            return contextlib.nullcontext()
        if isinstance(self.write_lock, contextlib.nullcontext):
            self.write_lock = ctx.RLock()
        return self.write_lock

    def optuna_engine_kwargs(self) -> dict[str, Any]:
        """``engine_kwargs`` for Optuna's ``RDBStorage`` on this URL: the same busy timeout (SQLite;
        pysqlite's default of 5 s is too short for several tuner processes) or connect timeout."""
        if self.is_sqlite:
            return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
        return {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}

    # ---------------------------------------------------------------- engine

    def _create_engine(self, sa_url: URL) -> Engine:
        if not self.is_sqlite:
            connect_args: dict[str, Any] = {}
            if "connect_timeout" not in sa_url.query:  # an unreachable host must fail fast, not hang
                connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
            if self.readonly:
                connect_args["options"] = "-c default_transaction_read_only=on"
            return create_engine(sa_url, pool_pre_ping=True, connect_args=connect_args)
        connect_args = {} if "timeout" in sa_url.query else {"timeout": SQLITE_BUSY_TIMEOUT_S}
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
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                check_sqlite_writable(path)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, conn_rec: Any) -> None:
            # pysqlite's own implicit BEGIN is deferred and skips reads; turn it off and let the "begin"
            # hook below emit BEGIN itself (SQLAlchemy's documented recipe).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            if not readonly:
                # WAL: readers (lookups, `autotune show`) never block the writing tuner processes.
                # synchronous=NORMAL is durable against crashes in WAL mode (only a power loss may drop
                # the last commits) and saves an fsync per trial on the search's hot path.
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # A writer takes the write lock up front (waiting up to the busy timeout): a deferred
            # transaction that reads and then writes fails at once with SQLITE_BUSY when another
            # process wrote in between, instead of waiting.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")

    # ---------------------------------------------------------------- errors and sessions

    def scrub(self, text: str) -> str:
        """``text`` with this URL's password (and any other URL's) masked: safe to show."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return mask_secrets(text)

    def _error(self, e: BaseException, *, diagnose: bool = True) -> StoreError:
        """The StoreError to raise for a SQLAlchemy/driver/OS error; ``diagnose``: on a failed statement,
        check the schema revision to tell the user to upgrade."""
        if isinstance(e, StoreError):
            return e
        reason = self.scrub(first_line(e.orig if isinstance(e, DBAPIError) and e.orig is not None else e))
        if (
            isinstance(e, OSError)
            or (
                isinstance(e, (OperationalError, InterfaceError))
                and (e.statement is None or e.connection_invalidated)
            )
            or (isinstance(e, DBAPIError) and e.connection_invalidated)
        ):
            # no statement, or the connection dropped under one: the database is not there
            return DatabaseUnreachableError(
                f"database {self.masked_url} went away or is unreachable: {reason}"
            )
        if diagnose and isinstance(e, (OperationalError, ProgrammingError)):
            # most likely a missing/older table: say so, with the command that fixes it
            try:
                found = self.diagnose() if self.diagnose is not None else None
            except Exception:
                found = None
            if found is not None:
                return found
        return StoreError(f"database {self.masked_url}: {reason}")

    @contextmanager
    def guard(self, *, diagnose: bool = True) -> Iterator[None]:
        try:
            yield
        except (SQLAlchemyError, OSError) as e:
            raise self._error(e, diagnose=diagnose) from e

    def retrying(self, fn: Callable[[], T], attempts: int = 5) -> T:
        """Run a write transaction again when Postgres aborted it as a deadlock victim or a serialization
        failure (concurrent searchers on one key), with a short random back-off, as Optuna's RDB storage
        does for trial creation."""
        for i in range(attempts):
            try:
                return fn()
            except StoreError as e:
                orig = getattr(e.__cause__, "orig", None)
                if getattr(orig, "sqlstate", None) not in _TRANSIENT or i == attempts - 1:
                    raise
                time.sleep(random.random() * 0.05 * (i + 1))
        raise AssertionError("unreachable")

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction: commit on success, roll back on any error (as Optuna's RDB storage does)."""
        if write and self.readonly:
            raise StoreError(f"database {self.masked_url} is open read-only")
        session = Session(self.engine, expire_on_commit=False)
        try:
            with self.write_lock if write else contextlib.nullcontext(), self.guard():
                try:
                    if write:
                        session.connection(execution_options={WRITE: True})
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        finally:
            session.close()
