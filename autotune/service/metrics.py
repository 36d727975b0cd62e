"""``autotune serve --metrics-port PORT``: Prometheus metrics (``prometheus-client``, a registry of the
service's own) and the health endpoints a Kubernetes probe or a load balancer asks, on one small HTTP server
in a daemon thread.

- ``/metrics``: the queue by state (read with the heartbeat, never per scrape: a scrape costs no query),
  searches and evaluations by kernel, requests ended by outcome, evaluations that failed by status, a
  histogram of search seconds, the last heartbeat that reached the database, whether it LISTENs;
- ``/healthz`` (liveness): 200 while the service's loop and heartbeat thread live, 503 once it stops;
- ``/readyz`` (readiness): 200 once its kernels are loaded and its last heartbeat reached the database
  within the lease; 503 while starting, stopping or cut off from the database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

#: request states of the queue (``store.models.REQUEST_STATUSES``), always exported (0 when none)
QUEUE_STATES = ("queued", "running", "done", "refused")
#: search seconds: a handed-over one-evaluation search (seconds) to a default search on a slow kernel
SEARCH_BUCKETS = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass(frozen=True)
class Health:
    """What the probes read: whether the loop lives, whether it serves."""

    live: bool
    ready: bool
    state: str


class Metrics:
    """The service's metrics; every method is cheap and thread-safe (prometheus-client's own locks)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue = Gauge(
            "autotune_serve_queue_requests", "Requests in the database by state", ["state"], registry=r
        )
        self.searches = Counter(
            "autotune_serve_searches", "Searches this service ran", ["kernel"], registry=r
        )
        self.evaluations = Counter(
            "autotune_serve_evaluations", "Configs compiled and timed by this service", ["kernel"], registry=r
        )
        self.requests = Counter(
            "autotune_serve_requests", "Requests this service ended, by outcome", ["outcome"], registry=r
        )
        self.failures = Counter(
            "autotune_serve_evaluation_failures",
            "Evaluations that failed, by trial status",
            ["status"],
            registry=r,
        )
        self.search_seconds = Histogram(
            "autotune_serve_search_seconds", "Wall seconds of one search", buckets=SEARCH_BUCKETS, registry=r
        )
        self.last_beat = Gauge(
            "autotune_serve_last_heartbeat_timestamp_seconds",
            "Unix time of the last heartbeat that reached the database",
            registry=r,
        )
        self.listening = Gauge(
            "autotune_serve_listening",
            "1 while a Postgres LISTEN wakes the service, 0 while it polls",
            registry=r,
        )
        for state in QUEUE_STATES:
            self.queue.labels(state).set(0)

    def searched(self, kernel: str, seconds: float, evaluations: int, statuses: Mapping[str, int]) -> None:
        self.searches.labels(kernel).inc()
        self.evaluations.labels(kernel).inc(evaluations)
        self.search_seconds.observe(seconds)
        for status, n in statuses.items():
            if status not in ("ok", "invalid") and n > 0:
                self.failures.labels(status).inc(n)

    def beat(self, queue: Mapping[str, int]) -> None:
        self.last_beat.set(time.time())
        for state in QUEUE_STATES:
            self.queue.labels(state).set(queue.get(state, 0))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer:
    """The HTTP server of ``/metrics``, ``/healthz`` and ``/readyz``, in a daemon thread."""

    def __init__(self, metrics: Metrics, health: Callable[[], Health], host: str, port: int) -> None:
        handler = _handler(metrics, health)
        try:
            self.server = ThreadingHTTPServer((host, port), handler)
        except OSError as e:
            from autotune.errors import SettingsError

            raise SettingsError(
                f"--metrics-port {port}: cannot listen on {host or '*'}:{port}: {e.strerror}"
            ) from e
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="autotune-serve-metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(metrics: Metrics, health: Callable[[], Health]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, metrics.exposition(), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                h = health()
                ok = h.live if path == "/healthz" else h.ready
                self._send(
                    200 if ok else 503, f"{'ok' if ok else 'not ok'}: {h.state}\n".encode(), "text/plain"
                )
            else:
                self._send(404, b"not found: /metrics, /healthz, /readyz\n", "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a probe every few seconds must not flood the service's log

    return Handler
