"""Runtime lookup of tuned configs, for kernel code::

    cfg = autotune.best_config("fp8_gemm", M=m, N=n, K=k, default=DEFAULT_CFG)

It runs inside users' programs, on the launch path, so:

- it never raises: a missing, unreachable, locked, un-migrated or newer-schema database logs ONE warning
  (per database and kernel) and returns ``default``;
- it never blocks for long: the first call for a (database, kernel, device) loads every best config of
  that kernel on that device in a background thread and waits for it at most ``AUTOTUNE_LOOKUP_TIMEOUT``
  seconds (default 1); past that it returns ``default`` and a later call uses the rows once they arrive.
  The load itself uses short timeouts (SQLite: a 0.25 s busy timeout, read-only and query-only;
  Postgres: a 2 s connect timeout, libpq's and psycopg's minimum, a 500 ms statement timeout and
  read-only transactions), so a background load ends within a few seconds whatever the database does;
- a failed load is remembered: lookups return ``default`` at once, until ``AUTOTUNE_LOOKUP_RETRY``
  seconds (default 60) have passed; then one call starts a new load in the background (without waiting
  for it) and the rows are used as soon as it succeeds;
- no I/O happens under the module's lock: a slow database delays only the first lookups of ITS
  (database, kernel, device); every other lookup, in any thread, goes on;
- every later call is a dict hit (the answer per shape is cached too);
- a shape that fell back (nothing tuned for it: the nearest tuned shape or ``default``) is re-checked:
  a call that finds its cached fallback older than ``AUTOTUNE_LOOKUP_RECHECK`` seconds (default 2) starts
  one look in the background whether that (database, kernel, device)'s bests changed (one small aggregate
  query: ``Trials.best_generation``), re-reads the rows only when they did, and returns the fallback at
  once; once the new rows arrive, the next call answers from them (the best config a tuning service wrote
  a few seconds ago). An export file is re-read every ``AUTOTUNE_LOOKUP_RETRY`` seconds. An exactly tuned
  answer is final: a hit never re-reads, and costs what it did (one dict look-up, one type check);
- an answer is ``exact`` only for the source hash asked for, when one is given: a config tuned for the
  same shape under another source hash is a fallback (``nearest``, from that shape), re-checked like one;
- importing this module imports neither SQLAlchemy (loaded on the first call) nor optuna, alembic, typer
  or torch, and never initializes CUDA.

The cache lives until ``clear_cache()`` (call it after tuning in the same process; tuned answers are
never re-read otherwise)."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from autotune import settings
from autotune.env import current_device_name
from autotune.runtime import requests_log as _requests
from autotune.shapes import closest, format_shape, shape_distance

if TYPE_CHECKING:
    from autotune.records import BestRecord
    from autotune.store import Store

log = logging.getLogger(__name__)

#: seconds the first lookup of a (database, kernel, device) waits for its rows [env: AUTOTUNE_LOOKUP_TIMEOUT]
DEFAULT_TIMEOUT_S = settings.LOOKUP_TIMEOUT_S
#: seconds a failed load is remembered before one lookup tries again, and seconds between re-reads for
#: a shape that fell back [env: AUTOTUNE_LOOKUP_RETRY]
DEFAULT_RETRY_S = settings.LOOKUP_RETRY_S
#: SQLite busy timeout of the lookup's connections (a locked file fails in this time, not in 60 s)
SQLITE_BUSY_TIMEOUT_S = 0.25
#: Postgres connect timeout: 2 s is the minimum libpq and psycopg honour (a smaller value counts as 2)
PG_CONNECT_TIMEOUT_S = 2
#: Postgres statement timeout of the lookup's connections
PG_STATEMENT_TIMEOUT_MS = 500

#: the recorder's misses (a dict, empty unless recording) and its counter: one global each on the hot path
_misses = _requests.misses
_count_miss = _requests.count

#: (config, is_flat) where is_flat means a shallow copy is a full copy; None: nothing tuned -> default
#: (the config, whether it is flat (a dict copy suffices), the tuned shape it came from ("" when exact))
_Answer = tuple[dict[str, Any], bool, str] | None
#: how ``best_config_match`` says an answer was found
EXACT, NEAREST, DEFAULT = "exact", "nearest", "default"


class _Fallback:
    """The cached answer of a shape the rows of ``load`` do not hold exactly: the nearest tuned shape's
    (``answer``) or None (``default``). Unlike an exact answer (a plain tuple), it is re-checked: a call
    that finds it answers again from newer rows, or starts a re-read of them when they are stale."""

    __slots__ = ("answer", "load")

    def __init__(self, answer: _Answer, load: _Load) -> None:
        self.answer = answer
        self.load = load


class _Load:
    """One load of the rows of a (source, kernel, device), run in a thread; ``rows`` is None until it
    succeeded (pending or failed)."""

    __slots__ = (
        "check",
        "deadline",
        "done",
        "failed_at",
        "generation",
        "lkey",
        "prepare",
        "recheck_at",
        "refresh",
        "rows",
        "started",
        "url",
        "warn_key",
        "where",
    )

    def __init__(
        self,
        started: float,
        deadline: float,
        where: str,
        warn_key: str,
        lkey: tuple[str, str, str] = ("", "", ""),
        prepare: Callable[[_Load], list[BestRecord]] | None = None,
    ) -> None:
        self.started = started
        self.deadline = deadline  # the first caller waits until then
        self.done = threading.Event()
        self.rows: list[BestRecord] | None = None
        self.failed_at = math.inf  # set when it fails
        #: the database URL and its masked form, resolved in the load's thread (that resolving imports
        #: SQLAlchemy, which must count in the first call's bound); None for an export file
        self.url: str | None = None
        self.where = where
        #: its warnings are shown once per (db as given, kernel), as those of the call itself
        self.warn_key = warn_key
        self.lkey = lkey  # its key in _loads
        self.prepare = prepare  # reads the rows (in a thread); a re-read calls it again
        #: the re-read of these rows running (or last run) for a shape that fell back; None: none yet
        self.refresh: _Load | None = None
        #: when a shape that fell back on these rows may start a re-read of them (set when they arrive:
        #: the retry interval later; pushed on while a re-read runs or after it failed). A plain float,
        #: so that a cached fallback costs one clock read and one comparison
        self.recheck_at = math.inf
        #: a cheap look whether the rows changed (set by ``prepare`` where the source has one: a database),
        #: and what it said when these rows were read
        self.check: Callable[[], Any] | None = None
        self.generation: Any = None

    def due(self, now: float, retry_s: float) -> bool:
        """Whether a new load should replace this one: failed and the retry interval passed, or hung for
        longer than the retry interval."""
        if self.done.is_set():
            return self.rows is None and now >= self.failed_at + retry_s
        return now >= self.started + max(retry_s, 2 * PG_CONNECT_TIMEOUT_S)


#: (db, device, kernel, source_hash, sorted shape items) -> the answer, or the _Load it waits on
_answers: dict[tuple[Any, ...], _Answer | _Load] = {}
_loads: dict[tuple[str, str, str], _Load] = {}  # (db as given or export path, kernel, device_name)
_stores: dict[str, Store] = {}
_warned: set[tuple[str, ...]] = set()
_lock = threading.Lock()  # guards the dicts above; never held during I/O
_SCALARS = (str, int, float, bool, type(None))


def best_config(
    kernel: str,
    *,
    default: Any = None,
    db: str | None = None,
    device: str = "",
    source_hash: str | None = None,
    record: bool | str | None = None,
    **shape: int,
) -> dict[str, Any] | None:
    """The best tuned config of ``kernel`` for ``shape`` on this device, or ``default``.

    An exactly tuned shape wins; otherwise the nearest tuned shape (``autotune.shapes.shape_distance``).
    Among rows for that shape: the matching ``source_hash`` (a prefix is enough), then the torch/triton
    versions this process runs (when already imported), then the newest. Returns a copy.

    ``record``: count this lookup in ``autotune_shape_requests`` when it falls back (nearest shape or
    default), for the next nightly job (``autotune.requests_log``): None follows ``AUTOTUNE_RECORD``; True
    records into the database read here; a URL or path records there; False never records."""
    return best_config_match(
        kernel, default=default, db=db, device=device, source_hash=source_hash, record=record, **shape
    )[0]


def best_config_match(
    kernel: str,
    *,
    default: Any = None,
    db: str | None = None,
    device: str = "",
    source_hash: str | None = None,
    record: bool | str | None = None,
    **shape: int,
) -> tuple[Any, str, str]:
    """``best_config``'s answer and how it was found: (the config or ``default``, "exact" | "nearest" |
    "default", the tuned shape a nearest answer came from, else ""). Same promise: never raises."""
    key: tuple[Any, ...] | None = None
    try:
        key = (db, device, kernel, source_hash, tuple(sorted(shape.items())))
        try:
            answer = _answers[key]
        except KeyError:
            answer = _lookup(key, kernel, db, device, source_hash, shape, record)
        else:
            # a hit (an exactly tuned shape: a tuple) costs one type check here; the rest is for misses
            if type(answer) is not tuple and answer is not None:
                if type(answer) is _Fallback:
                    load = answer.load
                    if _loads.get(load.lkey) is not load or time.monotonic() >= load.recheck_at:
                        answer = _recheck(answer, key, kernel, db, device, source_hash, shape, record)
                elif answer.rows is None and not answer.due(time.monotonic(), _retry_s()):
                    return default, DEFAULT, ""  # waiting for rows, or their load failed
                else:
                    answer = _lookup(key, kernel, db, device, source_hash, shape, record)
        if _misses and record is not False:  # recording, and some lookup fell back: count it
            _count_miss(key, record)
        if type(answer) is not tuple:
            if type(answer) is not _Fallback or answer.answer is None:
                return default, DEFAULT, ""  # None, a _Load, or nothing near
            answer = answer.answer
        config, flat, nearest = answer
        return (dict(config) if flat else copy.deepcopy(config)), NEAREST if nearest else EXACT, nearest
    except Exception as e:  # the promise: never raise into kernel code
        _warn_once((str(db), kernel), kernel, e)
        if key is not None:
            try:
                _answers[key] = None  # the same call would fail the same way: answer it from the cache
            except TypeError:  # unhashable shape values
                pass
        return default, DEFAULT, ""


def clear_cache() -> None:
    """Forget every cached answer, warning and database connection (loads still running are orphaned:
    their results are dropped)."""
    with _lock:
        stores = list(_stores.values())
        _answers.clear()
        _loads.clear()
        _stores.clear()
        _warned.clear()
    _requests.reset()
    for store in stores:
        store.close()


# ---------------------------------------------------------------- settings


def _timeout_s() -> float:
    return settings.lookup_timeout_s()  # lenient: a bad value warns once and means the default


def _retry_s() -> float:
    return settings.lookup_retry_s()


# ---------------------------------------------------------------- the slow path (a cache miss)


def _lookup(
    key: tuple[Any, ...],
    kernel: str,
    db: str | None,
    device: str,
    source_hash: str | None,
    shape: dict,
    record: bool | str | None = None,
) -> _Answer | _Load | _Fallback:
    device_name = current_device_name(device)
    source = db or settings.database() or ""
    if _is_export_file(source):
        # A file written by `autotune export`: no database and no SQLAlchemy on the deployment's launch path.
        def prepare(load: _Load) -> list[BestRecord]:
            return _read_export(source, kernel, device_name)

        load = _rows_of((source, kernel, device_name), (source, str(db)), kernel, prepare)
    else:

        def prepare(load: _Load) -> list[BestRecord]:
            # in the load's thread: importing the store (SQLAlchemy, the driver) takes from 0.1 s to
            # seconds, and the first call's bound (AUTOTUNE_LOOKUP_TIMEOUT) must hold it too
            from autotune.store.urls import default_db_url, mask_url, normalize_db_url

            url = normalize_db_url(db) if db else default_db_url()
            load.url, load.where = url, mask_url(url)
            store = _store_for(url)
            load.check = lambda: store.trials.best_generation(kernel, device_name)
            load.generation = load.check()  # before the rows: a best stored in between is seen next time
            return _read_db(store, kernel, device_name)

        load = _rows_of((f"db:{source}", kernel, device_name), ("the database", str(db)), kernel, prepare)
    where, lookup_db = load.where, load.url
    if load.rows is None:  # pending or failed: the default for now, from the cache
        _answers[key] = load
        return load
    answer: _Answer | _Fallback = _choose(kernel, load.rows, where, device_name, source_hash, shape)
    if answer is None or answer[2]:  # nearest or nothing: re-checked later (a tuning may come)
        answer = _Fallback(answer, load)
    elif _misses:
        # a recorded miss that a re-read found tuned is no miss any more: stop counting it (the lookups
        # counted since the last flush go with it; the shape is served tuned, nothing waits on them)
        _misses.pop(key, None)
    _answers[key] = answer
    _requests.consider(key, record, lookup_db, kernel, device_name, shape, load.rows)
    return answer


def _rows_of(
    lkey: tuple[str, str, str],
    names: tuple[str, str],
    kernel: str,
    prepare: Callable[[_Load], list[BestRecord]],
) -> _Load:
    """The load of ``lkey``'s rows: started here when there is none (or the last one failed long enough
    ago); the first load is waited for until its deadline, a retry is not waited for. ``names``: where it
    loads from as messages say it, until the load resolves it, and its warnings' key."""
    now = time.monotonic()
    load = _loads.get(lkey)
    start = False
    if load is None or load.due(now, _retry_s()):
        stale = load
        with _lock:  # only to decide who starts it
            load = _loads.get(lkey)
            if load is None or load is stale:
                wait = _timeout_s() if stale is None else 0.0
                load = _loads[lkey] = _Load(now, now + wait, *names, lkey, prepare)
                start = True
        if start:
            _start(load, kernel)
    if not load.done.is_set():
        remaining = load.deadline - time.monotonic()
        if remaining > 0:
            load.done.wait(remaining)
        if not load.done.is_set() and start and load.deadline > load.started:
            _warn_once(
                ("slow", load.warn_key, kernel),
                kernel,
                TimeoutError(
                    f"{_named(load)} did not answer within {load.deadline - load.started:g} s "
                    "(AUTOTUNE_LOOKUP_TIMEOUT): answering the default until its rows arrive"
                ),
            )
    return load


