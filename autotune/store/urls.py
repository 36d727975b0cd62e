"""Database URLs: the default location, normalization and masking.

Imports only the stdlib and ``sqlalchemy.engine.url``, so the runtime lookup can use it cheaply."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import StoreError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_USERINFO_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s]*", re.IGNORECASE)


def default_db_path() -> Path:
    """``$AUTOTUNE_HOME/autotune.db``, else ``$XDG_DATA_HOME/autotune/autotune.db`` (``~/.local/share``)."""
    home = os.environ.get("AUTOTUNE_HOME")
    if home:
        base = Path(home).expanduser()
    else:
        base = (
            Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser()
            / "autotune"
        )
    return base.absolute() / "autotune.db"


def default_db_url() -> str:
    """``$AUTOTUNE_DB`` if set, else the default SQLite file (its directory is created on first write)."""
    env = os.environ.get("AUTOTUNE_DB", "").strip()
    return normalize_db_url(env) if env else f"sqlite:///{default_db_path()}"


def normalize_db_url(url_or_path: str | os.PathLike[str]) -> str:
    """A path becomes an (absolute) ``sqlite:///`` URL; ``postgres(ql)://`` selects psycopg 3.

    SQLite paths are made absolute so the orchestrator, its workers and Optuna, whatever their cwd,
    all open the same file."""
    text = os.fspath(url_or_path).strip()
    if not text:
        raise StoreError("empty database URL: give a file path, sqlite:///PATH or postgresql://USER@HOST/DB")
    m = _SCHEME.match(text)
    if m is None:
        if text.endswith(".json"):
            # `autotune export` writes .json files for best_config(); a database never has that name here
            raise StoreError(f"{text} is an exported best-config file (read by best_config), not a database")
        return f"sqlite:///{os.path.abspath(os.path.expanduser(text))}"
    dialect, _, driver = m.group(1).lower().partition("+")
    if dialect in ("postgresql", "postgres") and driver in ("", "psycopg"):
        return "postgresql+psycopg://" + text[m.end() :]
    if dialect == "sqlite" and driver in ("", "pysqlite"):
        from sqlalchemy.engine import make_url

        try:
            url = make_url(text)
        except Exception as e:
            raise StoreError(f"bad database URL {mask_url(text)}: {e}") from None
        db = url.database
        if db and db != ":memory:" and not db.startswith("file:"):
            url = url.set(database=os.path.abspath(os.path.expanduser(db)))
        return url.set(drivername="sqlite").render_as_string(hide_password=False)
    raise StoreError(
        f"unsupported database URL {mask_url(text)}: use a file path, sqlite:///PATH or "
        "postgresql://USER@HOST/DB (psycopg 3)"
    )


def mask_url(url: object) -> str:
    """``url`` with its password (user info or ``?password=``) replaced by ``***``; never raises."""
    text = str(url)
    try:
        from sqlalchemy.engine import make_url

        u = make_url(text)
        if "password" in u.query:
            u = u.update_query_dict({"password": "***"})
        return u.render_as_string(hide_password=True)
    except Exception:
        # not a URL SQLAlchemy can parse (a path, garbage): mask anything that looks like a password
        return _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", text))


def url_secrets(url: str) -> list[str]:
    """The passwords inside ``url``, to scrub them from driver error messages."""
    try:
        from sqlalchemy.engine import make_url

        u = make_url(url)
    except Exception:
        return []
    found = [u.password, u.query.get("password")]
    return [str(s) for s in found if isinstance(s, str) and s]
