"""Row <-> record mappings, derived from the dataclasses' fields: each record is defined once, and a new field
of ``TrialResult``, ``BestRecord`` or ``KeyState`` needs a column of the same name, nothing else.

A key's facts (``key_facts``) are every column of its key, kernel, shape and environment rows by name, plus
the names the records give three of them; ``BestRecord`` and ``KeyState`` take their fields from there."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any

from autotune.records import BestRecord, KeyState
from autotune.store.models import BestConfigRow, EnvironmentRow, KernelRow, ShapeRow, TrialRow, TuningKeyRow
from autotune.trial import TrialResult, TrialStatus, config_hash

_TRIAL_FIELDS = tuple(f.name for f in fields(TrialResult))
_BEST_FIELDS = tuple(f.name for f in fields(BestRecord))
#: BestRecord fields that the row keeps in another form
_BEST_DERIVED = {"dtypes", "updated_at"}
#: the best's interval and speedup fields (``autotune.stats``): None unless given
_BEST_STATS = ("ci_low_s", "ci_high_s", "speedup", "speedup_low", "speedup_high", "pairs")
_KEY_STATE_FIELDS = tuple(f.name for f in fields(KeyState))
#: KeyState fields that are counted over the key's trials and claims, not read from its rows
_KEY_STATE_COUNTED = {"counts", "measured", "running"}
#: KeyState fields read from the key's best row (``best_time_s`` is the row's ``time_s``)
_BEST_PREFIX = "best_"


def utc(dt: datetime | None) -> datetime | None:
    """Aware UTC (naive input is local time, as ``datetime.now()`` gives)."""
    return None if dt is None else dt.astimezone(timezone.utc)


def from_db_time(dt: datetime) -> datetime:
    """SQLite hands back naive UTC; Postgres aware times."""
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    """A plain-JSON copy (tuples -> lists, odd values -> str), keeping the key order."""
    return json.loads(json.dumps(dict(d), default=str))


def dtypes_key(dtypes: Mapping[str, str]) -> str:
    """Canonical JSON text of a dtypes mapping (part of the shape's identity)."""
    return json.dumps({str(k): str(v) for k, v in dtypes.items()}, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- trials


def trial_result(row: TrialRow) -> TrialResult:
    values = {name: getattr(row, name) for name in _TRIAL_FIELDS}
    values["status"] = TrialStatus(row.status)
    values["config"] = dict(row.config)
    values["measured"] = bool(row.measured)
    values["kernels"] = dict(row.kernels or {})
    return TrialResult(**values)


def trial_row(key_id: int, result: TrialResult, **extra: Any) -> TrialRow:
    values = {name: getattr(result, name) for name in _TRIAL_FIELDS}
    values["status"] = TrialStatus(result.status).value
    values["config"] = jsonable(result.config)
    values["kernels"] = jsonable(result.kernels) if result.kernels else None
    values["measured"] = bool(result.measured)
    # the store's one place that hashes a config: the column every claim and reuse looks it up by
    return TrialRow(key_id=key_id, config_hash=config_hash(result.config), **values, **extra)


# ---------------------------------------------------------------- a key's facts


def key_facts(key: TuningKeyRow, kernel: KernelRow, shape: ShapeRow, env: EnvironmentRow) -> dict[str, Any]:
    """Every column of a key's rows by name (the key's own win: its ``id``, its ``created_at``), plus
    ``key_id``, ``kernel_name`` (the kernel's name) and ``device_name`` (the environment's GPU name)."""
    facts: dict[str, Any] = {}
    for row in (env, kernel, shape, key):
        facts.update({c.key: getattr(row, c.key) for c in row.__table__.columns})
    facts.update(key_id=key.id, kernel_name=kernel.name, device_name=env.gpu_name)
    facts["dims"] = {str(k): int(v) for k, v in shape.dims.items()}
    facts["dtypes"] = dict(shape.dtypes)
    return facts


def key_state(
    facts: Mapping[str, Any],
    best: BestConfigRow | None,
    *,
    counts: dict[str, int],
    measured: int,
    running: int,
) -> KeyState:
    """A key's state: its facts, its best row's columns as ``best_<column>``, and the counts."""
    values: dict[str, Any] = {"counts": counts, "measured": measured, "running": running}
    for name in _KEY_STATE_FIELDS:
        if name in _KEY_STATE_COUNTED:
            continue
        if name.startswith(_BEST_PREFIX):
            values[name] = None if best is None else getattr(best, name[len(_BEST_PREFIX) :])
        else:
            values[name] = facts[name]
    values["created_at"] = from_db_time(values["created_at"])
    if values["best_config"] is not None:
        values["best_config"] = dict(values["best_config"])
    return KeyState(**values)


# ---------------------------------------------------------------- best configs


def best_of(
    facts: Mapping[str, Any],
    trial: TrialRow,
    *,
    time_s: float,
    samples: int,
    spread: float | None,
    updated_at: datetime,
    **stats: Any,
) -> BestRecord:
    """The best record of a key whose fastest config is ``trial``'s, at median ``time_s`` over ``samples``
    measurements: the key's facts, plus what the trial and the median give."""
    measured: dict[str, Any] = {
        "trial_id": trial.id,
        "config": dict(trial.config),
        "time_s": time_s,
        # throughput at the median time (the trial's own was at its own time)
        "tflops": trial.tflops * trial.time_s / time_s if trial.tflops and trial.time_s else None,
        "samples": samples,
        "spread": spread,
        "updated_at": updated_at,
        **{name: None for name in _BEST_STATS},
        **stats,
    }
    values = {name: measured[name] if name in measured else facts[name] for name in _BEST_FIELDS}
    return BestRecord(**values)


def best_columns(record: BestRecord) -> dict[str, Any]:
    """The best_configs row of ``record`` (every column but ``id``): its fields by name, the dtypes as the
    canonical key."""
    values = {name: getattr(record, name) for name in _BEST_FIELDS if name not in _BEST_DERIVED}
    values["config"] = jsonable(record.config)
    values["dims"] = dict(record.dims)
    values["dtypes_key"] = dtypes_key(record.dtypes)
    values["updated_at"] = utc(record.updated_at)
    return values


def best_record(row: BestConfigRow) -> BestRecord:
    values = {name: getattr(row, name) for name in _BEST_FIELDS if name not in _BEST_DERIVED}
    values["dims"] = dict(row.dims)
    values["config"] = dict(row.config)
    return BestRecord(dtypes=json.loads(row.dtypes_key), updated_at=from_db_time(row.updated_at), **values)
