"""Row <-> record mappings, derived from the dataclasses' fields (each record is defined once: a new field
of ``TrialResult`` or ``BestRecord`` needs a column of the same name, nothing else)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any

from autotune.records import BestRecord
from autotune.store.models import BestConfigRow, TrialRow
from autotune.trial import TrialResult, TrialStatus, config_hash

_TRIAL_FIELDS = tuple(f.name for f in fields(TrialResult))
_BEST_FIELDS = tuple(f.name for f in fields(BestRecord))
#: BestRecord fields that the row keeps in another form
_BEST_DERIVED = {"dtypes", "updated_at"}


def utc(dt: datetime | None) -> datetime | None:
    """Aware UTC (naive input is local time, as ``datetime.now()`` gives)."""
    return None if dt is None else dt.astimezone(timezone.utc)


def from_db_time(dt: datetime) -> datetime:
    """SQLite hands back naive UTC; Postgres aware times."""
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    """A plain-JSON copy (tuples -> lists, odd values -> str), keeping the key order."""
    return json.loads(json.dumps(dict(d), default=str))


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
    return TrialRow(key_id=key_id, config_hash=config_hash(result.config), **values, **extra)


def best_record(row: BestConfigRow) -> BestRecord:
    values = {name: getattr(row, name) for name in _BEST_FIELDS if name not in _BEST_DERIVED}
    values["dims"] = dict(row.dims)
    values["config"] = dict(row.config)
    return BestRecord(dtypes=json.loads(row.dtypes_key), updated_at=from_db_time(row.updated_at), **values)
