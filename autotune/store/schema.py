"""The schema role. Schema versions: where the migrations are, which revision a database is at, and upgrading it (ours and
Optuna's tables) under one cross-process lock. Alembic is imported only here and only when needed, so the
runtime lookup stays light (as Optuna's ``_VersionManager`` keeps migrations apart from queries)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, MetaData, String, Table, func, inspect, select
from sqlalchemy.engine import Connection

from autotune import imports
from autotune.errors import SchemaOutOfDateError, StoreError
from autotune.store.database import WRITE, Database
from autotune.store.models import VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config

#: Postgres advisory-lock key serializing migrations across processes ("autotune" in ASCII)
_MIGRATION_LOCK_KEY = 0x6175746F74756E65


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


def alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    # ConfigParser interpolates '%': escape it in the path
    cfg.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    return cfg


#: a migration's ``revision = '0006'`` and ``down_revision = '0005'`` lines, as our migrations write them
_REVISION_LINE = re.compile(
    r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", re.M
)


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision, read from the migration files' ``revision`` and ``down_revision`` lines: a
    command that only checks the schema (every one that does not migrate) never imports Alembic, whose
    import costs more than the check itself (0.1 s here, ~0.5 s on the GPU hosts). Alembic's own head is
    the fallback for files this reader does not understand (a merge revision, a hand-written file)."""
    revisions: dict[str, str | None] = {}
    for path in sorted((migrations_dir() / "versions").glob("*.py")):
        found = {m[0]: m[1] or m[2] or None for m in _REVISION_LINE.findall(path.read_text(encoding="utf-8"))}
        if "revision" not in found or "down_revision" not in found:
            return _alembic_head()
        revisions[str(found["revision"])] = found["down_revision"]
    heads = set(revisions) - {d for d in revisions.values() if d}
    return heads.pop() if len(heads) == 1 else _alembic_head()


def _alembic_head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


def known_revision(rev: str) -> bool:
    from alembic.script import ScriptDirectory

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(rev) is not None
    except Exception:
        return False


#: Alembic's version table, read without importing Alembic (so diagnosing a missing schema stays cheap)
version_table = Table(VERSION_TABLE, MetaData(), Column("version_num", String(32), primary_key=True))


def current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revs = sorted(conn.scalars(select(version_table.c.version_num)).all())
    # several rows would mean branches we never create: report them as one unknown revision
    return ",".join(revs) or None


