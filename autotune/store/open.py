"""The one create-or-check policy of opening the database (the CLI, nightly jobs): what a caller does with
a database without our schema, an older one, a newer one.

- at this autotune's schema revision: used;
- older: ``SchemaOutOfDateError`` saying to run ``autotune db upgrade``: never migrated implicitly, since
  other processes (workers, lookups) may be reading it with the old schema;
- newer (a newer autotune upgraded it): ``StoreError``;
- without our schema (a missing SQLite file, an empty database): created in place when the caller creates
  (under the migration lock, so concurrent creators are safe), else ``SchemaOutOfDateError``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.store import Store


def open_store(url: str | None, *, create: bool, readonly: bool = False) -> Store:
    """The store at ``url`` (None: ``AUTOTUNE_DB``, else the default SQLite file), its schema checked.

    ``create``: a database without our schema is created now; with ``readonly`` it is left as it is and
    returned unchecked (``is_new(store)`` says so): the check of a caller that creates it later with
    :func:`create_schema` (a search, once its kernel file loaded), or never (a dry run). ``readonly``:
    nothing is written through this store, not even a SQLite checkpoint."""
    from autotune.store import Store

    store = Store(url, readonly=readonly)
    if create and is_new(store):
        if not readonly:
            store.upgrade()
            store.check_schema()
        return store
    store.check_schema()
    return store


def is_new(store: Store) -> bool:
    """No autotune schema yet: a missing SQLite file (asked without creating it), or an empty database."""
    if store.sqlite_path and not os.path.exists(store.sqlite_path):
        return True
    return store.schema_status()[0] is None


def create_schema(store: Store) -> None:
    """The creating half of ``open_store(create=True)``, for a caller that checked first (read-only) and
    creates later: create our schema if the database has none (safe when several processes create it at
    once), then check it."""
    if is_new(store):
        store.upgrade()
    store.check_schema()
