"""The one create-or-check policy (autotune/store/open.py): what the CLI and nightly jobs do with a
database without our schema, an older one and a newer one."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from autotune.errors import SchemaOutOfDateError, StoreError
from autotune.store import Store


def test_a_missing_sqlite_file_is_created_only_when_asked(tmp_path):
    path = tmp_path / "sub" / "new.db"
    url = f"sqlite:///{path}"
    with pytest.raises(StoreError):
        Store.open(url, create=False, readonly=True)
    dry = Store.open(url, create=True, readonly=True)  # a dry run: nothing written
    assert dry.schema.missing() and not path.exists()
    later = Store(url)  # checked (above), created once the caller is ready
    later.schema.create()
    assert path.exists() and not later.schema.missing()
    later.schema.check()
    again = Store.open(url, create=False, readonly=True)
    assert not again.schema.missing()


def test_an_empty_database_is_created_in_place(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    url = f"sqlite:///{path}"
    with pytest.raises(SchemaOutOfDateError, match="autotune db upgrade"):
        Store.open(url, create=False)
    store = Store.open(url, create=True)
    assert not store.schema.missing()
    store.schema.check()


@pytest.mark.parametrize("create", [False, True])
def test_an_older_or_newer_schema_is_never_migrated_implicitly(tmp_path, create):
    path = tmp_path / "old.db"
    with Store(f"sqlite:///{path}") as store:
        store.schema.upgrade()
    for revision, error, says in (
        ("0000_from_the_future", StoreError, "newer autotune"),
        ("0001", SchemaOutOfDateError, "autotune db upgrade"),
    ):
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("UPDATE autotune_alembic_version SET version_num = ?", (revision,))
        before = path.read_bytes()
        with pytest.raises(error, match=says):
            Store.open(f"sqlite:///{path}", create=create)
        with pytest.raises(error, match=says):
            Store.open(f"sqlite:///{path}", create=create, readonly=True)
        assert path.read_bytes() == before
