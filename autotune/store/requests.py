"""The requests role. Shapes production asked for and did not find tuned (``autotune_shape_requests``): counted in-process by
``autotune.requests_log`` and added here in one transaction per flush; read by the nightly planner and
``autotune show --requests``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.exc import IntegrityError

from autotune.store.database import Database
from autotune.store.models import ShapeRequestRow
from autotune.store.rows import from_db_time, utc


@dataclass(frozen=True)
class ShapeRequest:
    kernel_name: str
    shape_key: str
    dims: dict[str, int]
    dtypes_key: str
    device_name: str
    count: int
    first_seen: datetime
    last_seen: datetime
    #: its place in the ``autotune serve`` queue (``store.services``) and why it was refused
    status: str = "queued"
    message: str | None = None
    #: the kernel version asked for ("": any)
    source_hash: str = ""
    space_hash: str = ""
    id: int = 0


@dataclass(frozen=True)
class RequestCount:
    """What one process counted since its last flush."""

    kernel_name: str
    shape_key: str
    dims: dict[str, int]
    device_name: str
    count: int
    first_seen: datetime
    last_seen: datetime
    dtypes_key: str = ""
    #: the kernel version the caller runs, when it says ("": any version)
    source_hash: str = ""
    space_hash: str = ""


class Requests:
    """The shape requests of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, counts: list[RequestCount]) -> None:
        """Add counts to the stored ones (a row per kernel, shape, dtypes and device), creating missing rows;
        concurrent flushers from many processes add up (an UPDATE ... SET count = count + n)."""
        if not counts:
            return

        def attempt() -> None:
            with self.db.session(write=True) as s:
                for c in sorted(counts, key=lambda c: (c.kernel_name, c.shape_key, c.device_name)):
                    ident = (
                        ShapeRequestRow.kernel_name == c.kernel_name,
                        ShapeRequestRow.shape_key == c.shape_key,
                        ShapeRequestRow.dtypes_key == c.dtypes_key,
                        ShapeRequestRow.device_name == c.device_name,
                        ShapeRequestRow.source_hash == c.source_hash,
                        ShapeRequestRow.space_hash == c.space_hash,
                    )
                    bump = (
                        update(ShapeRequestRow)
                        .where(*ident)
                        .values(count=ShapeRequestRow.count + c.count, last_seen=utc(c.last_seen))
                    )
                    if s.execute(bump).rowcount:
                        continue
                    try:
                        with s.begin_nested():  # lost a race with another flusher: add to its row
                            s.add(request_row(c))
                    except IntegrityError:
                        s.execute(bump)
                if not self.db.is_sqlite:  # wake idle `autotune serve` processes (store.services.CHANNEL)
                    s.execute(text("SELECT pg_notify('autotune_requests', '')"))

        self.db.retrying(attempt)

    def recorded(
        self,
        kernel_name: str | None = None,
        *,
        device_name: str | None = None,
        since: datetime | None = None,
    ) -> list[ShapeRequest]:
        """Recorded requests, most requested first."""
        stmt = select(ShapeRequestRow)
        if kernel_name is not None:
            stmt = stmt.where(ShapeRequestRow.kernel_name == kernel_name)
        if device_name is not None:
            stmt = stmt.where(ShapeRequestRow.device_name == device_name)
        if since is not None:
            stmt = stmt.where(ShapeRequestRow.last_seen >= utc(since))
        with self.db.session() as s:
            rows = s.scalars(
                stmt.order_by(ShapeRequestRow.count.desc(), ShapeRequestRow.kernel_name, ShapeRequestRow.id)
            ).all()
            return [_request(r) for r in rows]


def request_row(c: RequestCount) -> ShapeRequestRow:
    """The row of a new request: the count's fields by name."""
    values = {f.name: getattr(c, f.name) for f in fields(RequestCount)}
    values["dims"] = {str(k): int(v) for k, v in c.dims.items()}
    values["first_seen"], values["last_seen"] = utc(c.first_seen), utc(c.last_seen)
    return ShapeRequestRow(**values)


def _request(r: ShapeRequestRow) -> ShapeRequest:
    values = {f.name: getattr(r, f.name) for f in fields(ShapeRequest)}
    # anyone with write access may have stored anything JSON holds (``autotune serve`` refuses such rows):
    # reading it never raises
    if isinstance(r.dims, dict):
        values["dims"] = {str(k): int(v) if isinstance(v, int) else v for k, v in r.dims.items()}
    values["count"] = int(r.count)
    values["first_seen"], values["last_seen"] = from_db_time(r.first_seen), from_db_time(r.last_seen)
    return ShapeRequest(**values)
