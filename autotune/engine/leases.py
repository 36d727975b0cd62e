"""Keeps this process's claims alive: renews the leases of all its running claims in one statement every
third of the lease, from a background thread, for as long as the search runs."""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("autotune.engine")


class LeaseKeeper:
    def __init__(self, store: Any, owner: Any, lease_s: float):
        self.store, self.owner, self.lease_s = store, owner, lease_s
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
                self.store.renew_claims(self.owner, lease_s=self.lease_s)
                self.renewals += 1
            except Exception as e:  # an outage: the main loop reports it (one line); keep trying meanwhile
                log.debug("could not renew claim leases: %s", e)
