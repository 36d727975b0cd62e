"""Queries on trials and best configs: storing results, reading them back, keeping each key's best row."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from autotune.errors import StoreError
from autotune.records import BestRecord
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
from autotune.store.rows import best_record, trial_result, trial_row, utc
from autotune.trial import KIND_RETIME, KIND_SEARCH, TrialResult, TrialStatus, median_spread

#: first half of the two-int advisory-lock key that serializes refresh_best per tuning key ("bt")
_BEST_LOCK_CLASS = 0x6274


def trial_row_copy(row: TrialRow) -> TrialRow:
    """A fresh, unsaved copy (a retried transaction must not reuse rows of the rolled-back one)."""
    cols = {c.key: getattr(row, c.key) for c in TrialRow.__table__.columns if c.key != "id"}
    return TrialRow(**cols)


def _fastest_config(rows: list[Any]) -> tuple[int, float, int, float | None] | None:
    """(trial id, median time, samples, spread) of the config with the lowest median over its ok+measured
    trials (id, config_hash, time_s, kind): one sample for most, several for a re-timed finalist, whose
    median then replaces its first (noisier) measurement. The trial named is the config's search trial.

    Once finalists were re-timed, a config measured once competes only if its one sample beats a finalist's
    search sample (it was measured after the finalists were chosen): one that ranked below every finalist
    when they were chosen cannot win on its single, luckier-than-the-median sample."""
    by_config: dict[str, list[Any]] = {}
    for row in rows:
        by_config.setdefault(row.config_hash, []).append(row)
    retimed = [g for g in by_config.values() if any(r.kind == KIND_RETIME for r in g)]
    cutoff = max((r.time_s for g in retimed for r in g if r.kind == KIND_SEARCH), default=math.inf)
    best: tuple[float, int, int, float | None] | None = None
    for group in by_config.values():
        if len(group) == 1 and group[0].time_s >= cutoff:
            continue
        median, spread = median_spread([r.time_s for r in group])
        first = min((r.id for r in group if r.kind == KIND_SEARCH), default=min(r.id for r in group))
        if best is None or (median, first) < best[:2]:
            best = (median, first, len(group), spread)
    return None if best is None else (best[1], best[0], best[2], best[3])


class TrialQueries(Database):
    def record_trial(
        self,
        key_id: int,
        result: TrialResult,
        *,
        optuna_trial_number: int | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
    ) -> int:
        """Store one result and, in the same transaction, mark its (key, config) claim done (creating it
        when none was taken); returns the trial's id. Invalid configs take no claim: they never run."""
        return self.record_trials(
            key_id, [(result, started_at, finished_at)], optuna_trial_number=optuna_trial_number
        )[0]

    def record_trials(
        self,
        key_id: int,
        items: list[tuple[TrialResult, datetime | None, datetime | None]],
        *,
        optuna_trial_number: int | None = None,
    ) -> list[int]:
        """``record_trial`` for several (result, started_at, finished_at) in one transaction."""
        rows = [
            trial_row(
                key_id,
                result,
                optuna_trial_number=optuna_trial_number,
                started_at=utc(started),
                finished_at=utc(finished) or utcnow(),
            )
            for result, started, finished in items
        ]

        def attempt() -> list[int]:
            fresh = [trial_row_copy(r) for r in rows]
            with self.session(write=True) as s:
                s.add_all(fresh)
                s.flush()
                # claims in config-hash order, as claim_many takes them: no lock-order deadlock
                for row in sorted(fresh, key=lambda r: r.config_hash):
                    if row.status != TrialStatus.INVALID.value and row.kind == KIND_SEARCH:
                        self._complete_claim(s, key_id, row)
                return [row.id for row in fresh]

        return self.retrying(attempt)

    def _complete_claim(self, s: Any, key_id: int, row: TrialRow) -> None:
        """Overridden by the claims layer (ClaimQueries)."""

    def find_trial(self, key_id: int, config_hash: str) -> TrialResult | None:
        """The most recent stored search result of a config under a key (for reuse), or None."""
        with self.session() as s:
            row = s.scalars(
                select(TrialRow)
                .where(
                    TrialRow.key_id == key_id,
                    TrialRow.config_hash == config_hash,
                    TrialRow.kind == KIND_SEARCH,
                )
                .order_by(TrialRow.id.desc())
                .limit(1)
            ).first()
            return None if row is None else trial_result(row)

    def trials(self, key_id: int, *, retimed: bool = False) -> list[TrialResult]:
        """The evaluations of a key (one per config), oldest first; with ``retimed``, the finalists'
        re-timings too."""
        stmt = select(TrialRow).where(TrialRow.key_id == key_id).order_by(TrialRow.id)
        if not retimed:
            stmt = stmt.where(TrialRow.kind == KIND_SEARCH)
        with self.session() as s:
            return [trial_result(r) for r in s.scalars(stmt).all()]

    def trials_since(self, key_id: int, after_id: int) -> list[tuple[int, TrialResult]]:
        """(id, result) of the trials of a key stored after trial ``after_id``, oldest first: how a search
        learns what other processes measured meanwhile."""
        with self.session() as s:
            rows = s.scalars(
                select(TrialRow)
                .where(TrialRow.key_id == key_id, TrialRow.id > after_id)
                .order_by(TrialRow.id)
            ).all()
            return [(r.id, trial_result(r)) for r in rows]

    def trial_numbers(self, key_id: int) -> list[int]:
        """The Optuna trial numbers recorded under a key (oldest first; rows without one are skipped)."""
        with self.session() as s:
            return list(
                s.scalars(
                    select(TrialRow.optuna_trial_number)
                    .where(TrialRow.key_id == key_id, TrialRow.optuna_trial_number.is_not(None))
                    .order_by(TrialRow.id)
                )
            )

    def trial_counts(self, key_id: int) -> dict[str, int]:
        """Number of configs evaluated under a key, by status (statuses with none are absent; re-timings
        of finalists are not new configs)."""
        with self.session() as s:
            rows = s.execute(
                select(TrialRow.status, func.count(TrialRow.id))
                .where(TrialRow.key_id == key_id, TrialRow.kind == KIND_SEARCH)
                .group_by(TrialRow.status)
            ).all()
            return {status: int(n) for status, n in rows}

    def duplicate_measurements(self, key_id: int | None = None) -> int:
        """Extra measurements: search trials beyond the first per (key, config) among those that ran (status
        not invalid; re-timed finalists are measured again on purpose). Zero is what the claims guarantee."""
        stmt = (
            select(TrialRow.key_id, TrialRow.config_hash, func.count(TrialRow.id))
            .where(TrialRow.status != TrialStatus.INVALID.value, TrialRow.kind == KIND_SEARCH)
            .group_by(TrialRow.key_id, TrialRow.config_hash)
        )
        if key_id is not None:
            stmt = stmt.where(TrialRow.key_id == key_id)
        with self.session() as s:
            return sum(int(n) - 1 for _, _, n in s.execute(stmt))

    def refresh_best(self, key_id: int) -> BestRecord | None:
        """Point the key's best_configs row at its fastest ok+measured trial (or drop it if none)."""
        return self.retrying(lambda: self._refresh_best(key_id))

    def _refresh_best(self, key_id: int) -> BestRecord | None:
        with self.session(write=True) as s:
            # Two processes refreshing one key serialize, so the later one sees every trial. Postgres: a
            # transaction-scoped advisory lock per key, not a row lock on the key, which every trial and
            # claim insert of that key share (FOR KEY SHARE): waiting for it there queued them behind us.
            if not self.is_sqlite:
                s.execute(select(func.pg_advisory_xact_lock(_BEST_LOCK_CLASS, key_id)))
            key = s.get(TuningKeyRow, key_id)
            if key is None:
                raise StoreError(f"database {self.masked_url}: no tuning key {key_id}")
            chosen = _fastest_config(
                s.execute(
                    select(TrialRow.id, TrialRow.config_hash, TrialRow.time_s, TrialRow.kind).where(
                        TrialRow.key_id == key_id,
                        TrialRow.status == TrialStatus.OK.value,
                        TrialRow.measured.is_(True),
                        TrialRow.time_s.is_not(None),
                    )
                ).all()
            )
            trial = s.get(TrialRow, chosen[0]) if chosen else None
            best = s.scalars(select(BestConfigRow).where(BestConfigRow.key_id == key_id)).first()
            if trial is None:
                if best is not None:
                    s.delete(best)
                return None
            _, median, samples, spread = chosen
            if (
                best is None
                or best.trial_id != trial.id
                or best.time_s != median
                or (best.samples or 1) != samples
            ):
                kernel = s.get_one(KernelRow, key.kernel_id)
                shape = s.get_one(ShapeRow, key.shape_id)
                env = s.get_one(EnvironmentRow, key.environment_id)
                if best is None:
                    best = BestConfigRow(key_id=key_id)
                    s.add(best)
                best.trial_id, best.config, best.time_s = trial.id, trial.config, median
                best.tflops = trial.tflops * trial.time_s / median if trial.tflops and trial.time_s else None
                best.samples, best.spread = samples, spread
                best.kernel_name, best.source_hash, best.space_hash = (
                    kernel.name,
                    kernel.source_hash,
                    key.space_hash,
                )
                best.shape_key, best.dims, best.dtypes_key = shape.shape_key, shape.dims, shape.dtypes_key
                best.device_name, best.cc, best.env_hash = env.gpu_name, env.cc, env.env_hash
                best.torch, best.triton, best.updated_at = env.torch, env.triton, utcnow()
                s.flush()
            return best_record(best)

    def best(
        self, kernel_name: str, shape_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]:
        """Best configs of a kernel (optionally one shape / one device), newest first."""
        stmt = select(BestConfigRow).where(BestConfigRow.kernel_name == kernel_name)
        if shape_key is not None:
            stmt = stmt.where(BestConfigRow.shape_key == shape_key)
        if device_name is not None:
            stmt = stmt.where(BestConfigRow.device_name == device_name)
        with self.session() as s:
            rows = s.scalars(stmt.order_by(BestConfigRow.updated_at.desc(), BestConfigRow.id.desc())).all()
            return [best_record(r) for r in rows]

    def summary(self, kernel_name: str | None = None) -> list[dict[str, Any]]:
        """One row per tuning key, for ``autotune show``."""
        stmt = (
            select(TuningKeyRow, KernelRow, ShapeRow, EnvironmentRow, BestConfigRow)
            .join(KernelRow, KernelRow.id == TuningKeyRow.kernel_id)
            .join(ShapeRow, ShapeRow.id == TuningKeyRow.shape_id)
            .join(EnvironmentRow, EnvironmentRow.id == TuningKeyRow.environment_id)
            .outerjoin(BestConfigRow, BestConfigRow.key_id == TuningKeyRow.id)
            .order_by(KernelRow.name, ShapeRow.shape_key, TuningKeyRow.id)
        )
        if kernel_name is not None:
            stmt = stmt.where(KernelRow.name == kernel_name)
        with self.session() as s:
            counts: dict[int, dict[str, int]] = {}
            for key_id, status, n in s.execute(
                select(TrialRow.key_id, TrialRow.status, func.count(TrialRow.id)).group_by(
                    TrialRow.key_id, TrialRow.status
                )
            ):
                counts.setdefault(key_id, {})[status] = int(n)
            running: dict[int, int] = dict(
                s.execute(
                    select(ClaimRow.key_id, func.count(ClaimRow.id))
                    .where(ClaimRow.status == "running")
                    .group_by(ClaimRow.key_id)
                ).all()
            )
            out = []
            for key, kernel, shape, env, best in s.execute(stmt):
                c = counts.get(key.id, {})
                out.append(
                    {
                        "key_id": key.id,
                        "kernel": kernel.name,
                        "source_hash": kernel.source_hash[:12],
                        "shape": shape.shape_key,
                        "dtypes": dict(shape.dtypes),
                        "device": env.gpu_name,
                        "cc": env.cc,
                        "env_hash": env.env_hash[:12],
                        "torch": env.torch,
                        "triton": env.triton,
                        "study_name": key.study_name,
                        "trials": sum(c.values()),
                        "counts": c,
                        "running": int(running.get(key.id, 0)),
                        "best_time_s": best.time_s if best else None,
                        "best_tflops": best.tflops if best else None,
                    }
                )
            return out
