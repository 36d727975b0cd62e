"""Database URLs: the default location, normalization and masking.

The ONE masker of the code base lives here: ``mask_url`` for a URL, ``mask_secrets`` for free text that may
quote URLs (our messages, drivers' messages, tracebacks), ``url_secrets`` for the passwords a driver
message may repeat. A password is masked whatever characters it contains: the user info of a URL runs to
the LAST ``@`` of the URL (so a raw ``@``, ``:`` or ``/`` in a password never leaks; a ``@`` in the
query or path may make us mask more than the password, never less).

Imports only the stdlib (and ``sqlalchemy.engine.url`` lazily), so the runtime lookup can use it cheaply."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from autotune import settings
from autotune.errors import StoreError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
#: where a URL starts inside free text
_URL_START = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
#: ?password=... / &password=... in a URL's query
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s]*", re.IGNORECASE)
#: password=... in a libpq conninfo string or a repr (password='...')
_KV_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&,;)'\"]+)", re.IGNORECASE)
_MASK = "***"
#: a part of a password between raw '@'s shorter than this is not scrubbed from driver messages on its own
_MIN_PIECE = 4


def default_db_path() -> Path:
    """``$AUTOTUNE_HOME/autotune.db``, else ``$XDG_DATA_HOME/autotune/autotune.db`` (``~/.local/share``)."""
    return settings.home().absolute() / "autotune.db"


def default_db_url() -> str:
    """``$AUTOTUNE_DB`` if set, else the default SQLite file (its directory is created on first write)."""
    env = settings.database()
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
        return "postgresql+psycopg://" + _encode_raw_at(text[m.end() :])
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


def _userinfo_end(rest: str) -> int:
    """The index of the ``@`` that ends the user info in ``rest`` (a URL after its ``scheme://``), or -1.

    The LAST ``@``: a raw ``@`` in a password (``u:p@ss@host``) stays in the user info. A URL whose
    authority is empty (``sqlite:///path``, ``postgresql:///db?host=...``) has no user info."""
    if not rest or rest[0] in "/?#":
        return -1
    return rest.rfind("@")


def _encode_raw_at(rest: str) -> str:
    """``user:p@ss@host/db`` -> ``user:p%40ss@host/db``, so SQLAlchemy and the driver see the host and the
    password the user meant (they split at the FIRST ``@``). Only when unambiguous: a password part with a
    ``/``, ``?`` or ``#`` as well is left alone (``u:p@h/db?x=a@b`` may be a query with an ``@``), and
    masked all the same."""
    at = _userinfo_end(rest)
    user, sep, password = rest[:at].partition(":") if at > 0 else ("", "", "")
    if not sep or "@" not in password or any(c in password for c in "/?#"):
        return rest
    return f"{user}:{password.replace('@', '%40')}{rest[at:]}"


def _mask_one(url: str) -> str:
    """One URL (the whole of ``url``) with its passwords masked."""
    m = _SCHEME.match(url)
    if m is not None:
        rest = url[m.end() :]
        at = _userinfo_end(rest)
        if at > 0:
            user, sep, password = rest[:at].partition(":")
            if sep and password:
                url = f"{url[: m.end()]}{user}:{_MASK}{rest[at:]}"
    return _QUERY_PASSWORD.sub(rf"\g<1>{_MASK}", url)


def mask_url(url: object) -> str:
    """``url`` with its password (user info, whatever characters it holds, or ``?password=``) replaced by
    ``***``; anything else is kept as written. Never raises."""
    try:
        return _mask_one(str(url))
    except Exception:  # pragma: no cover - str() of an odd object
        return "<unprintable database URL>"


def mask_secrets(text: object) -> str:
    """Free text with the password of every URL in it masked (and ``password=...`` of conninfo strings).

    A URL runs from its ``scheme://`` to the next whitespace or the next ``scheme://``, so several URLs
    in one message are masked one by one. Never raises."""
    try:
        text = str(text)
        starts = [m.start() for m in _URL_START.finditer(text)]
        if starts:
            parts = [text[: starts[0]]]
            for i, start in enumerate(starts):
                stop = starts[i + 1] if i + 1 < len(starts) else len(text)
                space = re.search(r"\s", text[start:stop])
                end = start + space.start() if space else stop
                parts.append(_mask_one(text[start:end]))
                parts.append(text[end:stop])
            text = "".join(parts)
        return _KV_PASSWORD.sub(rf"\g<1>{_MASK}", text)
    except Exception:  # pragma: no cover - str() of an odd object
        return "<unprintable message>"


def url_secrets(url: str) -> list[str]:
    """The passwords inside ``url`` (as written and decoded, and as SQLAlchemy parses them), longest first,
    to scrub them from driver error messages."""
    found: list[str] = []
    m = _SCHEME.match(url)
    if m is not None:
        rest = url[m.end() :]
        at = _userinfo_end(rest)
        if at > 0:
            _, sep, password = rest[:at].partition(":")
            if sep and password:
                found += [password, unquote(password)]
                # a parser that splits at the first '@' sees the rest of the password as the host
                for text in (password, unquote(password)):
                    found += [p for p in text.split("@") if len(p) >= _MIN_PIECE]
        for q in _QUERY_PASSWORD.finditer(url):
            value = url[q.end(1) : q.end()]
            found += [value, unquote(value)]
    try:
        from sqlalchemy.engine import make_url

        u = make_url(url)
        # where SQLAlchemy splits differently (at the first '@'), its password is a piece of the real one
        found += [
            p for p in (u.password, u.query.get("password")) if isinstance(p, str) and len(p) >= _MIN_PIECE
        ]
    except Exception:
        pass
    unique = {s for s in found if s and s != _MASK}
    return sorted(unique, key=lambda s: (-len(s), s))
