"""Claims: the work-queue pattern on the results database (a unique row per (key, config) with an owner
and a lease), so that searches on many processes and hosts never measure a config twice.

- ``claim`` inserts the row (the unique constraint lets exactly one inserter win), or finds it: ``done``
  (reuse the stored trial), ``busy`` (another live owner holds it), or reclaimable (``stale``: the lease
  expired, or the owner was a process of this host *and* pid namespace that no longer exists) and then
  takes it over. Containers share hostnames and reuse pids: a pid not visible here says nothing about an
  owner in another pid namespace, so only its lease counts;
- the owner renews the leases of all its running claims in one statement (``renew``) while it lives;
- the trials role marks the claim done (``complete``) in the same transaction that stores the trial;
- ``release`` drops an interrupted owner's running claims so others need not wait for the lease;
  ``close_stale`` drops those of dead owners (kill -9), so nothing shows them as running."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from autotune.store.database import Database
from autotune.store.models import ClaimRow, TrialRow
from autotune.store.rows import from_db_time


def _pid_namespace() -> str:
    """This process's pid namespace (the inode of /proc/self/ns/pid): pids compare only within one."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:  # no /proc (macOS): one namespace per host
        return "host"


@dataclass(frozen=True)
class Owner:
    """A claiming process: host, pid, a random token (pids are reused) and its pid namespace (hosts in
    containers share a hostname and pids: a pid is only comparable inside its namespace)."""

    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    token: str = field(default_factory=lambda: secrets.token_hex(4))
    namespace: str = field(default_factory=_pid_namespace)

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}:{self.token}:{self.namespace}"


def _namespace_of(owner_id: str) -> str | None:
    """The pid namespace in a stored owner id; None for ids written before it was recorded (then only
    the lease tells whether the owner lives)."""
    parts = owner_id.rsplit(":", 3)
    return parts[3] if len(parts) == 4 else None


def owner_dead(owner_id: str, host: str | None, pid: int | None, me: Owner) -> bool:
    """Whether the owner of a claim is known dead: a process of ``me``'s host and pid namespace that no
    longer exists. Anything else may live, whatever its pid looks like here."""
    return (
        host == me.host
        and pid is not None
        and pid > 0
        and pid != me.pid
        and _namespace_of(owner_id or "") == me.namespace
        and not _pid_alive(pid)
    )


