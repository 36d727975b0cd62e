"""Shapes seen in production (opt-in): ``best_config`` lookups that fell back (to the nearest tuned shape or
to the default) are counted in-process and flushed to the database's ``autotune_shape_requests`` in the
background (every ``FLUSH_INTERVAL_S``) and at exit; the next nightly job tunes them (PyTorch TunableOp's
record-then-tune loop, shared by every process through the database).

Turned on by ``AUTOTUNE_RECORD`` or ``best_config(..., record=...)`` (the keyword wins):

- ``1`` / ``True``: record into the database the lookup reads;
- a database URL or SQLite path: record there (needed when the lookup reads an ``autotune export`` file);
- ``0`` / ``False`` / unset: off.

It keeps the lookup's promises: a cache hit costs one dict lookup more (the count is a plain ``+= 1``; no
clock, no lock, no I/O); the first lookup of a missed shape adds a dict entry; the database is written only
by a daemon thread (and, bounded by ``EXIT_FLUSH_S``, at exit); every failure is logged once and dropped.
Importing it imports nothing heavy: SQLAlchemy comes with the first flush, in the flushing thread."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from autotune import settings

log = logging.getLogger(__name__)

#: seconds between two background flushes
FLUSH_INTERVAL_S = 30.0
#: seconds after a shape is first missed before it is written: a running ``autotune serve`` can start on it
#: at once (production waits for it), while the misses of a burst still go in one transaction
NEW_MISS_FLUSH_S = 1.0
#: seconds the interpreter's exit waits at most for the last flush
EXIT_FLUSH_S = 3.0

_OFF = ("", "0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


class _Miss:
    """One (lookup key) that fell back: counted on every lookup, flushed as a delta."""

    __slots__ = ("count", "device_name", "dims", "first_seen", "flushed", "kernel", "target")

    def __init__(self, target: str, kernel: str, device_name: str, dims: dict[str, int]) -> None:
        self.target = target
        self.kernel = kernel
        self.device_name = device_name
        self.dims = dims
        self.count = 0
        self.flushed = 0
        self.first_seen = datetime.now(timezone.utc)


#: lookup key -> its miss; ``autotune.lookup`` checks ``if misses`` (one global) before anything else
misses: dict[tuple[Any, ...], _Miss] = {}
_env_target: list[str | None] = []  # [] = not read yet; [value] once read
_flush_lock = threading.Lock()
_thread: threading.Thread | None = None
_new_miss = threading.Event()
_warned: set[str] = set()


def count(key: tuple[Any, ...], record: bool | str | None) -> None:
    """The hot path: one more lookup of a missed key (a no-op for a key that was not missed, or when this
    call does not record: ``record=None`` follows ``AUTOTUNE_RECORD``)."""
    m = misses.get(key)
    if m is not None and (record is not None or _env_setting() is not None):
        m.count += 1


def _env_setting() -> str | None:
    if not _env_target:
        _env_target.append(settings.record())
    return _env_target[0]


def target_of(record: bool | str | None, lookup_db: str | None) -> str | None:
    """Where a miss is recorded (a database URL), or None: not recording. ``lookup_db`` is the database
    the lookup reads (None when it reads an export file)."""
    setting: Any = _env_setting() if record is None else record
    if setting is None or setting is False:
        return None
    if setting is True or (isinstance(setting, str) and setting.lower() in _ON):
        env = _env_setting()
        if env is not None and env.lower() not in _ON:
            return env  # AUTOTUNE_RECORD names the database: used for record=True too
        return lookup_db
    if isinstance(setting, str) and setting.lower() in _OFF:
        return None
    return str(setting)


def consider(
    key: tuple[Any, ...],
    record: bool | str | None,
    lookup_db: str | None,
    kernel: str,
    device_name: str,
    shape: dict[str, Any],
    tuned: Sequence[Any],
) -> None:
    """The lookup's slow path: remember ``key`` when recording is on and its shape is not tuned exactly."""
    if key in misses:
        return
    target = target_of(record, lookup_db)
    if target is None:
        return
    dims = {str(k): int(v) for k, v in shape.items()}
    if any(r.dims == dims for r in tuned):  # the best records of the kernel on this device
        return
    misses[key] = _Miss(target, kernel, device_name, dims)
    _new_miss.set()
    _ensure_thread()


