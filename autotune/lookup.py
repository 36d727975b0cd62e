"""Runtime lookup of tuned configs, for kernel code::

    cfg = autotune.best_config("fp8_gemm", M=m, N=n, K=k, default=DEFAULT_CFG)

It runs inside users' programs, on the launch path, so:

- it never raises: a missing, unreachable or un-migrated database logs ONE warning (per database and
  kernel) and returns ``default``;
- the first call for a (database, kernel, device) runs one read-only query that loads every best config
  of that kernel on that device; every later call is a dict hit (the answer per shape is cached too);
- importing this module imports neither SQLAlchemy (loaded on the first call) nor optuna, alembic, typer
  or torch, and never initializes CUDA.

The cache lives until ``clear_cache()`` (call it after tuning in the same process)."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from .env import current_device_name
from .shapes import format_shape, shape_distance

if TYPE_CHECKING:
    from .records import BestRecord
    from .store import Store

log = logging.getLogger(__name__)

#: (config, is_flat) where is_flat means a shallow copy is a full copy; None: nothing tuned -> default
_Answer = tuple[dict[str, Any], bool] | None

_answers: dict[tuple[Any, ...], _Answer] = {}  # (db, device, kernel, source_hash, sorted shape items)
_rows: dict[tuple[str, str, str], list[BestRecord]] = {}  # (url, kernel, device_name)
_stores: dict[str, Store] = {}
_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()
_SCALARS = (str, int, float, bool, type(None))


def best_config(
    kernel: str,
    *,
    default: Any = None,
    db: str | None = None,
    device: str = "",
    source_hash: str | None = None,
    **shape: int,
) -> dict[str, Any] | None:
    """The best tuned config of ``kernel`` for ``shape`` on this device, or ``default``.

    An exactly tuned shape wins; otherwise the nearest tuned shape (``autotune.shapes.shape_distance``).
    Among rows for that shape: the matching ``source_hash`` (a prefix is enough), then the torch/triton
    versions this process runs (when already imported), then the newest. Returns a copy."""
    key: tuple[Any, ...] | None = None
    try:
        key = (db, device, kernel, source_hash, tuple(sorted(shape.items())))
        try:
            answer = _answers[key]
        except KeyError:
            with _lock:
                answer = _answers[key] = _resolve(kernel, db, device, source_hash, shape)
        if answer is None:
            return default
        config, flat = answer
        return dict(config) if flat else copy.deepcopy(config)
    except Exception as e:  # the promise: never raise into kernel code
        _warn_once(str(db), kernel, e)
        if key is not None:
            try:
                _answers[key] = None  # the same call would fail the same way: answer it from the cache
            except TypeError:  # unhashable shape values
                pass
        return default


def clear_cache() -> None:
    """Forget every cached answer, warning and database connection."""
    with _lock:
        stores = list(_stores.values())
        _answers.clear()
        _rows.clear()
        _stores.clear()
        _warned.clear()
    for store in stores:
        store.close()


def _warn_once(where: str, kernel: str, e: BaseException) -> None:
    if (where, kernel) in _warned:
        return
    _warned.add((where, kernel))
    from .errors import AutotuneError

    reason = str(e) if isinstance(e, AutotuneError) else f"{type(e).__name__}: {e}"
    log.warning(
        "autotune: no tuned config for kernel %r (%s); using the default config. This warning is shown once.",
        kernel,
        reason,
    )


def _loaded_version(module: str) -> str | None:
    """The version of an already-imported module (never imports it), without a local '+...' suffix."""
    v = getattr(sys.modules.get(module), "__version__", None)
    return str(v).split("+")[0] if v else None


def _is_export_file(db: str) -> bool:
    return db.endswith(".json") and "://" not in db


def _resolve(
    kernel: str, db: str | None, device: str, source_hash: str | None, shape: dict[str, Any]
) -> _Answer:
    device_name = current_device_name(device)
    source = db or os.environ.get("AUTOTUNE_DB", "")
    if _is_export_file(source):
        # A file written by `autotune export`: no database and no SQLAlchemy on the deployment's launch path.
        where = source
        rows = _load_export(source, kernel, device_name)
    else:
        from .store import mask_url, normalize_db_url
        from .store.urls import default_db_url

        url = normalize_db_url(db) if db else default_db_url()
        where = mask_url(url)
        rows = _load(url, kernel, device_name)
    if rows is None:
        return None
    if not rows:
        log.debug("best_config(%r): nothing tuned on %r in %s", kernel, device_name, where)
        return None
    want = {str(k): int(v) for k, v in shape.items()}
    candidates = [r for r in rows if r.dims == want]
    exact = bool(candidates)
    if not exact:
        scored = [(shape_distance(want, r.dims), r) for r in rows]
        scored = [(d, r) for d, r in scored if math.isfinite(d)]
        if not scored:
            log.debug("best_config(%r): no tuned shape has the dims of %s", kernel, format_shape(want))
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
    return best.config, flat


def _load_export(path: str, kernel: str, device_name: str) -> list[BestRecord] | None:
    """Rows of an exported file (read once per process and path); None when the file cannot be used."""
    if (path, kernel, device_name) in _rows:
        return _rows[path, kernel, device_name]
    from .records import EXPORT_FORMAT, BestRecord

    try:
        with open(path) as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
            raise ValueError(f"{path} is not a file written by `autotune export`")
        records = [BestRecord.from_json(r) for r in data["records"]]
        rows: list[BestRecord] | None = [
            r for r in records if r.kernel_name == kernel and r.device_name == device_name
        ]
    except Exception as e:
        _warn_once(path, kernel, e)
        rows = None
    _rows[path, kernel, device_name] = rows or []
    return rows


def _load(url: str, kernel: str, device_name: str) -> list[BestRecord] | None:
    """Every best config of a kernel on a device (one query, cached); None when the database failed."""
    if (url, kernel, device_name) in _rows:
        return _rows[url, kernel, device_name]
    from .store import Store, mask_url

    try:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = Store(url, readonly=True)
        rows: list[BestRecord] | None = store.best(kernel, device_name=device_name)
    except Exception as e:
        _warn_once(mask_url(url), kernel, e)
        rows = None
    # a failure is cached too: a broken database costs one attempt per kernel, not one per call
    _rows[url, kernel, device_name] = rows or []
    return rows
