"""Alembic environment of autotune's tables (prefixed ``autotune_``; Optuna's tables in the same database
are left alone).

At run time ``store.schema.upgrade`` (``autotune.store.schema``) passes its own connection, already inside a transaction
and holding the migration lock, in ``config.attributes["connection"]`` (on SQLite with foreign keys off:
whoever passes a connection turns them off, see ``_sqlite_foreign_keys_off``). For development, run from the
repo root with the alembic.ini there:
    alembic -x db=sqlite:///dev.db upgrade head
    alembic -x db=sqlite:///dev.db revision --autogenerate -m "what changed"
(without ``-x db=`` the database is ``AUTOTUNE_DB`` or the default one)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from alembic import context

from autotune.store.models import VERSION_TABLE, Base, include_name

config = context.config


def run_migrations(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        compare_type=True,
        # SQLite cannot ALTER most things: autogenerate batch (copy-and-move) operations for it
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    if config.config_file_name:  # the developer's alembic.ini: its logging sections
        from logging.config import fileConfig

        fileConfig(config.config_file_name, disable_existing_loggers=False)
    from autotune.store import Store, default_db_url, normalize_db_url

    url = context.get_x_argument(as_dictionary=True).get("db") or config.get_main_option("sqlalchemy.url")
    url = normalize_db_url(url) if url else default_db_url()
    if context.is_offline_mode():  # `alembic upgrade head --sql`: print the DDL
        context.configure(
            url=url,
            target_metadata=Base.metadata,
            version_table=VERSION_TABLE,
            include_name=include_name,
            literal_binds=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    store = Store(url)
    try:
        with store.db.engine.connect() as conn, _sqlite_foreign_keys_off(conn), conn.begin():
            run_migrations(conn)
            if conn.dialect.name == "sqlite":
                bad = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if bad:  # raised inside the transaction: nothing is committed
                    raise RuntimeError(f"the migration broke {len(bad)} references; rolled back")
    finally:
        store.close()


@contextmanager
def _sqlite_foreign_keys_off(conn: Any) -> Iterator[None]:
    """SQLite: batch mode copies a table and drops the original, which other tables' rows reference; with
    foreign keys on, that DROP fails ("FOREIGN KEY constraint failed", even deferred: the count of broken
    references never goes down when the copy takes the original's name). Off, as Alembic advises (the pragma
    only works outside a transaction); main() checks every reference before committing."""
    if conn.dialect.name != "sqlite":
        yield
        return
    raw = conn.connection.dbapi_connection
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        raw.execute("PRAGMA foreign_keys=ON")


main()
