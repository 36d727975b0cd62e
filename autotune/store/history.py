"""The history role: read-only views across tuning keys. ``key_states``: every key of a kernel with its
environment, what it measured and its best row (``autotune show``, the nightly planner, the report, the
exports); ``transfer``: other keys' measurements of a kernel, for the ``auto`` strategy (``autotune.store.transfer``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from autotune.records import KeyState
from autotune.store.claims import Owner, stale
from autotune.store.database import Database
from autotune.store.models import (
    BestConfigRow,
    ClaimRow,
    EnvironmentRow,
    KernelRow,
    ShapeRow,
    TrialRow,
    TuningKeyRow,
    utcnow,
)
from autotune.store.rows import key_facts, key_state
from autotune.store.transfer import transfer_history
from autotune.trial import KIND_SEARCH, TrialStatus


class History:
    """What one database knows across its keys."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def key_states(self, kernel_name: str | None = None) -> list[KeyState]:
        """Every tuning key (of ``kernel_name``, or all), oldest first."""
        stmt = (
            select(TuningKeyRow, KernelRow, ShapeRow, EnvironmentRow, BestConfigRow)
            .join(KernelRow, KernelRow.id == TuningKeyRow.kernel_id)
            .join(ShapeRow, ShapeRow.id == TuningKeyRow.shape_id)
            .join(EnvironmentRow, EnvironmentRow.id == TuningKeyRow.environment_id)
            .outerjoin(BestConfigRow, BestConfigRow.key_id == TuningKeyRow.id)
            .order_by(TuningKeyRow.id)
        )
        if kernel_name is not None:
            stmt = stmt.where(KernelRow.name == kernel_name)
        with self.db.session() as s:
            counts, measured, running = _counts(s), _measured(s), _running(s)
            return [
                key_state(
                    key_facts(key, kernel, shape, env),
                    best,
                    counts=counts.get(key.id, {}),
                    measured=measured.get(key.id, 0),
                    running=running.get(key.id, 0),
                )
                for key, kernel, shape, env, best in s.execute(stmt)
            ]

    def transfer(
        self,
        kernel_name: str,
        space_hash: str,
        env: dict[str, Any],
        exclude_key_id: int | None = None,
        params: Collection[str] | None = None,
    ) -> list[tuple[int, dict[str, int], dict[str, Any], float, float, str]]:
        """Other keys' measurements of ``kernel_name``, weighted: ``autotune.store.transfer``."""
        return transfer_history(self.db, kernel_name, space_hash, env, exclude_key_id, params)


def _counts(s: Session) -> dict[int, dict[str, int]]:
    """key id -> {status: trials} (re-timings included)."""
    counts: dict[int, dict[str, int]] = {}
    stmt = select(TrialRow.key_id, TrialRow.status, func.count(TrialRow.id)).group_by(
        TrialRow.key_id, TrialRow.status
    )
    for key_id, status, n in s.execute(stmt):
        counts.setdefault(key_id, {})[status] = int(n)
    return counts


def _measured(s: Session) -> dict[int, int]:
    """key id -> distinct configs the searches evaluated (re-timed finalists are measured again, not new
    configs; invalid ones never ran)."""
    stmt = (
        select(TrialRow.key_id, func.count(func.distinct(TrialRow.config_hash)))
        .where(TrialRow.status != TrialStatus.INVALID.value, TrialRow.kind == KIND_SEARCH)
        .group_by(TrialRow.key_id)
    )
    return {key_id: int(n) for key_id, n in s.execute(stmt)}


def _running(s: Session) -> dict[int, int]:
    """key id -> running claims of live owners (a dead owner's claims are not running, closed or not:
    the history is read-only, the next search closes them)."""
    me, now, out = Owner(), utcnow(), {}
    for row in s.scalars(select(ClaimRow).where(ClaimRow.status == "running")):
        if not stale(row, me, now):
            out[row.key_id] = out.get(row.key_id, 0) + 1
    return out
