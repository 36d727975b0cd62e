"""Keeps this process's claims alive: renews the leases of all its running claims in one statement every
third of the lease, from a background thread, for as long as the search runs."""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

log = logging.getLogger("autotune.engine")


class LeaseRenewer(Protocol):
    """What renews the leases: the store's claims role (``autotune.store.protocols.ClaimStore`` has this
    method; spelled here because engine/ never imports the store)."""

    def renew(self, owner: Any, *, lease_s: float) -> int: ...


class LeaseKeeper:
    def __init__(self, claims: LeaseRenewer, owner: Any, lease_s: float):
        self.claims, self.owner, self.lease_s = claims, owner, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autotune-leases", daemon=True)
        self.renewals = 0

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.claims.renew(self.owner, lease_s=self.lease_s)
                self.renewals += 1
            except Exception as e:  # an outage: the main loop reports it (one line); keep trying meanwhile
                log.debug("could not renew claim leases: %s", e)