def _named(load: _Load) -> str:
    """Where ``load`` reads, as a message says it: "the database" until its URL is resolved (in the load's
    thread, which may be what did not answer in time), then the masked URL; an export file by its path."""
    if load.url is not None:
        return f"database {load.where}"
    return load.where if load.where != "the database" else "the database (still connecting)"


def _recheck(
    fallback: _Fallback,
    key: tuple[Any, ...],
    kernel: str,
    db: str | None,
    device: str,
    source_hash: str | None,
    shape: dict,
    record: bool | str | None,
) -> _Answer | _Load | _Fallback:
    """A cached fallback, asked again: answered from newer rows when a re-read brought some; else, when
    its rows are stale, one re-read starts in the background (never waited for) and the fallback stands."""
    load = fallback.load
    current = _loads.get(load.lkey)
    if current is not load:
        # newer rows arrived: answer from them; or clear_cache() ran meanwhile: a first lookup again
        if current is None or current.rows is not None:
            return _lookup(key, kernel, db, device, source_hash, shape, record)
        return fallback
    now = time.monotonic()
    if now >= load.recheck_at:
        _refresh(load, kernel, now)
    return fallback


def _refresh(load: _Load, kernel: str, now: float) -> None:
    """Re-read ``load``'s rows in a thread; they replace it in ``_loads`` when the re-read succeeds."""
    # a re-read that hangs (bounded by the timeouts, but a file system may hang) is replaced later
    hung_at = now + max(_retry_s(), 2 * PG_CONNECT_TIMEOUT_S)
    with _lock:  # only to decide who starts it
        if now < load.recheck_at or _loads.get(load.lkey) is not load:
            return  # another call started it
        load.recheck_at = hung_at
        refresh = load.refresh = _Load(now, now, load.where, load.warn_key, load.lkey, load.prepare)
    _start(refresh, kernel, replaces=load)


