"""``autotune db``: the schema commands (create or migrate it; check it)."""

from __future__ import annotations

import typer

from autotune.cli.common import DbOption, out

app = typer.Typer(no_args_is_help=True, help="Database schema commands.")


@app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Create or migrate the autotune schema to this version (safe to run concurrently)."""
    from autotune.store import Store

    # the one place a schema is migrated: no create-or-check policy here, an outdated schema is the point
    store = Store(db)
    before, after = store.schema.upgrade()
    if before == after:
        out.print(f"{store.masked_url} is up to date (revision {after})", highlight=False)
    else:
        out.print(f"upgraded {store.masked_url} from {before or 'empty'} to {after}", highlight=False)


@app.command("check")
def db_check(db: DbOption = None) -> None:
    """Exit 0 if the schema is current, else say what to run (exit 2)."""
    from autotune.store import Store

    store = Store.open(db, create=False, readonly=True)
    current, _ = store.schema.status()
    out.print(f"{store.masked_url}: revision {current} (current)", highlight=False)
