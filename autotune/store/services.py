"""The services role: ``autotune serve``'s heartbeats (``autotune_services``) and its work queue, which is the
shape requests table (``autotune_shape_requests``): a miss recorded by ``best_config(..., record=True)`` or
a row added by ``autotune request`` is ``queued`` work for a service serving that kernel on that device.

- ``take`` gives one queued request (or one whose taker's lease expired: a service killed with -9) to one
  service: Postgres skips rows another taker has locked (``FOR UPDATE SKIP LOCKED``), and on every backend
  the UPDATE is conditional on the row's state still allowing the take, so exactly one taker wins;
- ``beat`` renews the service's heartbeat and the lease of its running request in one transaction;
- ``finish`` marks a request done or refused, ``hand_back`` puts it back in the queue (SIGTERM);
- on Postgres every write that queues work sends a NOTIFY on ``CHANNEL`` (``notify``), which an idle
  service waits for (``Listener``) instead of polling alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from autotune.store.claims import Owner, owner_id_dead
from autotune.store.database import Database
from autotune.store.models import ServiceRow, ShapeRequestRow
from autotune.store.requests import RequestCount, request_row
from autotune.store.rows import from_db_time

#: days a service row is kept after its last heartbeat
KEEP_DAYS = 7
#: the Postgres channel that says "a request was queued"
CHANNEL = "autotune_requests"
#: why a request for a kernel no live service runs is refused (queued again when one starts that runs it)
UNSERVED = "no service runs this kernel (a service runs only the kernel files it started with)"
#: why a request for another version of a kernel that services run is refused (queued again likewise)
UNSERVED_VERSION = (
    "no service runs this version of the kernel (its source or space hash differs from every live "
    "service's: reload one with SIGHUP after deploying the file)"
)


def notify(s: Session, db: Database) -> None:
    """Wake the idle services (Postgres: delivered when ``s`` commits; SQLite: nothing, they poll)."""
    if not db.is_sqlite:
        s.execute(text(f"SELECT pg_notify('{CHANNEL}', '')"))


class Listener:
    """A connection LISTENing on ``CHANNEL`` (Postgres only): ``wait`` returns early on a NOTIFY."""

    def __init__(self, db: Database) -> None:
        self._raw = db.engine.raw_connection()
        self._conn: Any = self._raw.driver_connection
        self._conn.autocommit = True
        self._conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, timeout_s: float) -> bool:
        """True when notified within ``timeout_s``."""
        for _ in self._conn.notifies(timeout=timeout_s, stop_after=1):
            return True
        return False

    def close(self) -> None:
        try:
            self._raw.invalidate()  # a LISTENing connection must not go back to the pool
        except Exception:
            pass


@dataclass(frozen=True)
class Service:
    """One service's heartbeat row."""

    owner: str
    host: str
    pid: int
    device_name: str | None
    devices: str
    #: {"name", "source_hash", "shape_params"} of each kernel it runs
    kernel_info: tuple[dict[str, Any], ...]
    started: datetime
    last_beat: datetime
    request_id: int | None
    state: str

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(str(k.get("name")) for k in self.kernel_info)

    def alive(self, now: datetime, lease_s: float) -> bool:
        """Not stopped, and beat within the lease (a service killed with -9 stops beating)."""
        return self.state != "stopped" and self.last_beat > now - timedelta(seconds=lease_s)


def _service(r: ServiceRow) -> Service | None:
    """The row as a ``Service``; None for a malformed one."""
    kernels = r.kernels if isinstance(r.kernels, list) else []
    try:
        return Service(
            owner=str(r.owner),
            host=str(r.host),
            pid=int(r.pid),
            device_name=None if r.device_name is None else str(r.device_name),
            devices=str(r.devices),
            kernel_info=tuple(k for k in kernels if isinstance(k, dict) and isinstance(k.get("name"), str)),
            started=from_db_time(r.started),
            last_beat=from_db_time(r.last_beat),
            request_id=r.request_id if isinstance(r.request_id, int) else None,
            state=str(r.state),
        )
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None


@dataclass(frozen=True)
class Work:
    """A request taken from the queue: data only (a kernel name, never a path)."""

    id: int
    kernel_name: str
    shape_key: str
    dims: Any  # as stored: the service validates it (a hostile row may hold anything JSON can)
    dtypes_key: str
    device_name: str
    #: the budget of an ``autotune search`` handed over (unchecked: the service validates it); None for
    #: a recorded miss or ``autotune request`` (the service's own stopping rule)
    options: Any = None
    #: the kernel version asked for ("": any)
    source_hash: str = ""
    space_hash: str = ""