def _start(load: _Load, kernel: str, replaces: _Load | None = None) -> None:
    """Run ``load`` in a thread; ``replaces``: the loaded rows it re-reads (kept when it fails)."""
    prepare = load.prepare
    assert prepare is not None

    def run() -> None:
        if replaces is not None:
            _refresh_run(load, replaces, kernel, prepare)
            return
        try:
            rows = prepare(load)
        except BaseException as e:  # e.g. no driver installed: fails the same way until the retry
            _finish(load, None, kernel, e)
        else:
            _finish(load, rows, kernel, None)

    try:
        threading.Thread(target=run, name=f"autotune-lookup-{kernel}", daemon=True).start()
    except RuntimeError:  # no new threads (interpreter shutting down): load here, bounded by the timeouts
        if replaces is None:
            run()
        else:  # a re-read is never worth blocking the caller: counted as failed, tried again later
            load.failed_at = time.monotonic()
            replaces.recheck_at = load.failed_at + _retry_s()
            load.done.set()


def _recheck_after(load: _Load) -> float:
    """Seconds until a shape that fell back on ``load``'s rows looks again: a cheap look where there is
    one, else a whole re-read (an export file), less often."""
    return settings.lookup_recheck_s() if load.check is not None else _retry_s()


def _finish(load: _Load, rows: list[BestRecord] | None, kernel: str, error: BaseException | None) -> None:
    now = time.monotonic()
    load.recheck_at = now + (_recheck_after(load) if error is None else _retry_s())
    if error is not None:
        _warn_once((load.warn_key, kernel), kernel, error)
        load.failed_at = now
    load.rows = rows
    load.done.set()


