"""The one create-or-check policy (autotune/store/open.py): what the CLI and nightly jobs do with a
database without our schema, an older one and a newer one."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from autotune.errors import SchemaOutOfDateError, StoreError
from autotune.store import Store
from autotune.store.open import create_schema, is_new, open_store


def test_a_missing_sqlite_file_is_created_only_when_asked(tmp_path):
    path = tmp_path / "sub" / "new.db"
    url = f"sqlite:///{path}"
    with pytest.raises(StoreError):
        open_store(url, create=False, readonly=True)
    dry = open_store(url, create=True, readonly=True)  # a dry run: nothing written
    assert is_new(dry) and not path.exists()
    later = Store(url)  # checked (above), created once the caller is ready
    create_schema(later)
    assert path.exists() and not is_new(later)
    later.check_schema()
    again = open_store(url, create=False, readonly=True)
    assert not is_new(again)


def test_an_empty_database_is_created_in_place(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    url = f"sqlite:///{path}"
    with pytest.raises(SchemaOutOfDateError, match="autotune db upgrade"):
        open_store(url, create=False)
    store = open_store(url, create=True)
    assert not is_new(store)
    store.check_schema()


@pytest.mark.parametrize("create", [False, True])
def test_an_older_or_newer_schema_is_never_migrated_implicitly(tmp_path, create):
    path = tmp_path / "old.db"
    with Store(f"sqlite:///{path}") as store:
        store.upgrade()
    for revision, error, says in (
        ("0000_from_the_future", StoreError, "newer autotune"),
        ("0001", SchemaOutOfDateError, "autotune db upgrade"),
    ):
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("UPDATE autotune_alembic_version SET version_num = ?", (revision,))
        before = path.read_bytes()
        with pytest.raises(error, match=says):
            open_store(f"sqlite:///{path}", create=create)
        with pytest.raises(error, match=says):
            open_store(f"sqlite:///{path}", create=create, readonly=True)
        assert path.read_bytes() == before