@dataclass(frozen=True)
class Version:
    """A kernel as one service loaded it: what a request must match to be taken by that service."""

    name: str
    source_hash: str
    space_hash: str = ""

    @staticmethod
    def of(entry: dict[str, Any]) -> Version:
        """From a service row's kernel entry."""
        return Version(
            str(entry.get("name")), str(entry.get("source_hash") or ""), str(entry.get("space_hash") or "")
        )

    def serves(self, kernel_name: str, source_hash: str, space_hash: str) -> bool:
        """A request for this kernel that names this version, or none."""
        return (
            kernel_name == self.name
            and source_hash in ("", self.source_hash)
            and space_hash in ("", self.space_hash)
        )


def _matches(v: Version) -> ColumnElement[bool]:
    """The requests ``v`` serves (``Version.serves`` as SQL)."""
    return and_(
        ShapeRequestRow.kernel_name == v.name,
        ShapeRequestRow.source_hash.in_(["", v.source_hash]),
        ShapeRequestRow.space_hash.in_(["", v.space_hash]),
    )


@dataclass(frozen=True)
class Outcome:
    """Where a request stands, for the command waiting on it."""

    status: str
    message: str | None
    report: dict[str, Any] | None
    owner: str | None


class Services:
    """The services and their queue, in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ---------------------------------------------------------------- heartbeats

    def register(self, owner: Owner, *, devices: str) -> None:
        """The service's row, ``starting``: while it loads its kernel files, no other service refuses a
        request for a kernel nobody serves yet (it may be one of this service's)."""
        now = self.db.now()
        with self.db.session(write=True) as s:
            # every start adds a row: those silent for a week (stopped, or dead) go
            s.execute(delete(ServiceRow).where(ServiceRow.last_beat < now - timedelta(days=KEEP_DAYS)))
            s.add(
                ServiceRow(
                    owner=owner.id,
                    host=owner.host,
                    pid=owner.pid,
                    devices=devices,
                    kernels=[],
                    started=now,
                    last_beat=now,
                    state="starting",
                )
            )

    def started(self, owner: Owner, *, device_name: str, kernels: list[dict[str, Any]]) -> None:
        """The service serves ``kernels`` ({"name", "source_hash", "space_hash", "shape_params"}) now (at
        start, and again after a reload): requests refused because nobody ran them are queued again."""
        names = [str(k["name"]) for k in kernels]
        with self.db.session(write=True) as s:
            s.execute(
                update(ServiceRow)
                .where(ServiceRow.owner == owner.id)
                .values(device_name=device_name, kernels=list(kernels), state="idle", last_beat=self.db.now())
            )
            s.execute(
                update(ShapeRequestRow)
                .where(
                    ShapeRequestRow.kernel_name.in_(names),
                    ShapeRequestRow.device_name == device_name,
                    ShapeRequestRow.status == "refused",
                    ShapeRequestRow.message.in_([UNSERVED, UNSERVED_VERSION]),
                )
                .values(status="queued", owner=None, message=None)
            )

    def beat(self, owner: Owner, *, state: str, request_id: int | None, lease_s: float) -> None:
        """The heartbeat, and the lease of the request the service works on."""

        def attempt() -> None:
            now = self.db.now()
            with self.db.session(write=True) as s:
                s.execute(
                    update(ServiceRow)
                    .where(ServiceRow.owner == owner.id)
                    .values(last_beat=now, state=state, request_id=request_id)
                )
                if request_id is not None:
                    s.execute(
                        update(ShapeRequestRow)
                        .where(
                            ShapeRequestRow.id == request_id,
                            ShapeRequestRow.owner == owner.id,
                            ShapeRequestRow.status == "running",
                        )
                        .values(lease_until=now + timedelta(seconds=lease_s))
                    )

        self.db.retrying(attempt)

    def stopped(self, owner: Owner) -> None:
        with self.db.session(write=True) as s:
            s.execute(
                update(ServiceRow)
                .where(ServiceRow.owner == owner.id)
                .values(state="stopped", request_id=None, last_beat=self.db.now())
            )

    def serving(self, source_hash: str, host: str, *, lease_s: float) -> list[tuple[Service, dict[str, Any]]]:
        """The live services of ``host`` running the kernel file of ``source_hash``, with its entry."""
        now = self.db.now()
        return [
            (x, k)
            for x in self.listed()
            if x.host == host and x.alive(now, lease_s)
            for k in x.kernel_info
            if k.get("source_hash") == source_hash
        ]

    def listed(self) -> list[Service]:
        """Every service row, newest start first; a row that does not read as one (anyone with write access
        may have stored anything JSON and SQLite hold) is left out: it never ends a service or a command."""
        with self.db.session() as s:
            rows = s.scalars(
                select(ServiceRow).order_by(ServiceRow.started.desc(), ServiceRow.id.desc())
            ).all()
            return [x for x in map(_service, rows) if x is not None]

    # ---------------------------------------------------------------- the queue

    def enqueue(
        self,
        kernel_name: str,
        dims: dict[str, int],
        shape_key: str,
        device_name: str,
        dtypes_key: str = "",
        options: dict[str, Any] | None = None,
        *,
        source_hash: str = "",
        space_hash: str = "",
    ) -> int:
        """Queue a shape (``autotune request``; ``autotune search`` with its budget in ``options``): counted
        like a recorded miss, and queued again when it was done or refused before (a running one stays with
        its service, whose report the waiting command then reads). Returns the request's id."""
        now = self.db.now()
        ident = (
            ShapeRequestRow.kernel_name == kernel_name,
            ShapeRequestRow.shape_key == shape_key,
            ShapeRequestRow.dtypes_key == dtypes_key,
            ShapeRequestRow.device_name == device_name,
            ShapeRequestRow.source_hash == source_hash,
            ShapeRequestRow.space_hash == space_hash,
        )
        new = RequestCount(
            kernel_name, shape_key, dims, device_name, 1, now, now, dtypes_key, source_hash, space_hash
        )

        def attempt() -> int:
            # one transaction: a service woken by the NOTIFY never sees the row without its options
            with self.db.session(write=True) as s:
                row = s.scalars(select(ShapeRequestRow).where(*ident).with_for_update()).first()
                if row is None:
                    try:
                        with s.begin_nested():  # another command queued it first: use its row
                            s.add(row := request_row(new))
                    except IntegrityError:
                        row = s.scalars(select(ShapeRequestRow).where(*ident).with_for_update()).one()
                        row.count += 1
                else:
                    row.count, row.last_seen = row.count + 1, now
                if row.status != "running":  # a running one stays with its service
                    row.status, row.owner, row.lease_until, row.message = "queued", None, None, None
                    row.options, row.report = options, None
                s.flush()
                notify(s, self.db)
                return int(row.id)

        return self.db.retrying(attempt)

    @staticmethod
    def _takeable(now: datetime) -> ColumnElement[bool]:
        return or_(
            ShapeRequestRow.status == "queued",
            and_(ShapeRequestRow.status == "running", ShapeRequestRow.lease_until < now),
        )

    def listen(self) -> Listener | None:
        """A NOTIFY listener on Postgres; None on SQLite (the service polls)."""
        return None if self.db.is_sqlite else Listener(self.db)

    def anything_to_do(self, owner: Owner, device_name: str) -> bool:
        """One read: whether the queue holds anything an idle service may have to write for (a queued
        request on its device to take or refuse, a running one whose lease expired or whose owner is known
        dead). An idle poll that finds nothing costs this one transaction, not four (issue 45)."""
        now = self.db.now()
        with self.db.session() as s:
            rows = s.execute(
                select(
                    ShapeRequestRow.status,
                    ShapeRequestRow.owner,
                    ShapeRequestRow.lease_until,
                    ShapeRequestRow.device_name,
                ).where(ShapeRequestRow.status.in_(("queued", "running")))
            ).all()

        def work(status: str, taker: str | None, lease_until: datetime | None, device: str) -> bool:
            if status == "queued":
                return device == device_name
            expired = device == device_name and lease_until is not None and from_db_time(lease_until) < now
            return expired or bool(taker and owner_id_dead(taker, owner))

        return any(work(*row) for row in rows)

    def take(self, owner: Owner, kernels: list[Version], device_name: str, *, lease_s: float) -> Work | None:
        """One request for one of ``kernels`` (the versions the service loaded) on ``device_name``, now
        ``running`` under ``owner``'s lease; None when there is none. Most asked-for first. A request that
        names another version of the kernel is left for a service that runs it."""
        if not kernels:
            return None
        self._requeue_dead(owner)

        def takeable(now: datetime) -> Any:
            return (
                select(ShapeRequestRow)
                .where(
                    or_(*(_matches(k) for k in kernels)),
                    ShapeRequestRow.device_name == device_name,
                    self._takeable(now),
                )
                .order_by(ShapeRequestRow.count.desc(), ShapeRequestRow.id)
                .limit(1)
            )

        # a look without the write lock first: an idle SQLite service polls several times a second, and a
        # write transaction each time would queue behind (and delay) the searches writing their trials
        with self.db.session() as s:
            if s.scalars(takeable(self.db.now())).first() is None:
                return None

        def attempt() -> Work | None:
            now = self.db.now()
            with self.db.session(write=True) as s:
                row = s.scalars(takeable(now).with_for_update(skip_locked=True)).first()
                if row is None:
                    return None
                won = s.execute(
                    update(ShapeRequestRow)
                    .where(ShapeRequestRow.id == row.id, self._takeable(now))
                    .values(status="running", owner=owner.id, lease_until=now + timedelta(seconds=lease_s))
                    .execution_options(synchronize_session=False)
                ).rowcount
                if won != 1:  # another service took it between the read and the update
                    return None
                return Work(
                    row.id,
                    row.kernel_name,
                    row.shape_key,
                    row.dims,
                    row.dtypes_key,
                    row.device_name,
                    row.options,
                    row.source_hash or "",
                    row.space_hash or "",
                )

        return self.db.retrying(attempt)

    def _requeue_dead(self, me: Owner) -> None:
        """Queue again the running requests of services known dead (a process of this host and pid
        namespace that is gone: killed with -9), without waiting for their lease."""
        with self.db.session() as s:
            running = s.execute(
                select(ShapeRequestRow.id, ShapeRequestRow.owner).where(ShapeRequestRow.status == "running")
            ).all()
        dead = [(i, o) for i, o in running if o and owner_id_dead(o, me)]
        if not dead:
            return
        with self.db.session(write=True) as s:
            for request_id, dead_owner in dead:  # still that owner's: nobody took it over meanwhile
                s.execute(
                    update(ShapeRequestRow)
                    .where(
                        ShapeRequestRow.id == request_id,
                        ShapeRequestRow.owner == dead_owner,
                        ShapeRequestRow.status == "running",
                    )
                    .values(status="queued", owner=None, lease_until=None)
                )

    def finish(
        self,
        request_id: int,
        owner: Owner,
        status: str,
        message: str,
        report: dict[str, Any] | None = None,
    ) -> bool:
        """Mark ``owner``'s request ``done`` or ``refused`` (with the search's report, if one ran); False
        when it is no longer ours (its lease expired and another service took it over)."""
        assert status in ("done", "refused")
        now = self.db.now()
        with self.db.session(write=True) as s:
            res = s.execute(
                update(ShapeRequestRow)
                .where(ShapeRequestRow.id == request_id, ShapeRequestRow.owner == owner.id)
                .values(
                    status=status,
                    lease_until=None,
                    message=message,
                    report=report,
                    tuned_at=now if status == "done" else None,
                )
            )
            return bool(res.rowcount)

    def refuse_unserved(self, owner: Owner, device_name: str, *, lease_s: float) -> list[Work]:
        """Refuse the queued requests on ``device_name`` whose kernel no live service there serves; never
        while a service is still starting (its kernels are not known yet). Returns the refused."""
        now = self.db.now()
        # the caller itself lives, whatever its last beat says (a beat delayed on a loaded host made a
        # service refuse its own kernel's requests)
        services = [x for x in self.listed() if x.owner == owner.id or x.alive(now, lease_s)]
        if any(x.state == "starting" for x in services):
            return []
        served = [Version.of(k) for x in services if x.device_name == device_name for k in x.kernel_info]
        with self.db.session(write=True) as s:
            rows = s.scalars(
                select(ShapeRequestRow)
                .where(ShapeRequestRow.device_name == device_name, ShapeRequestRow.status == "queued")
                .with_for_update(skip_locked=True)
            ).all()
            refused = [
                r
                for r in rows
                if not any(v.serves(r.kernel_name, r.source_hash or "", r.space_hash or "") for v in served)
            ]
            names = {v.name for v in served}
            for r in refused:
                r.status, r.owner = "refused", owner.id
                r.message = UNSERVED if r.kernel_name not in names else UNSERVED_VERSION
            return [
                Work(r.id, r.kernel_name, r.shape_key, None, r.dtypes_key, r.device_name) for r in refused
            ]

    def hand_back(self, owner: Owner) -> int:
        """Put ``owner``'s running requests back in the queue (a service stopping mid-request)."""
        with self.db.session(write=True) as s:
            res = s.execute(
                update(ShapeRequestRow)
                .where(ShapeRequestRow.owner == owner.id, ShapeRequestRow.status == "running")
                .values(status="queued", owner=None, lease_until=None)
            )
            notify(s, self.db)
            return int(res.rowcount or 0)

    def outcome(self, request_id: int) -> Outcome:
        """Where a request stands (``autotune search`` waiting on a service polls it)."""
        with self.db.session() as s:
            row = s.get_one(ShapeRequestRow, request_id)
            report = row.report if isinstance(row.report, dict) else None
            return Outcome(row.status, row.message, report, row.owner)

    def queue_counts(self) -> dict[str, int]:
        """Requests by status (``autotune serve``'s queue-depth metric): one grouped read."""
        with self.db.session() as s:
            rows = s.execute(
                select(ShapeRequestRow.status, func.count()).group_by(ShapeRequestRow.status)
            ).all()
            return {str(status): int(n) for status, n in rows}

    def status_of(self, request_id: int) -> tuple[str, str | None]:
        """(status, message) of a request."""
        with self.db.session() as s:
            row = s.get_one(ShapeRequestRow, request_id)
            return row.status, row.message