def owner_id_dead(owner_id: str, me: Owner) -> bool:
    """``owner_dead`` from an owner id alone (host:pid:token:namespace), e.g. a nightly run's."""
    parts = owner_id.rsplit(":", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return False
    return owner_dead(owner_id, parts[0], int(parts[1]), me)


def stale(row: Any, me: Owner, now: Any) -> bool:
    """Whether a running claim may be taken over or closed: its lease expired, or its owner is dead."""
    return from_db_time(row.lease_expires_at) <= now or owner_dead(row.owner, row.host, row.pid, me)


class ClaimState(str, Enum):
    CLAIMED = "claimed"  # ours now: evaluate it
    DONE = "done"  # measured already: reuse trial_id
    BUSY = "busy"  # another live process is evaluating it


@dataclass(frozen=True)
class Claim:
    state: ClaimState
    attempts: int = 0
    trial_id: int | None = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return True
    return True


class Claims:
    """The claims of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(
        self, key_id: int, config_hash: str, owner: Owner, *, device: str = "", lease_s: float
    ) -> Claim:
        """Try to take (key, config) for ``owner``; see the module docstring for the outcomes."""
        return self.claim_many(key_id, [config_hash], owner, device=device, lease_s=lease_s)[config_hash]

    def claim_many(
        self, key_id: int, config_hashes: list[str], owner: Owner, *, device: str = "", lease_s: float
    ) -> dict[str, Claim]:
        """``claim`` for several configs in one transaction (one round trip per batch on the hot path).
        Rows are taken in sorted order, so two processes claiming overlapping batches never deadlock."""

        def attempt() -> dict[str, Claim]:
            now = self.db.now()
            expires = now + timedelta(seconds=lease_s)
            with self.db.session(write=True) as s:
                return {
                    h: self._claim_one(s, key_id, h, owner, device, now, expires)
                    for h in sorted(set(config_hashes))
                }

        return self.db.retrying(attempt)

    def _claim_one(
        self, s: Session, key_id: int, config_hash: str, owner: Owner, device: str, now: Any, expires: Any
    ) -> Claim:
        stmt = (
            select(ClaimRow)
            .where(ClaimRow.key_id == key_id, ClaimRow.config_hash == config_hash)
            .with_for_update()
        )
        row = s.scalars(stmt).first()
        if row is None:
            try:
                with s.begin_nested():  # losing the insert race must not abort the transaction
                    s.add(
                        ClaimRow(
                            key_id=key_id,
                            config_hash=config_hash,
                            status="running",
                            owner=owner.id,
                            host=owner.host,
                            pid=owner.pid,
                            device=device or None,
                            attempts=1,
                            lease_expires_at=expires,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                return Claim(ClaimState.CLAIMED, attempts=1)
            except IntegrityError:
                row = s.scalars(stmt).one()
        if row.status == "done":
            return Claim(ClaimState.DONE, attempts=row.attempts, trial_id=row.trial_id)
        if row.owner == owner.id:
            return Claim(ClaimState.CLAIMED, attempts=row.attempts)
        if not stale(row, owner, now):
            return Claim(ClaimState.BUSY, attempts=row.attempts)
        # the owner died: take it over (the row lock makes one taker win)
        row.owner, row.host, row.pid, row.device = owner.id, owner.host, owner.pid, device or None
        row.attempts += 1
        row.lease_expires_at, row.updated_at = expires, now
        return Claim(ClaimState.CLAIMED, attempts=row.attempts)

    def renew(self, owner: Owner, *, lease_s: float) -> int:
        """Extend the lease of every running claim of ``owner``; returns how many."""
        now = self.db.now()
        with self.db.session(write=True) as s:
            res = s.execute(
                update(ClaimRow)
                .where(ClaimRow.owner == owner.id, ClaimRow.status == "running")
                .values(lease_expires_at=now + timedelta(seconds=lease_s), updated_at=now)
            )
            return int(res.rowcount or 0)

    def release(self, owner: Owner, config_hashes: list[str] | None = None) -> int:
        """Drop ``owner``'s running claims (all, or those of ``config_hashes``): an interrupted search
        hands its unfinished work back at once instead of after the lease."""
        stmt = delete(ClaimRow).where(ClaimRow.owner == owner.id, ClaimRow.status == "running")
        if config_hashes is not None:
            if not config_hashes:
                return 0
            stmt = stmt.where(ClaimRow.config_hash.in_(config_hashes))
        with self.db.session(write=True) as s:
            return int(s.execute(stmt).rowcount or 0)

    def close_stale(self) -> int:
        """Drop the running claims of dead owners (``stale``): a search killed with -9 never released its
        own, and they must not show as running nor wait out their lease here. Returns how many."""
        me, now = Owner(), self.db.now()
        with self.db.session(write=True) as s:
            rows = s.scalars(select(ClaimRow).where(ClaimRow.status == "running")).all()
            dead = [r.id for r in rows if stale(r, me, now)]
            if dead:
                s.execute(delete(ClaimRow).where(ClaimRow.id.in_(dead), ClaimRow.status == "running"))
        return len(dead)

    def running(self, key_id: int) -> dict[str, str]:
        """config hash -> owner of a key's running claims."""
        with self.db.session() as s:
            rows = s.execute(
                select(ClaimRow.config_hash, ClaimRow.owner).where(
                    ClaimRow.key_id == key_id, ClaimRow.status == "running"
                )
            ).all()
            return {h: o for h, o in rows}

    def settled_trials(self, key_id: int, *, older_than_s: float) -> set[int]:
        """Ids of a key's trials whose measuring process is gone or finished long ago: no live process will
        write them to the Optuna study any more (a dead owner on this host, or stored ``older_than_s``
        ago), so a new search may adopt them. Invalid trials take no claim and count as settled when old."""
        cutoff = self.db.now() - timedelta(seconds=older_than_s)
        me = Owner()
        with self.db.session() as s:
            rows = s.execute(
                select(TrialRow.id, TrialRow.finished_at, ClaimRow.owner, ClaimRow.host, ClaimRow.pid)
                .outerjoin(ClaimRow, ClaimRow.trial_id == TrialRow.id)
                .where(TrialRow.key_id == key_id)
            ).all()
        out = set()
        for trial_id, finished, owner_id, owner_host, pid in rows:
            old = finished is None or from_db_time(finished) < cutoff
            if old or owner_dead(owner_id or "", owner_host, pid, me):
                out.add(trial_id)
        return out

    def complete(self, s: Session, key_id: int, row: TrialRow) -> None:
        """Mark the claim of a just-stored search trial done, in the caller's (the trials role's) session,
        creating it when the trial was stored without one: still no one measures the config again."""
        claim = s.scalars(
            select(ClaimRow)
            .where(ClaimRow.key_id == key_id, ClaimRow.config_hash == row.config_hash)
            .with_for_update()
        ).first()
        now = self.db.now()
        if claim is None:  # stored without a claim (a direct trials.record)
            try:
                with s.begin_nested():
                    s.add(
                        ClaimRow(
                            key_id=key_id,
                            config_hash=row.config_hash,
                            status="done",
                            owner=row.worker or "",
                            host=row.hostname or "",
                            pid=0,
                            device=row.device,
                            attempts=1,
                            lease_expires_at=now,
                            trial_id=row.id,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                return
            except IntegrityError:
                claim = s.scalars(
                    select(ClaimRow).where(ClaimRow.key_id == key_id, ClaimRow.config_hash == row.config_hash)
                ).one()
        claim.status, claim.trial_id, claim.updated_at = "done", row.id, now
        claim.device = row.device or claim.device  # the device it was measured on, known only now
