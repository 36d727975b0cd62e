"""The trials role: storing results (each with its claim marked done, in the same transaction), reading them
back, and keeping each key's best row."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from autotune.errors import StoreError
from autotune.records import BestRecord
from autotune.stats import MIN_BEST_SAMPLES, Ratio, median_interval, paired_ratio
from autotune.store.claims import Claims
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
from autotune.store.rows import best_columns, best_of, best_record, key_facts, trial_result, trial_row, utc
from autotune.trial import KIND_REOPENED, KIND_RETIME, KIND_SEARCH, TrialResult, TrialStatus, median_spread

#: failures whose cause may have been the moment (a busy machine, a slow first call): re-opened on request
REOPENABLE = (TrialStatus.TIMEOUT, TrialStatus.CRASHED)

#: first half of the two-int advisory-lock key that serializes refresh_best per tuning key ("bt")
_BEST_LOCK_CLASS = 0x6274


def trial_row_copy(row: TrialRow) -> TrialRow:
    """A fresh, unsaved copy (a retried transaction must not reuse rows of the rolled-back one)."""
    cols = {c.key: getattr(row, c.key) for c in TrialRow.__table__.columns if c.key != "id"}
    return TrialRow(**cols)


@dataclass(frozen=True)
class _Chosen:
    """The config a key's best row points at: its search trial, its samples' median, count and spread."""

    trial_id: int
    config_hash: str
    median: float
    samples: int
    spread: float | None
    times: tuple[float, ...]


def _fastest_config(rows: list[Any], min_samples: int = MIN_BEST_SAMPLES) -> _Chosen | None:
    """The config with the lowest median over its ok+measured trials (id, config_hash, time_s, kind, ...)
    among those with at least ``min_samples`` measurements (its search sample and its interleaved
    re-timings): a config measured once, however lucky that sample, is never the best while a re-timed one
    exists (the search re-times any would-be best with the current best first: ``tuning.finalists``).
    Only where no config was re-timed that often (re-timing turned off, cut by the deadline, or under way
    in another process) does the old rule hold: after re-timings, a config measured once competes only if
    its one sample beats a finalist's search sample. The trial named is the config's search trial."""
    by_config: dict[str, list[Any]] = {}
    for row in rows:
        by_config.setdefault(row.config_hash, []).append(row)
    groups = [g for g in by_config.values() if len(g) >= min_samples]
    if not groups:
        retimed = [g for g in by_config.values() if any(r.kind == KIND_RETIME for r in g)]
        cutoff = max((r.time_s for g in retimed for r in g if r.kind == KIND_SEARCH), default=math.inf)
        groups = [g for g in by_config.values() if len(g) > 1 or g[0].time_s < cutoff]
    best: _Chosen | None = None
    for group in groups:
        times = tuple(r.time_s for r in group)
        median, spread = median_spread(times)
        first = min((r.id for r in group if r.kind == KIND_SEARCH), default=min(r.id for r in group))
        if best is None or (median, first) < (best.median, best.trial_id):
            best = _Chosen(first, group[0].config_hash, median, len(group), spread, times)
    return best


def _speedup(rows: list[Any], best_hash: str, default_hash: str | None) -> Ratio | None:
    """default / best over the re-timing rounds both were measured in (paired samples)."""
    if default_hash is None or default_hash == best_hash:
        return None
    by_round: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.retime_round and r.config_hash in (best_hash, default_hash):
            by_round.setdefault(r.retime_round, {})[r.config_hash] = r.time_s
    pairs = [(d[default_hash], d[best_hash]) for d in by_round.values() if len(d) == 2]
    return paired_ratio([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None


def _best_stats(
    rows: list[Any], chosen: _Chosen, default_hash: str | None, best: BestConfigRow | None
) -> dict[str, Any]:
    """The best row's interval and speed-up columns. Without the default's hash (a caller that does not
    know it) an unchanged best keeps the speed-up it had."""
    ratio = _speedup(rows, chosen.config_hash, default_hash)
    kept = ratio is None and default_hash is None and best is not None and best.trial_id == chosen.trial_id
    if kept and best is not None and best.speedup is not None:
        ratio = Ratio(best.speedup, best.speedup_low, best.speedup_high, best.pairs or 0)
    ci = median_interval(chosen.times)
    return {
        "ci_low_s": ci[0] if ci else None,
        "ci_high_s": ci[1] if ci else None,
        "speedup": ratio.value if ratio else None,
        "speedup_low": ratio.low if ratio else None,
        "speedup_high": ratio.high if ratio else None,
        "pairs": ratio.pairs if ratio else None,
    }


class Trials:
    """Trials and best configs of one database. ``claims``: the claims role, whose claim of each stored
    search trial is marked done in the trial's own transaction."""

    def __init__(self, db: Database, claims: Claims) -> None:
        self.db = db
        self.claims = claims

    def record(
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
        return self.record_many(
            key_id, [(result, started_at, finished_at)], optuna_trial_number=optuna_trial_number
        )[0]

    def record_many(
        self,
        key_id: int,
        items: list[tuple[TrialResult, datetime | None, datetime | None]],
        *,
        optuna_trial_number: int | None = None,
    ) -> list[int]:
        """``record`` for several (result, started_at, finished_at) in one transaction."""
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
            with self.db.session(write=True) as s:
                s.add_all(fresh)
                s.flush()
                # claims in config-hash order, as claim_many takes them: no lock-order deadlock
                for row in sorted(fresh, key=lambda r: r.config_hash):
                    if row.status != TrialStatus.INVALID.value and row.kind == KIND_SEARCH:
                        self.claims.complete(s, key_id, row)
                return [row.id for row in fresh]

        return self.db.retrying(attempt)

    def reopen(self, key_id: int, statuses: tuple[TrialStatus, ...] = REOPENABLE) -> int:
        """Re-open a key's final failures of ``statuses`` (``autotune search --retry-failed``), in one
        transaction: their trials stay as records (kind ``reopened``, no longer the config's evaluation) and
        their done claims go, so the next search measures those configs again. Returns how many."""

        def attempt() -> int:
            with self.db.session(write=True) as s:
                ids = list(
                    s.scalars(
                        select(TrialRow.id).where(
                            TrialRow.key_id == key_id,
                            TrialRow.kind == KIND_SEARCH,
                            TrialRow.status.in_([st.value for st in statuses]),
                        )
                    )
                )
                if not ids:
                    return 0
                s.execute(update(TrialRow).where(TrialRow.id.in_(ids)).values(kind=KIND_REOPENED))
                s.execute(
                    delete(ClaimRow).where(
                        ClaimRow.key_id == key_id, ClaimRow.status == "done", ClaimRow.trial_id.in_(ids)
                    )
                )
                return len(ids)

        return self.db.retrying(attempt)

    def find(self, key_id: int, config_hash: str) -> TrialResult | None:
        """The most recent stored search result of a config under a key (for reuse), or None."""
        with self.db.session() as s:
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

    def recorded(self, key_id: int, *, retimed: bool = False) -> list[TrialResult]:
        """The evaluations of a key (one per config), oldest first; with ``retimed``, the finalists'
        re-timings too."""
        stmt = select(TrialRow).where(TrialRow.key_id == key_id).order_by(TrialRow.id)
        if not retimed:
            stmt = stmt.where(TrialRow.kind == KIND_SEARCH)
        with self.db.session() as s:
            return [trial_result(r) for r in s.scalars(stmt).all()]

    def since(self, key_id: int, after_id: int) -> list[tuple[int, TrialResult]]:
        """(id, result) of the trials of a key stored after trial ``after_id``, oldest first: how a search
        learns what other processes measured meanwhile."""
        with self.db.session() as s:
            rows = s.scalars(
                select(TrialRow)
                .where(TrialRow.key_id == key_id, TrialRow.id > after_id)
                .order_by(TrialRow.id)
            ).all()
            return [(r.id, trial_result(r)) for r in rows]

    def last_id(self) -> int:
        """The newest trial's id (0: none): what a handed-over search's progress starts after."""
        with self.db.session() as s:
            return int(s.scalar(select(func.max(TrialRow.id))) or 0)

    def searched_since(
        self, kernel_name: str, source_hash: str, shape_key: str, device_name: str, after_id: int
    ) -> list[tuple[int, TrialResult]]:
        """(id, result) of the search evaluations stored after trial ``after_id`` under any key of this
        kernel source, shape and device, oldest first: a handed-over search's progress, read while the
        service searches (``service.client``)."""
        stmt = (
            select(TrialRow)
            .join(TuningKeyRow, TrialRow.key_id == TuningKeyRow.id)
            .join(KernelRow, TuningKeyRow.kernel_id == KernelRow.id)
            .join(ShapeRow, TuningKeyRow.shape_id == ShapeRow.id)
            .join(EnvironmentRow, TuningKeyRow.environment_id == EnvironmentRow.id)
            .where(
                TrialRow.id > after_id,
                TrialRow.kind == KIND_SEARCH,
                KernelRow.name == kernel_name,
                KernelRow.source_hash == source_hash,
                ShapeRow.shape_key == shape_key,
                EnvironmentRow.gpu_name == device_name,
            )
            .order_by(TrialRow.id)
        )
        with self.db.session() as s:
            return [(r.id, trial_result(r)) for r in s.scalars(stmt).all()]

    def optuna_numbers(self, key_id: int) -> list[int]:
        """The Optuna trial numbers recorded under a key (oldest first; rows without one are skipped)."""
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(TrialRow.optuna_trial_number)
                    .where(TrialRow.key_id == key_id, TrialRow.optuna_trial_number.is_not(None))
                    .order_by(TrialRow.id)
                )
            )

    def counts(self, key_id: int) -> dict[str, int]:
        """Number of configs evaluated under a key, by status (statuses with none are absent; re-timings
        of finalists are not new configs)."""
        with self.db.session() as s:
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
        with self.db.session() as s:
            return sum(int(n) - 1 for _, _, n in s.execute(stmt))

    # ---------------------------------------------------------------- best configs

    def refresh_best(self, key_id: int, default_hash: str | None = None) -> BestRecord | None:
        """Point the key's best_configs row at its fastest config by median over repeated samples (or drop
        it if none ran ok), with the median's interval and, given the default config's hash, the speedup
        over the default from their paired re-timing rounds."""
        return self.db.retrying(lambda: self._refresh_best(key_id, default_hash))

    def _refresh_best(self, key_id: int, default_hash: str | None) -> BestRecord | None:
        with self.db.session(write=True) as s:
            # Two processes refreshing one key serialize, so the later one sees every trial. Postgres: a
            # transaction-scoped advisory lock per key, not a row lock on the key, which every trial and
            # claim insert of that key share (FOR KEY SHARE): waiting for it there queued them behind us.
            if not self.db.is_sqlite:
                s.execute(select(func.pg_advisory_xact_lock(_BEST_LOCK_CLASS, key_id)))
            key = s.get(TuningKeyRow, key_id)
            if key is None:
                raise StoreError(f"database {self.db.masked_url}: no tuning key {key_id}")
            rows = s.execute(
                select(
                    TrialRow.id, TrialRow.config_hash, TrialRow.time_s, TrialRow.kind, TrialRow.retime_round
                ).where(
                    TrialRow.key_id == key_id,
                    TrialRow.status == TrialStatus.OK.value,
                    TrialRow.measured.is_(True),
                    TrialRow.time_s.is_not(None),
                )
            ).all()
            chosen = _fastest_config(rows)
            best = s.scalars(select(BestConfigRow).where(BestConfigRow.key_id == key_id)).first()
            if chosen is None:
                if best is not None:
                    s.delete(best)
                return None
            stats = _best_stats(rows, chosen, default_hash, best)
            same = (best.trial_id, best.time_s, best.samples or 1) if best is not None else None
            unchanged = same == (chosen.trial_id, chosen.median, chosen.samples)
            if best is not None and unchanged and all(getattr(best, k) == v for k, v in stats.items()):
                return best_record(best)  # unchanged: the row keeps its updated_at
            record = best_of(
                _facts(s, key),
                s.get_one(TrialRow, chosen.trial_id),
                time_s=chosen.median,
                samples=chosen.samples,
                spread=chosen.spread,
                updated_at=utcnow(),
                **stats,
            )
            if best is None:
                best = BestConfigRow()
                s.add(best)
            for column, value in best_columns(record).items():
                setattr(best, column, value)
            s.flush()
            return best_record(best)

    def best_generation(self, kernel_name: str, device_name: str) -> tuple[Any, ...]:
        """What changes whenever a best config of the kernel on the device is stored, replaced or deleted
        (count, newest update, highest id): one small aggregate read, the runtime lookup's freshness check."""
        stmt = select(
            func.count(BestConfigRow.id), func.max(BestConfigRow.updated_at), func.max(BestConfigRow.id)
        ).where(BestConfigRow.kernel_name == kernel_name, BestConfigRow.device_name == device_name)
        with self.db.session() as s:
            return tuple(s.execute(stmt).one())

    def best(
        self, kernel_name: str, shape_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]:
        """Best configs of a kernel (optionally one shape / one device), newest first."""
        stmt = select(BestConfigRow).where(BestConfigRow.kernel_name == kernel_name)
        if shape_key is not None:
            stmt = stmt.where(BestConfigRow.shape_key == shape_key)
        if device_name is not None:
            stmt = stmt.where(BestConfigRow.device_name == device_name)
        with self.db.session() as s:
            rows = s.scalars(stmt.order_by(BestConfigRow.updated_at.desc(), BestConfigRow.id.desc())).all()
            return [best_record(r) for r in rows]


def _facts(s: Session, key: TuningKeyRow) -> dict[str, Any]:
    return key_facts(
        key,
        s.get_one(KernelRow, key.kernel_id),
        s.get_one(ShapeRow, key.shape_id),
        s.get_one(EnvironmentRow, key.environment_id),
    )
