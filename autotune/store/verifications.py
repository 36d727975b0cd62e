"""The verifications role. Re-measurements of stored best configs (``autotune_verifications``, one row per run and key, never
rewritten) and the nightly runs themselves (``autotune_nightly_runs``): the history the regression test
and the report read."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import select

from autotune.store.claims import Owner, owner_id_dead
from autotune.store.database import Database
from autotune.store.models import NightlyRunRow, VerificationRow, utcnow
from autotune.store.rows import from_db_time, utc


@dataclass
class Verification:
    key_id: int
    run_id: str
    kernel_name: str
    shape_key: str
    device_name: str
    config: dict[str, Any]
    config_hash: str
    samples_s: list[float]
    threshold: float
    status: str
    trial_id: int | None = None
    baseline_s: float | None = None
    median_s: float | None = None
    reference_s: list[float] | None = None
    ratio: float | None = None
    p_value: float | None = None
    error: str | None = None
    hostname: str | None = None
    #: best/reference per kept interleaved round, and best/default at tuning time (the verdict's terms)
    ratios: list[float] | None = None
    tuned_ratio: float | None = None
    #: SM clock range over the kept samples (MHz), and the samples left out as throttled
    clock_min_mhz: float | None = None
    clock_max_mhz: float | None = None
    throttled: int | None = None
    created_at: datetime | None = None
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["created_at"] = self.created_at.isoformat() if self.created_at else None
        return d


@dataclass
class NightlyRun:
    run_id: str
    job_name: str
    hostname: str
    status: str
    summary: dict[str, Any] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None


_COLUMNS = [c.key for c in VerificationRow.__table__.columns]


class Verifications:
    """The verifications and nightly runs of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, v: Verification) -> int:
        values = {k: getattr(v, k) for k in _COLUMNS if k not in ("id", "created_at")}

        def attempt() -> int:
            with self.db.session(write=True) as s:
                row = VerificationRow(**values, created_at=utc(v.created_at) or utcnow())
                s.add(row)
                s.flush()
                return row.id

        return self.db.retrying(attempt)

    def recorded(
        self,
        key_id: int | None = None,
        *,
        config_hash: str | None = None,
        kernel_name: str | None = None,
        since: datetime | None = None,
    ) -> list[Verification]:
        """Stored verifications, oldest first."""
        stmt = select(VerificationRow)
        if key_id is not None:
            stmt = stmt.where(VerificationRow.key_id == key_id)
        if config_hash is not None:
            stmt = stmt.where(VerificationRow.config_hash == config_hash)
        if kernel_name is not None:
            stmt = stmt.where(VerificationRow.kernel_name == kernel_name)
        if since is not None:
            stmt = stmt.where(VerificationRow.created_at >= utc(since))
        with self.db.session() as s:
            rows = s.scalars(stmt.order_by(VerificationRow.id)).all()
            return [_verification(r) for r in rows]

    def start_run(
        self, run_id: str, job_name: str, hostname: str, *, expires_at: datetime | None = None
    ) -> None:
        """Record a run as ``running``, first closing the runs of dead owners (``close_killed``). The
        row's summary holds the owner id (and the run's end, when it has one) until the run finishes."""
        owner: dict[str, Any] = {"owner": Owner().id}
        if expires_at is not None:
            owner["expires_at"] = utc(expires_at).isoformat()

        def attempt() -> None:
            with self.db.session(write=True) as s:
                _close_killed(s)
                s.add(
                    NightlyRunRow(
                        run_id=run_id,
                        job_name=job_name,
                        hostname=hostname,
                        status="running",
                        summary=owner,
                        started_at=utcnow(),
                    )
                )

        self.db.retrying(attempt)

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any]) -> None:
        def attempt() -> None:
            with self.db.session(write=True) as s:
                row = s.scalars(select(NightlyRunRow).where(NightlyRunRow.run_id == run_id)).one()
                row.status, row.summary, row.finished_at = status, summary, utcnow()

        self.db.retrying(attempt)

    def runs(self, *, since: datetime | None = None) -> list[NightlyRun]:
        stmt = select(NightlyRunRow)
        if since is not None:
            stmt = stmt.where(NightlyRunRow.started_at >= utc(since))
        with self.db.session() as s:
            return [_run(r) for r in s.scalars(stmt.order_by(NightlyRunRow.id)).all()]


def _close_killed(s: Any) -> int:
    """Close as ``killed`` the running runs whose process is gone (kill -9): same host and pid namespace
    with the pid gone, or past the end the run recorded (other hosts). A run with neither stays open."""
    me, now, n = Owner(), utcnow(), 0
    for row in s.scalars(select(NightlyRunRow).where(NightlyRunRow.status == "running")):
        info = row.summary or {}
        expires = info.get("expires_at")
        over = isinstance(expires, str) and _parse_time(expires) is not None and _parse_time(expires) < now
        if over or owner_id_dead(str(info.get("owner", "")), me):
            row.status, row.finished_at, n = "killed", now, n + 1
    return n


def _parse_time(text: str) -> datetime | None:
    try:
        return utc(datetime.fromisoformat(text))
    except ValueError:
        return None


def _verification(r: VerificationRow) -> Verification:
    values = {k: getattr(r, k) for k in _COLUMNS}
    values["created_at"] = from_db_time(r.created_at)
    values["samples_s"] = [float(x) for x in r.samples_s or []]
    return Verification(**values)


def _run(r: NightlyRunRow) -> NightlyRun:
    values = {f.name: getattr(r, f.name) for f in fields(NightlyRun)}
    values["summary"] = dict(r.summary or {})
    values["started_at"] = from_db_time(r.started_at)
    values["finished_at"] = from_db_time(r.finished_at) if r.finished_at else None
    return NightlyRun(**values)