def _refresh_run(
    load: _Load, replaces: _Load, kernel: str, prepare: Callable[[_Load], list[BestRecord]]
) -> None:
    """A re-read: on success its rows replace ``replaces`` (unless clear_cache() or another load came
    first); on failure the rows loaded before stay in use, and the next re-read waits the retry interval."""
    try:
        if replaces.check is not None and replaces.check() == replaces.generation:
            # nothing stored, replaced or deleted since: the rows stand, and the next look is as cheap
            replaces.recheck_at = time.monotonic() + _recheck_after(replaces)
            load.done.set()
            return
        rows = prepare(load)
    except BaseException as e:
        retry_s = _retry_s()
        _warn_refresh_once(load, kernel, e, retry_s)
        load.failed_at = time.monotonic()
        replaces.recheck_at = load.failed_at + retry_s
        load.done.set()
        return
    load.recheck_at = time.monotonic() + _recheck_after(load)
    load.rows = rows
    with _lock:
        if _loads.get(load.lkey) is replaces:
            _loads[load.lkey] = load
    load.done.set()


def _store_for(url: str) -> Store:
    """The lookup's read-only Store of ``url``, with the lookup's short timeouts."""
    store = _stores.get(url)
    if store is not None:
        return store
    from sqlalchemy import event

    from autotune.store import Store

    store = Store(url, readonly=True)
    if store.db.is_sqlite:
        event.listen(store.db.engine, "do_connect", _sqlite_connect_params)
        event.listen(store.db.engine, "connect", _sqlite_query_only)
    else:
        event.listen(store.db.engine, "do_connect", _pg_connect_params)
    with _lock:
        kept = _stores.setdefault(url, store)
    if kept is not store:
        store.close()
    return kept


