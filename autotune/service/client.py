"""``autotune search`` handing its shapes to a live ``autotune serve`` of this host and database: the
service's workers are warm (seconds of torch, CUDA and profiler start-up saved), and its search is the same
loop. The command queues each shape with its budget, shows the service's evaluations as they are stored
(the trials table: the same progress lines or bar as in-process), waits for the rows to be done, and reads
back the reports the service stored, which it prints as its own.

Only a search the service can run as asked is handed over: shapes given, no option that changes how
configs are compiled or timed (those are the service's), the service runs this very kernel file (by its
hash) on the device asked for. Anything else, or no live service, and the command searches in-process."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from autotune import timeline
from autotune.errors import SettingsError
from autotune.settings import SearchSettings, serve_settings
from autotune.shapes import Shape, check_shape, format_shape
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus
from autotune.tuning.report import ShapeReport, TrialEvent, report_from_dict

#: the ``SearchSettings`` a search hands over with its shapes; the others are the service's own
HANDED_OVER = ("trials", "timeout_s", "strategy", "seed", "devices")
#: seconds between two looks at the requests while waiting (a SQLite or Postgres primary-key read)
POLL_S = 0.05
#: seconds between two checks that the service still lives (its heartbeat row)
ALIVE_CHECK_S = 2.0


def find_service(store: Store, source_hash: str, devices: str) -> tuple[Any, dict[str, Any]] | None:
    """A live, started service of this host running the kernel file of ``source_hash`` on the devices the
    search asks for (``--devices`` as given, "" for the default: the service's were given alike), with its
    entry for the kernel; None when there is none."""
    found = store.services.serving(source_hash, socket.gethostname(), lease_s=serve_settings().lease_s)
    for service, kernel in found:
        if service.state in ("idle", "tuning") and service.devices == (devices or "default"):
            return service, kernel
    return None


class Progress(Protocol):
    """What ``tuning.progress.SearchProgress`` offers a search: the client drives it from the trials table."""

    def say(self, line: str) -> None: ...
    def start_shape(self, shape: Shape, budget: int | None) -> None: ...
    def on_event(self, ev: TrialEvent) -> None: ...
    def finish_shape(self, report: ShapeReport) -> None: ...


def hand_over(
    store: Store,
    service: Any,
    kernel: dict[str, Any],
    shapes: Sequence[dict[str, int]],
    settings: SearchSettings,
    progress: Progress,
) -> list[ShapeReport] | None:
    """Queue ``shapes`` for ``service`` under ``settings``' budget and wait for its reports; None when the
    service went away before finishing (the caller then searches in-process: the claims hand it what the
    service already measured). A shape the service refused is a ``SettingsError``."""
    params = tuple(kernel.get("shape_params") or ())
    checked: list[Shape] = [check_shape(s, params) for s in shapes]  # the same message as in-process
    options = {
        "trials": settings.trials,
        "timeout_s": settings.timeout_s,
        "strategy": settings.strategy,
        "seed": settings.seed,
    }
    name = str(kernel["name"])
    after = store.trials.last_id()  # what the service stores after this is the search's progress
    # the version the service announced for this file: no other service's version takes it
    version = {
        "source_hash": str(kernel.get("source_hash") or ""),
        "space_hash": str(kernel.get("space_hash") or ""),
    }
    ids = [
        store.services.enqueue(
            name, s, format_shape(s), service.device_name or "", options=options, **version
        )
        for s in checked
    ]
    progress.say(
        f"handed to autotune serve (pid {service.pid} on {service.host}, {service.device_name}): "
        f"{len(ids)} shape(s) of {name}; strategy {settings.strategy}; `--local` searches in this process"
    )
    watched = [
        _Watched(
            i,
            s,
            _Stream(store, name, str(kernel.get("source_hash", "")), s, service.device_name or "", after),
        )
        for i, s in zip(ids, checked, strict=True)
    ]
    return _wait(store, service, watched, settings.trials, progress)


class _Stream:
    """A handed-over shape's evaluations as the service stores them, told to the progress display as the
    in-process search tells its own (``TrialEvent``: count, budget, best so far)."""

    def __init__(self, store: Store, kernel: str, source_hash: str, shape: Shape, device: str, after: int):
        self.store, self.shape, self.after = store, shape, after
        self.query = (kernel, source_hash, format_shape(shape), device)
        self.evaluations = 0
        self.best: TrialResult | None = None

    def poll(self, budget: int | None, on_event: Callable[[TrialEvent], None]) -> None:
        for trial_id, r in self.store.trials.searched_since(*self.query, self.after):
            self.after = trial_id
            if r.status is not TrialStatus.INVALID:
                self.evaluations += 1
            if (
                r.status is TrialStatus.OK
                and r.time_s
                and (self.best is None or r.time_s < (self.best.time_s or 0))
            ):
                self.best = r
            on_event(TrialEvent(self.shape, r, False, self.evaluations, budget or 0, self.best))


class _Watched:
    def __init__(self, request_id: int, shape: Shape, stream: _Stream):
        self.request_id, self.shape, self.stream = request_id, shape, stream
        self.status = ""
        self.report: ShapeReport | None = None
        #: when this shape's request entered its current status (``AUTOTUNE_TRACE_STARTUP``'s spans)
        self.since = time.time()


def _trace(w: _Watched, status: str) -> None:
    """A handed-over shape's wait in the start-up timeline: queued until the service took it, then its search
    (as this process sees it, polling every ``POLL_S``)."""
    now = time.time()
    if status in ("running", "done"):
        was = "queued until the service took it" if status == "running" else "the service's search"
        timeline.span(f"{format_shape(w.shape)}: {was}", w.since, now)
    w.since = now


def _wait(
    store: Store, service: Any, watched: list[_Watched], budget: int | None, progress: Progress
) -> list[ShapeReport] | None:
    next_alive = time.monotonic() + ALIVE_CHECK_S
    while any(w.report is None for w in watched):
        for w in watched:
            if w.report is not None:
                continue
            outcome = store.services.outcome(w.request_id)
            if outcome.status == "refused":
                raise SettingsError(f"autotune serve refused {format_shape(w.shape)}: {outcome.message}")
            if outcome.status != w.status:
                w.status = outcome.status
                _trace(w, outcome.status)
                if outcome.status == "running":
                    progress.start_shape(w.shape, budget)
                elif outcome.status != "done":
                    progress.say(f"{format_shape(w.shape)}: {outcome.status}")
            if outcome.status in ("running", "done"):
                w.stream.poll(budget, progress.on_event)  # what was stored before it said done, too
            if outcome.status == "done":
                if outcome.report is None:  # served as already tuned, without a search: search here
                    return None
                w.report = report_from_dict(outcome.report)
                progress.finish_shape(w.report)
        if all(w.report is not None for w in watched):
            break
        if time.monotonic() > next_alive:
            next_alive = time.monotonic() + ALIVE_CHECK_S
            if not _still_serving(store, service):
                progress.say("the service stopped before finishing: searching in this process")
                return None
        time.sleep(POLL_S)
    return [w.report for w in watched if w.report is not None]


def _still_serving(store: Store, service: Any) -> bool:
    """Its row beats within the lease, and its process (of this host: a handed-over search's service is)
    is not known gone: a service killed with -9 is noticed at once, not a lease later."""
    from autotune.store.claims import Owner, owner_id_dead

    lease_s = serve_settings().lease_s
    if owner_id_dead(service.owner, Owner()):
        return False
    return any(x.owner == service.owner and x.alive(store.db.now(), lease_s) for x in store.services.listed())