def _ensure_thread() -> None:
    global _thread
    if _thread is not None and _thread.is_alive():
        return
    with _flush_lock:
        if _thread is not None and _thread.is_alive():
            return
        try:
            _thread = threading.Thread(target=_flush_forever, name="autotune-record", daemon=True)
            _thread.start()
        except RuntimeError:  # interpreter shutting down: the exit flush (if any) takes the counts
            _thread = None


def _flush_forever() -> None:
    while True:
        if _new_miss.wait(FLUSH_INTERVAL_S):
            time.sleep(NEW_MISS_FLUSH_S)
        _new_miss.clear()
        flush()


def flush() -> int:
    """Write every count not yet written (one transaction per target database); returns how many lookups
    it wrote. Never raises (a failure is logged once per database; its counts are kept for the next
    flush). Called by the background thread and at exit; tests and short scripts may call it directly."""
    with _flush_lock:
        by_target: dict[str, list[tuple[_Miss, int]]] = {}
        for m in list(misses.values()):
            delta = m.count - m.flushed
            if delta > 0:
                by_target.setdefault(m.target, []).append((m, delta))
        written = 0
        now = datetime.now(timezone.utc)
        for target, items in by_target.items():
            try:
                _write(target, items, now)
            except Exception as e:
                _warn_once(target, e)
                continue
            for m, delta in items:
                m.flushed += delta
                written += delta
        return written


def _write(target: str, items: list[tuple[_Miss, int]], now: datetime) -> None:
    from autotune.shapes import format_shape
    from autotune.store import RequestCount, Store

    counts: dict[tuple[str, str, str], RequestCount] = {}
    for m, delta in items:
        shape_key = format_shape(m.dims)
        k = (m.kernel, shape_key, m.device_name)
        old = counts.get(k)
        counts[k] = RequestCount(
            m.kernel,
            shape_key,
            m.dims,
            m.device_name,
            delta + (old.count if old else 0),
            min(m.first_seen, old.first_seen) if old else m.first_seen,
            now,
        )
    store = _stores.get(target)
    if store is None:
        store = _stores[target] = Store(target)
    store.requests.add(list(counts.values()))


_stores: dict[str, Any] = {}


def _warn_once(target: str, e: BaseException) -> None:
    if target in _warned:
        return
    _warned.add(target)
    from autotune.store.urls import mask_secrets

    log.warning(
        "autotune: could not record untuned shapes in %s (%s); counts are kept and retried",
        mask_secrets(target),
        mask_secrets(f"{type(e).__name__}: {e}")[:300],
    )


def reset() -> None:
    """Forget the counts and re-read ``AUTOTUNE_RECORD`` (``autotune.lookup.clear_cache`` calls it)."""
    with _flush_lock:
        misses.clear()
        _env_target.clear()
        _warned.clear()


def _flush_at_exit() -> None:
    if not any(m.count > m.flushed for m in list(misses.values())):
        return
    try:
        t = threading.Thread(target=flush, name="autotune-record-exit", daemon=True)
        t.start()
    except RuntimeError:
        # Python 3.12+ starts no thread at shutdown: flush here (the store's timeouts bound it)
        flush()
        return
    t.join(EXIT_FLUSH_S)


atexit.register(_flush_at_exit)


def _forget_in_child() -> None:
    """After fork: the parent flushes what it counted; the child counts from here (its flusher thread did
    not come along)."""
    global _thread, _flush_lock
    _flush_lock = threading.Lock()
    _thread = None
    _stores.clear()
    for m in list(misses.values()):
        m.flushed = m.count


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
