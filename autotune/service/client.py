"""``autotune search`` handing its shapes to a live ``autotune serve`` of this host and database: the
service's workers are warm (seconds of torch, CUDA and profiler start-up saved), and its search is the same
loop. The command queues each shape with its budget, waits for the rows to be done, and reads back the
reports the service stored, which it prints as its own.

Only a search the service can run as asked is handed over: shapes given, no option that changes how
configs are compiled or timed (those are the service's), the service runs this very kernel file (by its
hash) on the device asked for. Anything else, or no live service, and the command searches in-process."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from autotune.errors import SettingsError
from autotune.settings import SearchSettings, serve_settings
from autotune.shapes import Shape, check_shape, format_shape
from autotune.store import Store
from autotune.tuning.shape_search import ShapeReport, report_from_dict

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


def hand_over(
    store: Store,
    service: Any,
    kernel: dict[str, Any],
    shapes: Sequence[dict[str, int]],
    settings: SearchSettings,
    say: Callable[[str], None],
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
    ids = [
        store.services.enqueue(name, s, format_shape(s), service.device_name or "", options=options)
        for s in checked
    ]
    say(
        f"handed to autotune serve (pid {service.pid} on {service.host}, {service.device_name}): "
        f"{len(ids)} shape(s) of {name}; strategy {settings.strategy}; `--local` searches in this process"
    )
    return _wait(store, service, ids, checked, say)


def _wait(
    store: Store, service: Any, ids: list[int], shapes: list[Shape], say: Callable[[str], None]
) -> list[ShapeReport] | None:
    reports: dict[int, ShapeReport] = {}
    said: dict[int, str] = {}
    next_alive = time.monotonic() + ALIVE_CHECK_S
    while len(reports) < len(ids):
        for request_id, shape in zip(ids, shapes, strict=True):
            if request_id in reports:
                continue
            outcome = store.services.outcome(request_id)
            if outcome.status == "refused":
                raise SettingsError(f"autotune serve refused {format_shape(shape)}: {outcome.message}")
            if outcome.status == "done":
                if outcome.report is None:  # served as already tuned, without a search: search here
                    return None
                reports[request_id] = report_from_dict(outcome.report)
            elif said.get(request_id) != outcome.status:
                said[request_id] = outcome.status
                say(f"{format_shape(shape)}: {outcome.status}")
        if len(reports) == len(ids):
            break
        if time.monotonic() > next_alive:
            next_alive = time.monotonic() + ALIVE_CHECK_S
            if not _still_serving(store, service):
                say("the service stopped before finishing: searching in this process")
                return None
        time.sleep(POLL_S)
    return [reports[i] for i in ids]


def _still_serving(store: Store, service: Any) -> bool:
    from autotune.store.models import utcnow

    lease_s = serve_settings().lease_s
    return any(x.owner == service.owner and x.alive(utcnow(), lease_s) for x in store.services.listed())