def _sqlite_connect_params(dialect: Any, conn_rec: Any, cargs: Any, cparams: dict[str, Any]) -> None:
    cparams["timeout"] = SQLITE_BUSY_TIMEOUT_S


def _sqlite_query_only(dbapi_conn: Any, conn_rec: Any) -> None:
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA query_only=ON")
    finally:
        cur.close()


def _pg_connect_params(dialect: Any, conn_rec: Any, cargs: Any, cparams: dict[str, Any]) -> None:
    try:
        given = int(float(cparams.get("connect_timeout") or 0))
    except (TypeError, ValueError):
        given = 0
    cparams["connect_timeout"] = min(given, PG_CONNECT_TIMEOUT_S) if given > 0 else PG_CONNECT_TIMEOUT_S
    # later -c settings win over earlier ones (the URL's own options, the store's read-only one)
    ours = f"-c default_transaction_read_only=on -c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    cparams["options"] = f"{cparams.get('options') or ''} {ours}".strip()


# ---------------------------------------------------------------- reading (in the load's thread)


def _read_db(store: Store, kernel: str, device_name: str) -> list[BestRecord]:
    """Every best config of a kernel on a device; raises for a database of a newer schema."""
    rows = store.trials.best(kernel, device_name=device_name)
    revision = _revision(store)
    known = _known_revisions()
    if revision is not None and known and not set(revision.split(",")) <= known:
        # a newer autotune migrated it: its rows may not mean what we think. The store words the error
        # (this imports Alembic, on this rare path only).
        store.schema.check()
        from autotune.errors import StoreError

        raise StoreError(
            f"database {store.masked_url} is at revision {revision}, which this autotune does not know: "
            "a newer autotune upgraded it; upgrade autotune to use this database"
        )
    return rows