class Schema:
    """Revision checks and upgrades of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def status(self) -> tuple[str | None, str]:
        """(revision the database is at, or None without a schema; revision this autotune needs)."""
        return self._current_revision(), head_revision()

    def _current_revision(self) -> str | None:
        with self.db.guard(diagnose=False), self.db.engine.connect() as conn:
            return current_revision(conn)

    def _upgrade_hint(self) -> str:
        return f"run `autotune db upgrade --db {self.db.masked_url}`"

    def missing(self) -> bool:
        """No autotune schema yet: a missing SQLite file (not created by asking), or an empty database."""
        if self.db.sqlite_path and not os.path.exists(self.db.sqlite_path):
            return True
        return self._current_revision() is None

    def create(self) -> None:
        """Create our schema if the database has none (safe when several processes create it at once),
        then check it: the creating half of ``Store.open(create=True)`` for a caller that opened it
        read-only first."""
        if self.missing():
            self.upgrade()
        self.check()

    def diagnose(self) -> StoreError | None:
        """The schema problem that explains a failed statement, if any (the database's ``diagnose``)."""
        try:
            self.check()
        except StoreError as e:
            return e
        return None

    def check(self) -> None:
        """Raise unless the database is exactly at this autotune's schema revision."""
        current = self._current_revision()
        if current is None:  # decided before importing Alembic for the head: the lookup's common error
            raise SchemaOutOfDateError(
                f"database {self.db.masked_url} has no autotune schema: {self._upgrade_hint()}"
            )
        head = head_revision()
        if current == head:
            return
        if not known_revision(current):
            raise StoreError(self._newer_message(current, head))
        raise SchemaOutOfDateError(
            f"database {self.db.masked_url} is at revision {current}, this autotune needs "
            f"{head}: {self._upgrade_hint()}"
        )

    def _newer_message(self, current: str, head: str) -> str:
        return (
            f"database {self.db.masked_url} is at revision {current}, which this autotune does not know (it "
            f"needs {head}): a newer autotune upgraded it; upgrade autotune to use this database"
        )

    def upgrade(self) -> tuple[str | None, str]:
        """Bring our schema to head, and create/upgrade Optuna's tables; returns (our revision before,
        after). Idempotent, and safe when several processes upgrade at once: everything runs under one
        lock (Postgres: an advisory lock; SQLite: a lock file), our migration in one transaction."""
        if self.db.readonly:
            raise StoreError(f"database {self.db.masked_url} is open read-only: cannot upgrade it")
        from alembic import command, util

        cfg = alembic_config()
        with self.migration_lock():
            try:
                with (
                    self.db.guard(diagnose=False),
                    self.db.engine.connect() as conn,
                    self._sqlite_fk_off(conn),
                    conn.execution_options(**{WRITE: True}).begin(),
                ):
                    before = current_revision(conn)
                    if before is not None and not known_revision(before):
                        raise StoreError(self._newer_message(before, head_revision()))
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, "head")
                    after = current_revision(conn)
                    if self.db.is_sqlite:
                        bad = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                        if bad:
                            raise StoreError(f"migrating {self.db.masked_url} broke {len(bad)} references")
                # after our commit: on SQLite, Optuna's own connections would wait on our write lock
                self._upgrade_optuna()
            except util.CommandError as e:
                raise StoreError(
                    f"cannot upgrade database {self.db.masked_url}: {self.db.scrub(str(e))}"
                ) from e
        return before, after or head_revision()

    @contextmanager
    def _sqlite_fk_off(self, conn: Any) -> Iterator[None]:
        """SQLite's batch migrations copy and drop tables that others reference: foreign keys must be off
        (Alembic's documented advice), and that pragma only works outside a transaction."""
        if not self.db.is_sqlite:
            yield
            return
        raw = conn.connection.dbapi_connection
        raw.execute("PRAGMA foreign_keys=OFF")
        try:
            yield
        finally:
            raw.execute("PRAGMA foreign_keys=ON")

    def optuna_storage(self) -> Any:
        """Optuna's ``RDBStorage`` on this database, opened under the migration lock: its constructor
        creates Optuna's tables on a fresh database, which races when several searches start at once
        (optuna/optuna#1092; a ``DuplicateTable`` crash on Postgres)."""
        with imports.LOCK:  # another thread may be importing Optuna (autotune/imports.py)
            from optuna.storages import RDBStorage

        with self.migration_lock(), self.db.guard(diagnose=False):
            return RDBStorage(self.db.url, engine_kwargs=self.db.optuna_engine_kwargs())

    def _upgrade_optuna(self) -> None:
        """Create Optuna's tables (or upgrade them from an older Optuna) while we hold the migration lock."""
        try:
            with imports.LOCK:  # another thread may be importing Optuna (autotune/imports.py)
                from optuna.storages import RDBStorage
        except ImportError:  # optuna is a dependency of autotune, but the store does not need it
            return
        with self.db.guard(diagnose=False):
            storage = RDBStorage(
                self.db.url, engine_kwargs=self.db.optuna_engine_kwargs(), skip_compatibility_check=True
            )
            try:
                current = storage.get_current_version()
                if current != storage.get_head_version() and current in storage.get_all_versions():
                    storage.upgrade()
            finally:
                storage.engine.dispose()

    @contextmanager
    def migration_lock(self) -> Iterator[None]:
        """One process at a time, across processes and hosts: a Postgres advisory lock (held on its own
        connection), or an exclusive flock on ``<db>.lock`` for SQLite (BEGIN IMMEDIATE alone would give
        up after the busy timeout on a long migration)."""
        if self.db.is_sqlite:
            with self._file_lock():
                yield
            return
        with self.db.guard(diagnose=False), self.db.engine.connect() as conn:
            conn.execute(select(func.pg_advisory_lock(_MIGRATION_LOCK_KEY)))
            conn.commit()
            try:
                yield
            finally:
                conn.rollback()
                conn.execute(select(func.pg_advisory_unlock(_MIGRATION_LOCK_KEY)))
                conn.commit()

    def _file_lock(self) -> Any:
        if not self.db.sqlite_path:
            return nullcontext()
        try:
            import fcntl
        except ImportError:  # not POSIX: BEGIN IMMEDIATE still serializes the migration
            return nullcontext()

        @contextmanager
        def lock() -> Iterator[None]:
            path = self.db.sqlite_path + ".lock"  # type: ignore[operator]
            with self.db.guard(diagnose=False):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock

        return lock()