def _revision(store: Store) -> str | None:
    """The schema revision of the database (read without Alembic), or None when it cannot be read."""
    from autotune.store.models import VERSION_TABLE

    try:
        with store.db.engine.connect() as conn:
            revs = sorted(str(r[0]) for r in conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}"))
        return ",".join(revs) or None
    except Exception:
        return None


@lru_cache(maxsize=1)
def _known_revisions() -> frozenset[str]:
    """The revisions of this autotune's migrations, read from their files (importing Alembic would make
    the lookup heavy); empty when they cannot be read (then no revision check)."""
    try:
        from autotune.store import migrations_dir

        pattern = re.compile(r"^revision\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
        found = set()
        for path in (migrations_dir() / "versions").glob("*.py"):
            m = pattern.search(path.read_text(encoding="utf-8"))
            if m:
                found.add(m.group(1))
        return frozenset(found)
    except Exception:
        return frozenset()


def _read_export(path: str, kernel: str, device_name: str) -> list[BestRecord]:
    """Rows of a file written by ``autotune export``."""
    from autotune.records import EXPORT_FORMAT, EXPORT_VERSION, BestRecord

    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ValueError(f"{path} is not a file written by `autotune export`")
    if data.get("version") != EXPORT_VERSION:
        raise ValueError(
            f"{path} is export format version {data.get('version')!r:.20}; this autotune reads version "
            f"{EXPORT_VERSION}: export it again with this autotune"
        )
    records = [BestRecord.from_json(r) for r in data["records"]]
    return [r for r in records if r.kernel_name == kernel and r.device_name == device_name]


# ---------------------------------------------------------------- choosing (no I/O)


def _warn_once(what: tuple[str, ...], kernel: str, e: BaseException) -> None:
    with _lock:
        if what in _warned:
            return
        _warned.add(what)
    from autotune.errors import AutotuneError

    reason = str(e) if isinstance(e, (AutotuneError, TimeoutError)) else f"{type(e).__name__}: {e}"
    masker = getattr(sys.modules.get("autotune.store.urls"), "mask_secrets", None)
    if masker is not None:  # loaded whenever a database URL was involved; an export file needs none
        reason = masker(reason)
    log.warning(
        "autotune: no tuned config for kernel %r (%s); using the default config. This warning is shown once.",
        kernel,
        reason,
    )


def _warn_refresh_once(load: _Load, kernel: str, e: BaseException, retry_s: float) -> None:
    """A failed re-read: the rows read before still answer, so this is not ``_warn_once``'s "default"."""
    what = ("refresh", load.warn_key, kernel)
    with _lock:
        if what in _warned:
            return
        _warned.add(what)
    reason = f"{type(e).__name__}: {e}"
    masker = getattr(sys.modules.get("autotune.store.urls"), "mask_secrets", None)
    if masker is not None:
        reason = masker(reason)
    log.warning(
        "autotune: re-reading %s for kernel %r failed (%.300s); the rows read before stay in use and it is "
        "tried again every %g s (AUTOTUNE_LOOKUP_RETRY). This warning is shown once.",
        load.where,
        kernel,
        reason,
        retry_s,
    )


def _warn_unknown_dims(kernel: str, want: dict[str, int], rows: list[BestRecord]) -> None:
    """A dimension name no tuned shape of the kernel has (``KK=256`` for ``K``) is a typo in the caller's
    code that would silently give the default config forever: say so once per kernel and set of names."""
    known = {name for r in rows for name in r.dims}
    unknown = [name for name in want if name not in known]
    if not unknown:
        return  # the names are right (the tuned shapes' dims are not comparable): no typo to report
    what = ("dims", kernel, *sorted(want))
    with _lock:
        if what in _warned:
            return
        _warned.add(what)
    params = next(iter(rows)).dims
    hints = []
    for name in unknown:
        hint = closest(name, [p for p in known if p not in want])
        hints.append(f"{name} (did you mean {hint}?)" if hint else name)
    log.warning(
        "autotune: best_config(%r): unknown dimension %s: the tuned shapes of %r are %s; using the default "
        "config. This warning is shown once.",
        kernel,
        ", ".join(hints),
        kernel,
        ",".join(params),
    )


def _loaded_version(module: str) -> str | None:
    """The version of an already-imported module (never imports it), without a local '+...' suffix."""
    v = getattr(sys.modules.get(module), "__version__", None)
    return str(v).split("+")[0] if v else None


def _is_export_file(db: str) -> bool:
    return db.endswith(".json") and "://" not in db


def _choose(
    kernel: str,
    rows: list[BestRecord],
    where: str,
    device_name: str,
    source_hash: str | None,
    shape: dict[str, Any],
) -> _Answer:
    if not rows:
        log.debug("best_config(%r): nothing tuned on %r in %s", kernel, device_name, where)
        return None
    want = {str(k): int(v) for k, v in shape.items()}
    candidates = [r for r in rows if r.dims == want]
    # tuned for this shape, but (when a source hash is asked for) maybe only under another source
    exact = bool(candidates) and (
        source_hash is None or any(r.source_hash.startswith(source_hash) for r in candidates)
    )
    if not candidates:
        scored = [(shape_distance(want, r.dims), r) for r in rows]
        scored = [(d, r) for d, r in scored if math.isfinite(d)]
        if not scored:
            log.debug("best_config(%r): no tuned shape has the dims of %s", kernel, format_shape(want))
            _warn_unknown_dims(kernel, want, rows)
            return None
        nearest = min(d for d, _ in scored)
        candidates = [r for d, r in scored if d == nearest]

    torch_v, triton_v = _loaded_version("torch"), _loaded_version("triton")

    def preference(r: BestRecord) -> tuple[Any, ...]:
        return (
            source_hash is not None and r.source_hash.startswith(source_hash),
            torch_v is not None and r.torch == torch_v,
            triton_v is not None and r.triton == triton_v,
            r.updated_at,
        )

    best = max(candidates, key=preference)
    _say_fallback(kernel, want, best, exact, source_hash)
    if (torch_v and best.torch != torch_v) or (triton_v and best.triton != triton_v):
        log.debug(
            "best_config(%r): using a config tuned with torch %s / triton %s (running torch %s / triton %s)",
            kernel,
            best.torch,
            best.triton,
            torch_v or "-",
            triton_v or "-",
        )
    flat = all(isinstance(v, _SCALARS) for v in best.config.values())
    return best.config, flat, "" if exact else str(best.shape_key)


def _say_fallback(
    kernel: str, want: dict[str, int], best: BestRecord, exact: bool, source_hash: str | None
) -> None:
    if not exact:
        log.debug(
            "best_config(%r): shape %s is not tuned; using the nearest tuned shape %s",
            kernel,
            format_shape(want),
            best.shape_key,
        )
    if source_hash is not None and not best.source_hash.startswith(source_hash):
        log.debug(
            "best_config(%r): nothing tuned for source %s; using a config tuned for source %s",
            kernel,
            source_hash[:12],
            best.source_hash[:12],
        )


def _forget_loads_in_child() -> None:
    """After fork: the loading threads did not come along, so their loads would stay pending forever; the
    module lock may have been held by one of them."""
    global _lock
    _lock = threading.Lock()
    for lkey, load in list(_loads.items()):
        if not load.done.is_set():
            del _loads[lkey]
        elif load.refresh is not None and not load.refresh.done.is_set():
            load.refresh = None  # its thread did not come along: the next fallback starts another
            load.recheck_at = 0.0
    for key, answer in list(_answers.items()):
        if type(answer) is _Load and not answer.done.is_set():
            del _answers[key]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loads_in_child)
