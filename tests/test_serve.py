"""``autotune serve`` with real processes on the CPU: requests (``autotune request``, recorded misses) are
tuned through the same search as ``autotune search`` and readable by ``autotune best``; hostile requests are
refused and the service goes on; SIGTERM hands the request in flight back and exits 0; several services on one
Postgres tune every miss once, and a service killed with -9 has its request finished by another."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from autotune.store import RequestCount, Store, Version

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "kernels" / "tiny.py"
MATMUL = ROOT / "examples" / "matmul_cpu.py"
#: small budgets; a short lease and poll so that take-overs happen within a test
ENV = {
    "PYTHONPATH": str(ROOT),
    "AUTOTUNE_TRIALS": "2",
    "AUTOTUNE_RETIME_TOP": "0",
    "AUTOTUNE_NUM_TESTS": "3",
    "AUTOTUNE_SERVE_POLL": "0.3",
    "AUTOTUNE_SERVE_LEASE": "3",
    "AUTOTUNE_LEASE": "3",
}
#: how long a test waits for something that takes seconds (a loaded 2-core machine): a deadline, not a target
WAIT_S = 240.0


class Served:
    """One ``autotune serve`` process, its JSON log in a file."""

    def __init__(
        self,
        tmp: Path,
        db: str,
        kernels: list[Path],
        env: dict[str, str] | None = None,
        n: int = 0,
        args: tuple[str, ...] = (),
    ):
        self.log_path = tmp / f"serve{n}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autotune",
                "serve",
                "--devices",
                "cpu",
                "--db",
                db,
                "--log-format",
                "json",
            ]
            + [a for k in kernels for a in ("--kernels", str(k))]
            + list(args),
            cwd=ROOT,
            env={**os.environ, **ENV, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=self.log_path.open("w"),
        )

    def events(self) -> list[dict]:
        lines = self.log_path.read_text().splitlines() if self.log_path.exists() else []
        return [json.loads(x) for x in lines if x.startswith("{")]

    def wait_event(self, event: str, **match: object) -> dict:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for e in self.events():
                if e["event"] == event and all(e.get(k) == v for k, v in match.items()):
                    return e
            assert self.proc.poll() is None, f"the service exited ({self.proc.returncode}): {self.log_text()}"
            time.sleep(0.2)
        raise AssertionError(f"no {event} {match} in {WAIT_S} s: {self.log_text()}")

    def wait_event_after_exit(self, event: str) -> dict:
        return next(e for e in self.events() if e["event"] == event)

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=WAIT_S)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        cwd=ROOT,
        env={**os.environ, **ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )


def _miss(store: Store, kernel: str, dims: object, device: str, shape_key: str | None = None) -> None:
    """A request as ``best_config(..., record=True)`` writes it (or anyone with write access)."""
    now = datetime.now(timezone.utc)
    key = shape_key if shape_key is not None else ",".join(f"{k}={v}" for k, v in dict(dims).items())
    mapping = dims if isinstance(dims, dict) else {"N": 1}
    store.requests.add([RequestCount(kernel, key, mapping, device, 1, now, now)])
    if mapping is not dims:  # what no writer of ours stores, but the database accepts
        from sqlalchemy import update

        from autotune.store.models import ShapeRequestRow

        with store.db.session(write=True) as s:
            s.execute(update(ShapeRequestRow).where(ShapeRequestRow.shape_key == key).values(dims=dims))


def _cpu_name() -> str:
    from autotune.env import cpu_name

    return cpu_name()


def _wait_requests(store: Store, done: int) -> list:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rows = store.requests.recorded()
        if sum(r.status in ("done", "refused") for r in rows) >= done:
            return rows
        time.sleep(0.3)
    raise AssertionError(
        [(r.kernel_name, r.shape_key, r.status, r.message) for r in store.requests.recorded()]
    )


def _expire(store: Store, request_id: int) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from autotune.store.models import ShapeRequestRow

    past = datetime.now(timezone.utc) - timedelta(seconds=1)
    with store.db.session(write=True) as s:
        s.execute(update(ShapeRequestRow).where(ShapeRequestRow.id == request_id).values(lease_until=past))


def test_the_queue_gives_a_request_to_one_taker_until_its_lease_expires(db_url):
    from autotune.store import Owner

    cpu, a, b = _cpu_name(), Owner(), Owner()
    with Store.open(db_url, create=True) as store:
        first = store.services.enqueue("tiny", {"N": 8}, "N=8", cpu)
        second = store.services.enqueue("tiny", {"N": 9}, "N=9", cpu)
        assert (
            store.services.take(a, [Version("other", "v1")], cpu, lease_s=60) is None
        )  # not a kernel a serves
        assert store.services.take(a, [Version("tiny", "v1")], "another GPU", lease_s=60) is None
        got_a = store.services.take(a, [Version("tiny", "v1")], cpu, lease_s=60)
        got_b = store.services.take(b, [Version("tiny", "v1")], cpu, lease_s=60)
        assert {got_a.id, got_b.id} == {first, second}
        assert (
            store.services.take(b, [Version("tiny", "v1")], cpu, lease_s=60) is None
        )  # both taken, leases live
        _expire(store, got_a.id)  # a's lease runs out (a was killed with -9 on another host)
        again = store.services.take(b, [Version("tiny", "v1")], cpu, lease_s=60)
        assert again is not None and again.id == got_a.id
        assert store.services.take(a, [Version("tiny", "v1")], cpu, lease_s=60) is None  # nothing left
        assert not store.services.finish(got_a.id, a, "done", "late")  # no longer a's
        assert store.services.finish(got_a.id, b, "done", "tuned")
        assert store.services.status_of(got_a.id) == ("done", "tuned")
        assert store.services.hand_back(b) == 1  # b's other request, back in the queue
        assert store.services.status_of(got_b.id)[0] == "queued"


def test_an_idle_look_at_the_queue_takes_no_write_lock(sqlite_url):
    """An idle SQLite service looks at the queue several times a second: with nothing to take, the look reads
    only, so it returns while another process holds the write lock (a search storing its trials) instead of
    queueing behind it; a request queued meanwhile is still taken once the lock is free."""
    import sqlite3
    import threading

    from autotune.store import Owner

    cpu, owner = _cpu_name(), Owner()
    with Store.open(sqlite_url, create=True) as store:
        holder = sqlite3.connect(store.db.sqlite_path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the write lock, held until the end of the look
        got: list[object] = []
        look = threading.Thread(
            target=lambda: got.append(store.services.take(owner, [Version("tiny", "v1")], cpu, lease_s=60))
        )
        look.start()
        look.join(timeout=WAIT_S)
        returned_while_held = not look.is_alive() and holder.in_transaction
        holder.execute("ROLLBACK")
        holder.close()
        look.join()
        assert returned_while_held and got == [None]
        request_id = store.services.enqueue("tiny", {"N": 8}, "N=8", cpu)
        taken = store.services.take(owner, [Version("tiny", "v1")], cpu, lease_s=60)
        assert taken is not None and taken.id == request_id


@pytest.mark.postgres
def test_a_host_whose_clock_runs_ahead_takes_over_no_live_lease(pg_url, monkeypatch):
    """Issue 45: a host clock 90 s ahead took live requests (and claims: configs measured twice). Leases and
    heartbeats are compared on the database's clock: this host's corrected by its offset to the server's."""
    from datetime import datetime as real_datetime
    from datetime import timedelta

    from autotune.store import Owner
    from autotune.store.claims import ClaimState

    cpu, honest, ahead = _cpu_name(), Owner(), Owner()
    with Store.open(pg_url, create=True) as store:
        request_id = store.services.enqueue("tiny", {"N": 8}, "N=8", cpu)
        assert store.services.take(honest, [Version("tiny", "v1")], cpu, lease_s=60).id == request_id
        key = store.keys.ensure(
            "tiny", "a" * 64, "s" * 64, {}, {"N": 8}, "N=8", {"x": "float32"}, {"gpu_name": cpu}
        )
        assert store.claims.claim(key.id, "c" * 16, honest, lease_s=60).state is ClaimState.CLAIMED

    class Ahead(real_datetime):
        @classmethod
        def now(cls, tz=None):
            return real_datetime.now(tz) + timedelta(seconds=90)

    import autotune.store.database
    import autotune.store.models

    monkeypatch.setattr(autotune.store.database, "datetime", Ahead)
    monkeypatch.setattr(autotune.store.models, "datetime", Ahead)
    with Store(pg_url) as store:  # another process on the host whose clock runs ahead
        assert store.services.take(ahead, [Version("tiny", "v1")], cpu, lease_s=60) is None
        assert store.claims.claim(key.id, "c" * 16, ahead, lease_s=60).state is ClaimState.BUSY
        assert [
            x.owner for x in store.services.listed() if x.alive(store.db.now(), 60)
        ] == []  # none beat yet
        store.services.register(ahead, devices="cpu")
        assert [x.owner for x in store.services.listed() if x.alive(store.db.now(), 60)] == [ahead.id]


def test_a_request_nobody_serves_is_refused_and_queued_again_when_a_service_for_it_starts(db_url):
    from autotune.store import Owner

    cpu, a, b = _cpu_name(), Owner(), Owner()
    with Store.open(db_url, create=True) as store:
        other = store.services.enqueue("other", {"N": 8}, "N=8", cpu)
        store.services.register(a, devices="cpu")
        assert store.services.refuse_unserved(a, cpu, lease_s=60) == []  # a is still starting
        store.services.started(a, device_name=cpu, kernels=[{"name": "tiny"}])
        assert [w.id for w in store.services.refuse_unserved(a, cpu, lease_s=60)] == [other]
        assert store.services.status_of(other)[0] == "refused"
        store.services.register(b, devices="cpu")
        store.services.started(b, device_name=cpu, kernels=[{"name": "other"}])
        assert store.services.status_of(other) == ("queued", None)
        assert store.services.refuse_unserved(a, cpu, lease_s=60) == []  # b serves it now
        assert store.services.take(b, [Version("other", "v1")], cpu, lease_s=60).id == other


def test_a_request_for_one_version_is_taken_only_by_a_service_running_that_version(db_url):
    """Issue 45: services on v1 and v2 of one kernel: a request naming v2 (its source hash, and its space
    hash) is never taken by v1's service, and a request naming no version is taken by either; a version no
    live service runs is refused with its own reason and queued again when a service of it starts."""
    from autotune.store import Owner

    cpu, one, two = _cpu_name(), Owner(), Owner()
    v1, v2 = Version("tiny", "hash1", "space"), Version("tiny", "hash2", "space")
    with Store.open(db_url, create=True) as store:
        for_v2 = store.services.enqueue("tiny", {"N": 8}, "N=8", cpu, source_hash="hash2", space_hash="space")
        for_v1 = store.services.enqueue("tiny", {"N": 8}, "N=8", cpu, source_hash="hash1")
        other_space = store.services.enqueue(
            "tiny", {"N": 9}, "N=9", cpu, source_hash="hash2", space_hash="x"
        )
        assert len({for_v1, for_v2, other_space}) == 3  # one row per version of the same shape
        got = store.services.take(one, [v1], cpu, lease_s=60)
        assert got is not None and got.id == for_v1 and got.source_hash == "hash1"
        assert store.services.take(one, [v1], cpu, lease_s=60) is None  # v2's and the other space's stay
        got = store.services.take(two, [v2], cpu, lease_s=60)
        assert got is not None and got.id == for_v2
        assert store.services.take(two, [v2], cpu, lease_s=60) is None
        anyone = store.services.enqueue("tiny", {"N": 10}, "N=10", cpu)  # a miss naming no version
        assert store.services.take(one, [v1], cpu, lease_s=60).id == anyone
        store.services.register(one, devices="cpu")
        store.services.started(one, device_name=cpu, kernels=[{"name": "tiny", "source_hash": "hash1"}])
        refused = store.services.refuse_unserved(one, cpu, lease_s=60)
        assert [w.id for w in refused] == [other_space]
        status, message = store.services.status_of(other_space)
        assert status == "refused" and "version" in message
        store.services.register(two, devices="cpu")
        entry = {"name": "tiny", "source_hash": "hash2", "space_hash": "x"}
        store.services.started(two, device_name=cpu, kernels=[entry])
        assert store.services.status_of(other_space) == ("queued", None)


@pytest.mark.parametrize(
    "column, value",
    [("kernels", 5), ("kernels", {"name": 1}), ("kernels", [3, {"name": 7}]), ("pid", "abc"), ("host", None)],
)
def test_a_malformed_service_row_is_left_out_and_never_ends_a_reader(db_url, column, value):
    """Issue 45: one ``autotune_services`` row that anyone with write access spoiled (``'int' object is not
    iterable`` ended every service, for good) is left out of the listing; the others still read."""
    from sqlalchemy import update

    from autotune.store import Owner
    from autotune.store.models import ServiceRow

    good, bad, cpu = Owner(), Owner(), _cpu_name()
    with Store.open(db_url, create=True) as store:
        for o in (good, bad):
            store.services.register(o, devices="cpu")
            store.services.started(o, device_name=cpu, kernels=[{"name": "tiny", "source_hash": "h"}])
        try:
            with store.db.session(write=True) as s:
                s.execute(update(ServiceRow).where(ServiceRow.owner == bad.id).values({column: value}))
        except Exception:
            pytest.skip(f"{store.db.url.split(':')[0]} refuses {column}={value!r} itself")
        listed = {x.owner: x for x in store.services.listed()}
        assert good.id in listed and listed[good.id].kernels == ("tiny",)
        assert bad.id not in listed or listed[bad.id].kernels == ()  # read as serving nothing
        store.services.enqueue("other", {"N": 8}, "N=8", cpu)
        assert [w.kernel_name for w in store.services.refuse_unserved(good, cpu, lease_s=60)] == ["other"]
        assert store.services.serving("h", good.host, lease_s=60)


def test_a_requested_shape_is_tuned_and_autotune_best_returns_it(db_url, tmp_path):
    queued = _cli("request", str(MATMUL), "--shape", "M=64,N=64,K=32", "--device", "cpu", "--db", db_url)
    assert queued.returncode == 0 and "queued matmul_cpu M=64,N=64,K=32" in queued.stdout, queued.stderr
    service = Served(tmp_path, db_url, [MATMUL])
    try:
        tuned = service.wait_event("tuned", shape="M=64,N=64,K=32")
        assert tuned["message"].startswith("best ")
        best = _cli("best", "matmul_cpu", "--shape", "M=64,N=64,K=32", "--db", db_url)
        assert best.returncode == 0 and json.loads(best.stdout)["shape"] == {"M": 64, "N": 64, "K": 32}
        listed = _cli("show", "--services", "--format", "json", "--db", db_url)
        [row] = json.loads(listed.stdout)
        assert (
            row["pid"] == service.proc.pid
            and [k["name"] for k in row["kernel_info"]] == ["matmul_cpu"]
            and row["state"] == "idle"
        )
        # asked again: found tuned, not searched again
        again = _cli("request", str(MATMUL), "--shape", "M=64,N=64,K=32", "--device", "cpu", "--db", db_url)
        assert again.returncode == 0
        assert service.wait_event("tuned", shape="M=64,N=64,K=32", message=_already(service))
    finally:
        assert service.stop() == 0, service.log_text()
    with Store(db_url) as store:
        [req] = store.requests.recorded()
        assert req.status == "done" and req.message.startswith("already tuned")
        assert store.trials.duplicate_measurements() == 0
        assert [s.state for s in store.services.listed()] == ["stopped"]


def _already(service: Served) -> str:
    """The message of the second ``tuned`` event once there is one (it starts with "already tuned")."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        msgs = [e["message"] for e in service.events() if e["event"] == "tuned"]
        if len(msgs) > 1:
            return msgs[1] if msgs[1].startswith("already tuned") else "<searched again: " + msgs[1] + ">"
        time.sleep(0.2)
    return "<no second tuned event>"


def test_a_miss_recorded_by_best_config_is_tuned_by_the_service(sqlite_url, tmp_path):
    """The production loop: a lookup falls back and records the shape; the service tunes it; a fresh lookup
    of the same process returns the tuned config."""
    from autotune.runtime import requests_log
    from autotune.runtime.lookup import best_config_match, clear_cache

    Store.open(sqlite_url, create=True).close()
    service = Served(tmp_path, sqlite_url, [MATMUL])
    try:
        service.wait_event("serving")
        clear_cache()
        shape = {"M": 48, "N": 64, "K": 32}
        assert (
            best_config_match("matmul_cpu", db=sqlite_url, device="cpu", record=True, **shape)[1] == "default"
        )
        assert requests_log.flush() == 1
        service.wait_event("tuned", shape="M=48,N=64,K=32")
        clear_cache()
        config, how, _ = best_config_match("matmul_cpu", db=sqlite_url, device="cpu", **shape)
        assert how == "exact" and set(config) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "ORDER"}
    finally:
        clear_cache()
        assert service.stop() == 0, service.log_text()


def test_autotune_request_takes_the_kernel_from_a_live_service_without_importing_the_file(
    sqlite_url, tmp_path
):
    kernel = tmp_path / "marked.py"  # tiny, plus a mark of every import where MARK_IMPORT is set
    kernel.write_text(
        "import os\nif os.environ.get('MARK_IMPORT'):\n    open(os.environ['MARK_IMPORT'], 'a').close()\n"
        + TINY.read_text()
    )
    service = Served(tmp_path, sqlite_url, [kernel])
    try:
        service.wait_event("serving")
        mark = tmp_path / "imported"
        queued = _cli(
            "request", str(kernel), "--shape", "N=20", "--db", sqlite_url, env={"MARK_IMPORT": str(mark)}
        )
        assert queued.returncode == 0 and f"queued tiny N=20 on {_cpu_name()}" in queued.stdout, queued.stderr
        assert not mark.exists()
        service.wait_event("tuned", shape="N=20")
        kernel.write_text(kernel.read_text() + "\n# edited: another source hash, no live service runs it\n")
        again = _cli(
            "request",
            str(kernel),
            "--shape",
            "N=20",
            "--device",
            "cpu",
            "--db",
            sqlite_url,
            env={"MARK_IMPORT": str(mark)},
        )
        assert again.returncode == 0 and mark.exists(), again.stderr  # loaded here to learn its kernel
    finally:
        assert service.stop() == 0, service.log_text()


def test_an_edited_kernel_file_is_served_as_loaded_until_sighup_reloads_it(sqlite_url, tmp_path):
    """Issue 45: SIGHUP without ``--job`` reloads (it ended the service: exit 3); a file edited on disk is
    noticed and logged, and a request for the edited version is not tuned by the old code under either
    hash: it is refused as a version nobody runs, until SIGHUP loads the file, which queues it again."""
    from autotune.kernel.contract import source_hash

    kernel = tmp_path / "k.py"
    kernel.write_text(TINY.read_text())
    old = source_hash(kernel)
    service = Served(tmp_path, sqlite_url, [kernel])
    cpu = _cpu_name()
    try:
        service.wait_event("serving")
        kernel.write_text(TINY.read_text() + "\n# v2\n")
        new = source_hash(kernel)
        assert service.wait_event("kernel-changed")["on_disk"] == new[:12]
        # a shape whose inputs cannot be built ends the workers: not restarted from the changed file (it
        # ran the new code under the old hash), the kernel is dropped and the service goes on
        with Store(sqlite_url) as store:
            _miss(store, "tiny", {"N": 10**7}, cpu)
        assert service.wait_event("kernel-dropped")["kernel"] == "tiny"
        queued = _cli("request", str(kernel), "--shape", "N=20", "--device", "cpu", "--db", sqlite_url)
        assert queued.returncode == 0, queued.stderr
        refused = service.wait_event("refused", shape="N=20")["request"]
        with Store(sqlite_url) as store:
            assert "no service runs this" in (store.services.status_of(refused)[1] or "")
        service.proc.send_signal(signal.SIGHUP)
        assert service.wait_event("reloaded")["source_hash"] == new[:12]
        service.wait_event("tuned", shape="N=20")
        with Store(sqlite_url) as store:
            assert {r.source_hash for r in store.trials.best("tiny", "N=20", cpu)} == {new}
        assert service.proc.poll() is None
    finally:
        assert service.stop() == 0, service.log_text()
    assert old != new and not [
        e for e in service.events() if e["event"] == "tuning" and e.get("shape") not in ("N=20", "N=10000000")
    ]


def _get(port: int, path: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_metrics_and_health_endpoints_and_a_json_log_without_plain_lines(sqlite_url, tmp_path):
    """Issue 45: ``--metrics-port`` serves Prometheus metrics (queue by state, searches, evaluations, search
    seconds, last heartbeat) and the liveness/readiness probes; ``--log-format json`` writes JSON only."""
    from prometheus_client.parser import text_string_to_metric_families

    service = Served(
        tmp_path, sqlite_url, [TINY], args=("--metrics-port", "0", "--metrics-host", "127.0.0.1")
    )
    try:
        port = service.wait_event("metrics")["port"]
        service.wait_event("serving")
        assert _get(port, "/healthz")[0] == 200
        deadline = time.monotonic() + WAIT_S
        while _get(port, "/readyz")[0] != 200:  # ready once a heartbeat after the start reached the database
            assert time.monotonic() < deadline, _get(port, "/readyz")
            time.sleep(0.3)
        with Store(sqlite_url) as store:
            _miss(store, "tiny", {"N": 16}, _cpu_name())
        service.wait_event("tuned", shape="N=16")
        deadline = time.monotonic() + WAIT_S
        while True:  # the queue gauge is read with the heartbeat
            status, text = _get(port, "/metrics")
            samples = {
                (x.name, tuple(sorted(x.labels.items()))): x.value
                for f in text_string_to_metric_families(text)
                for x in f.samples
            }
            if samples.get(("autotune_serve_queue_requests", (("state", "done"),))) == 1:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.3)
        assert status == 200
        assert samples[("autotune_serve_searches_total", (("kernel", "tiny"),))] == 1
        assert samples[("autotune_serve_evaluations_total", (("kernel", "tiny"),))] >= 1
        assert samples[("autotune_serve_search_seconds_count", ())] == 1
        assert samples[("autotune_serve_requests_total", (("outcome", "tuned"),))] == 1
        assert samples[("autotune_serve_last_heartbeat_timestamp_seconds", ())] > time.time() - WAIT_S
        assert samples[("autotune_serve_listening", ())] == 0  # SQLite: it polls
        assert _get(port, "/nowhere")[0] == 404
    finally:
        assert service.stop() == 0, service.log_text()
    lines = service.log_text().splitlines()
    assert lines and all(line.startswith("{") for line in lines), [x for x in lines if not x.startswith("{")]


def test_the_text_log_escapes_control_characters_and_json_captures_python_logging():
    """Issue 45: an ESC or a right-to-left override in a request's kernel name reached the text log raw;
    a library's logging.warning was a plain line in a JSON log."""
    import io
    import logging

    from autotune.service.events import EventLog

    text = io.StringIO()
    EventLog("text", text)("refused", "bad \x1b[2J\u202ename", kernel="\x1b]0;owned\x07")
    assert "\x1b" not in text.getvalue() and "\u202e" not in text.getvalue()
    assert "\\x1b[2J" in text.getvalue() and "\\u202e" in text.getvalue()
    stream = io.StringIO()
    log = EventLog("json", stream)
    import warnings

    root = logging.getLogger()
    handlers, level, show = list(root.handlers), root.level, warnings.showwarning
    try:
        log.capture_logging()
        logging.getLogger("autotune.somewhere").warning("the disk is %s", "full")
    finally:
        root.handlers[:], root.level, warnings.showwarning = handlers, level, show
    record = json.loads(stream.getvalue())
    assert (
        record["event"] == "log" and record["message"] == "the disk is full" and record["level"] == "warning"
    )


def test_show_requests_has_a_status_column_and_json_and_markup_in_names_is_plain_text(sqlite_url):
    """Issue 45: ``show --requests`` had no status column and ``-f json`` exited 2; a kernel named ``[/x]``
    crashed the tables (rich markup), and ``[bold]`` would have been rendered."""
    from autotune.store import Owner

    cpu = _cpu_name()
    with Store.open(sqlite_url, create=True) as store:
        _miss(store, "[/x]", {"N": 8}, cpu)
        owner = Owner(host="[/host]")
        store.services.register(owner, devices="cpu")
        store.services.started(owner, device_name="[bold]gpu", kernels=[{"name": "[/x]"}])
    as_json = _cli("show", "--requests", "-f", "json", "--db", sqlite_url)
    assert as_json.returncode == 0, as_json.stderr
    (row,) = json.loads(as_json.stdout)
    assert row["kernel_name"] == "[/x]" and row["status"] == "queued" and row["count"] == 1
    table = _cli("show", "--requests", "--db", sqlite_url, env={"COLUMNS": "250"})
    assert table.returncode == 0 and "[/x]" in table.stdout and "status" in table.stdout, table.stderr
    assert "queued" in table.stdout
    services = _cli("show", "--services", "--db", sqlite_url, env={"COLUMNS": "250"})
    assert services.returncode == 0 and "[/host]" in services.stdout and "[bold]gpu" in services.stdout, (
        services.stderr
    )


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_sqlite_file_deleted_or_replaced_under_the_service_ends_it_with_one_line(tmp_path, how):
    """Issue 45: a deleted SQLite file was served silently (writes to a file nobody reads), and a re-created
    one left the service invisible to ``show --services``: the service says so and exits 2 (a supervisor
    restarts it on the new file)."""
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    service = Served(tmp_path, url, [TINY])
    service.wait_event("serving")
    for f in tmp_path.glob("s.db*"):
        f.unlink()
    if how == "replaced":
        Store.open(url, create=True).close()
    assert service.proc.wait(timeout=WAIT_S) == 2, service.log_text()
    assert "deleted or replaced" in service.wait_event_after_exit("database-gone")["message"]
    lines = service.log_text().splitlines()  # the error that ends it is a JSON event too
    assert all(x.startswith("{") for x in lines) and service.events()[-1]["event"] == "error", lines


def test_hostile_requests_are_refused_in_one_line_and_the_service_goes_on(sqlite_url, tmp_path):
    cpu = _cpu_name()
    with Store.open(sqlite_url, create=True) as store:
        _miss(store, "tiny", {"N": 10**20}, cpu)
        _miss(store, "tiny", {"M": 32}, cpu)
        _miss(store, "tiny", {f"D{i}": 1 for i in range(10**6)}, cpu, shape_key="huge")
        _miss(store, "tiny", [1, 2, 3], cpu, shape_key="a-list")
        _miss(store, "not_a_kernel_here", {"N": 32}, cpu)
        _miss(store, "tiny", {"N": 10**7}, cpu)  # valid, but its inputs (400 TB) cannot be allocated
    # a kernel file the service was not started with: refused, never imported by the service
    other = _cli("request", str(MATMUL), "--shape", "M=64,N=64,K=32", "--device", "cpu", "--db", sqlite_url)
    assert other.returncode == 0, other.stderr
    service = Served(tmp_path, sqlite_url, [TINY])
    try:
        with Store(sqlite_url) as store:
            _wait_requests(store, 7)
            _miss(store, "tiny", {"N": 16}, cpu)  # the service still works (on new workers after N=10**7)
            service.wait_event("tuned", shape="N=16")
            rows = {r.shape_key: r for r in store.requests.recorded()}
    finally:
        assert service.stop() == 0, service.log_text()
    refused = {k: r.message for k, r in rows.items() if r.status == "refused"}
    assert set(refused) == {
        "N=100000000000000000000", "M=32", "huge", "a-list", "N=32", "M=64,N=64,K=32", "N=10000000",
    }  # fmt: skip
    assert "too large" in refused["N=100000000000000000000"]
    assert refused["N=10000000"].startswith("inputs cannot be built: RuntimeError"), refused
    assert "missing N" in refused["M=32"] and "1000000 keys" in refused["huge"]
    assert "no service runs this kernel" in refused["M=64,N=64,K=32"]
    assert rows["N=16"].status == "done"
    logged = [e for e in service.events() if e["event"] == "refused"]
    assert len(logged) == 7 and all(len(json.dumps(e)) < 1000 for e in logged)  # one short line each


def test_sigterm_hands_the_request_back_and_exits_0(db_url, tmp_path):
    gate = tmp_path / "gate"  # never created: every compile but the default's waits, the search stays mid-way
    service = Served(tmp_path, db_url, [TINY], env={"TINY_GATE": str(gate), "AUTOTUNE_TRIALS": "5"})
    try:
        queued = _cli("request", str(TINY), "--shape", "N=24", "--device", "cpu", "--db", db_url)
        assert queued.returncode == 0, queued.stderr
        service.wait_event("tuning", shape="N=24")
        with Store(db_url) as store:
            deadline = time.monotonic() + WAIT_S
            while not any(store.trials.counts(k.key_id) for k in store.history.key_states()):
                assert time.monotonic() < deadline, service.log_text()
                time.sleep(0.2)  # the default config measured: the search is in its loop
        service.proc.send_signal(signal.SIGHUP)  # logged, ignored: the search goes on
        service.wait_event("reload")
        assert service.proc.poll() is None
    finally:
        assert service.stop() == 0, service.log_text()
    assert [e["event"] for e in service.events()][-2:] == ["handed-back", "stopped"]
    with Store(db_url) as store:
        [req] = store.requests.recorded()
        assert req.status == "queued"
        assert all(s.running == 0 for s in store.history.key_states())
        assert [s.state for s in store.services.listed()] == ["stopped"]


@pytest.mark.postgres
def test_an_idle_service_on_postgres_wakes_on_notify_not_on_its_poll(pg_url, tmp_path):
    service = Served(tmp_path, pg_url, [TINY], env={"AUTOTUNE_SERVE_POLL": "600"})
    try:
        service.wait_event("serving")
        queued = _cli("request", str(TINY), "--shape", "N=20", "--device", "cpu", "--db", pg_url)
        assert queued.returncode == 0, queued.stderr
        service.wait_event("tuned", shape="N=20")  # long before the 600 s poll
        with Store(pg_url) as store:  # a recorded miss (the lookup's flush) wakes it too
            _miss(store, "tiny", {"N": 12}, _cpu_name())
        service.wait_event("tuned", shape="N=12")
    finally:
        assert service.stop() == 0, service.log_text()


def test_a_service_listens_again_after_its_listening_connection_is_cut(pg_url, tmp_path):
    """Issue 45: after one Postgres restart an idle service polled at 10 Hz for ever and never LISTENed
    again. Its LISTEN connection cut (as a restart cuts it): it says so once, listens again, and a request
    queued after that still wakes it long before its poll."""
    from sqlalchemy import text

    service = Served(tmp_path, pg_url, [TINY], env={"AUTOTUNE_SERVE_POLL": "600"})
    try:
        service.wait_event("serving")
        service.wait_event("listening")
        with Store(pg_url) as store, store.db.engine.connect() as conn:
            cut = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
                )
            ).scalar_one()
        assert cut >= 1
        service.wait_event("listen-failed")
        deadline = time.monotonic() + WAIT_S
        while len([e for e in service.events() if e["event"] == "listening"]) < 2:
            assert time.monotonic() < deadline and service.proc.poll() is None, service.log_text()
            time.sleep(0.2)
        queued = _cli("request", str(TINY), "--shape", "N=20", "--device", "cpu", "--db", pg_url)
        assert queued.returncode == 0, queued.stderr
        service.wait_event("tuned", shape="N=20")  # woken by NOTIFY: the poll is 600 s
    finally:
        assert service.stop() == 0, service.log_text()


def test_a_handed_over_search_sees_at_once_that_its_service_was_killed(sqlite_url):
    """Issue 45: a handed-over search waited the whole lease (66.7 s) when its service died with -9, though
    its pid was gone: a service of this host whose process is gone is not serving, whatever its last beat."""
    from autotune.service.client import _still_serving
    from autotune.store import Owner

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead, live = Owner(pid=int(gone.stdout)), Owner()
    with Store.open(sqlite_url, create=True) as store:
        for owner in (dead, live):
            store.services.register(owner, devices="cpu")
            store.services.started(owner, device_name=_cpu_name(), kernels=[{"name": "tiny"}])
        services = {x.owner: x for x in store.services.listed()}
        assert services[dead.id].alive(store.db.now(), 60)  # its heartbeat is fresh
        assert not _still_serving(store, services[dead.id])
        assert _still_serving(store, services[live.id])


@pytest.mark.postgres  # 20-45 s on a loaded 2-core machine: under the slow marker's 60 s
def test_three_services_tune_every_miss_once_and_take_over_a_killed_one(pg_url, tmp_path):
    cpu = _cpu_name()
    shapes = [{"N": n} for n in range(8, 48)][:20]
    with Store.open(pg_url, create=True) as store:
        for dims in shapes:
            _miss(store, "tiny", dims, cpu)
    # the victim's compiles wait on a gate nobody opens: it is mid-request when it is killed
    # and its lease outlives the test: its request is taken over because its pid is gone (same host)
    victim = Served(
        tmp_path,
        pg_url,
        [TINY],
        env={"TINY_GATE": str(tmp_path / "gate"), "AUTOTUNE_SERVE_LEASE": "3600"},
        n=0,
    )
    taken = victim.wait_event("tuning")
    others = [Served(tmp_path, pg_url, [TINY], n=i) for i in (1, 2)]
    try:
        victim.proc.kill()
        victim.proc.wait(timeout=WAIT_S)
        with Store(pg_url) as store:
            rows = _wait_requests(store, len(shapes))
            assert all(r.status == "done" for r in rows), [(r.shape_key, r.status, r.message) for r in rows]
            assert store.trials.duplicate_measurements() == 0
            tuned = {r.shape_key for r in store.trials.best("tiny", device_name=cpu)}
            assert tuned == {f"N={d['N']}" for d in shapes}
            assert all(s.running == 0 for s in store.history.key_states())
        finished = [
            e
            for o in others
            for e in o.events()
            if e["event"] == "tuned" and e["request"] == taken["request"]
        ]
        assert len(finished) == 1
    finally:
        codes = [o.stop() for o in others]
    assert codes == [0, 0]
    with Store(pg_url) as store:
        states = sorted(s.state for s in store.services.listed())
        assert states == ["starting", "stopped", "stopped"] or states.count("stopped") == 2


def test_bad_serve_and_request_input_is_one_line_and_exit_2(sqlite_url, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    cases = [
        (["serve", "--kernels", str(tmp_path / "nope.py")], "no such kernel file or folder"),
        (["serve", "--kernels", str(TINY), "--log-format", "xml"], "choose text or json"),
        (["serve", "--kernels", str(bad), "--devices", "cpu"], "declares no KERNEL"),
        (["request", str(TINY)], "give at least one --shape"),
        (["request", str(TINY), "--shape", "N=100000000000000000000"], "too large"),
        (["request", str(TINY), "--shape", "M=3", "--device", "cpu"], "missing N"),
        (
            ["serve", "--kernels", str(TINY), "--job", str(_job(tmp_path, "a.yaml", schedule=None))],
            "schedule: missing",
        ),
        (
            ["serve", "--kernels", str(TINY), "--job", str(_job(tmp_path, "b.yaml", schedule="61 * * * *"))],
            "not a cron expression",
        ),
        (
            [
                "serve",
                "--kernels",
                str(TINY),
                "--job",
                str(_job(tmp_path, "c.yaml", extra="database: /tmp/other.db")),
            ],
            "is not the service's database",
        ),
    ]
    import socket

    taken = socket.socket()  # a metrics port another process listens on
    taken.bind(("", 0))
    taken.listen()
    exiting = tmp_path / "exits.py"  # `request` read it in-process: exit 7, silently (issue 45)
    exiting.write_text("import os\nos._exit(7)\n")
    cases += [  # issue 45: each was exit 3 ("internal error") or silent
        (["request", str(exiting), "--shape", "N=8"], "exits.py"),
        (["serve", "--kernels", str(TINY), "--metrics-port", str(taken.getsockname()[1])], "cannot listen"),
    ]
    import torch

    if not torch.cuda.is_available():
        cases.append((["request", str(TINY), "--shape", "N=8", "--device", "cuda"], "no CUDA GPU here"))
    for args, message in cases:
        proc = _cli(*args, "--db", sqlite_url)
        lines = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (args, proc.stderr)
    huge = _cli("serve", "--kernels", str(TINY), "--db", sqlite_url, env={"AUTOTUNE_SERVE_LEASE": "1e308"})
    assert huge.returncode == 2 and "AUTOTUNE_SERVE_LEASE must be at most" in huge.stderr, huge.stderr
    with Store(sqlite_url) as store:  # the services that could not load a file or listen say stopped
        assert [s.state for s in store.services.listed()] == ["stopped", "stopped"]


def _job(
    tmp: Path, name: str, shape: str = "N=20", schedule: str | None = "* * * * * */2", **kw: str
) -> Path:
    """A job file of the tiny kernel (every 2 s by default: croniter's 6th field is seconds)."""
    kernel = kw.get("kernel", str(TINY))
    text = f"name: svc\ntrials: 2\nverify: false\nkernels:\n  - file: {kernel}\n    shapes: ['{shape}']\n"
    if schedule is not None:
        text += f"schedule: '{schedule}'\n"
    path = tmp / name
    path.write_text(text + kw.get("extra", "") + "\n")
    return path


def test_a_scheduled_job_runs_on_the_warm_workers_and_sighup_reads_it_again(sqlite_url, tmp_path):
    """`serve --job`: the nightly job runs on its cron schedule inside the service, on the workers the
    service started once (its kernel file served beside --kernels); SIGHUP reads the file again, and a file
    that no longer reads or names a kernel file the service did not start with keeps the job as it was."""
    job = _job(tmp_path, "job.yaml")
    service = Served(tmp_path, sqlite_url, [MATMUL], args=("--job", str(job)))
    cpu = _cpu_name()
    try:
        assert service.wait_event("job-scheduled")["schedule"] == "* * * * * */2"
        done = service.wait_event("job-done", job="svc")
        with Store(sqlite_url) as store:
            assert store.trials.best("tiny", "N=20", cpu), service.log_text()
            assert [r.status for r in store.verifications.runs() if r.run_id == done["run_id"]] == ["done"]
        job.write_text(job.read_text().replace("N=20", "N=24"))
        service.proc.send_signal(signal.SIGHUP)
        with Store(sqlite_url) as store:
            deadline = time.monotonic() + WAIT_S
            while not store.trials.best("tiny", "N=24", cpu):
                assert time.monotonic() < deadline and service.proc.poll() is None, service.log_text()
                time.sleep(0.3)
        other = tmp_path / "other.py"
        other.write_text(TINY.read_text())
        _job(tmp_path, "job.yaml", kernel=str(other))
        service.proc.send_signal(signal.SIGHUP)
        assert "not a kernel file of the service" in service.wait_event("reload-failed")["message"]
        # a request between two runs of the job is still served
        queued = _cli(
            "request", str(MATMUL), "--shape", "M=32,N=32,K=32", "--device", "cpu", "--db", sqlite_url
        )
        assert queued.returncode == 0, queued.stderr
        service.wait_event("tuned", shape="M=32,N=32,K=32")
        # SIGTERM twice at once, as `timeout` (the child, then its group) and a terminal's Ctrl-C send it
        service.proc.send_signal(signal.SIGTERM)
        service.proc.send_signal(signal.SIGTERM)
        assert service.proc.wait(timeout=WAIT_S) == 0, service.log_text()
    finally:
        assert service.stop() == 0, service.log_text()
    events = service.events()
    # the workers were started once per kernel, whatever the number of job runs
    assert sorted(e["kernel"] for e in events if e["event"] == "ready") == ["matmul_cpu", "tiny"]
    assert len([e for e in events if e["event"] == "job-done"]) >= 2
    assert not [e for e in events if e["event"] == "job-failed"], service.log_text()


def test_a_search_is_handed_to_a_live_service_and_local_searches_here(db_url, tmp_path):
    """`autotune search` of the file a live service runs, on its devices, hands its shapes over: the
    service's log says it searched them under the command's budget (--trials), the command prints the same
    table and writes the same JSON from the report the service stored; `--local` searches in-process."""
    service = Served(tmp_path, db_url, [MATMUL])
    try:
        service.wait_event("serving")
        out = tmp_path / "handed.json"
        handed = _cli(
            "search", str(MATMUL), "--device", "cpu", "--shape", "M=64,N=64,K=64", "--trials", "3",
            "--db", db_url, "--json", str(out),
        )  # fmt: skip
        assert handed.returncode == 0, handed.stderr
        assert "handed to autotune serve" in handed.stderr and f"pid {service.proc.pid}" in handed.stderr
        assert "matmul_cpu: best config per shape" in handed.stdout
        # the service's evaluations streamed from the trials table, as an in-process search prints its own
        streamed = [x for x in handed.stderr.splitlines() if x.startswith("[M=64,N=64,K=64] trial ")]
        assert [x.split()[2] for x in streamed] == ["1/3", "2/3", "3/3"], handed.stderr
        assert "[M=64,N=64,K=64] done: 3 evaluated" in handed.stderr
        [report] = json.loads(out.read_text())
        assert report["shape"] == {"M": 64, "N": 64, "K": 64} and report["evaluations"] == 3
        assert report["best"]["status"] == "ok" and report["stop_reason"] == "trials"
        tuned = service.wait_event("tuned", shape="M=64,N=64,K=64")
        assert "after 3 evaluations" in tuned["message"]
        # a shape that is not the kernel's: the same one line and exit 2 as in-process
        bad = _cli("search", str(MATMUL), "--device", "cpu", "--shape", "M=64,N=64", "--db", db_url)
        assert bad.returncode == 2 and "missing K" in bad.stderr and "Traceback" not in bad.stderr
        # --local: this process starts its own workers; the service is not asked
        local = _cli(
            "search", str(MATMUL), "--device", "cpu", "--shape", "M=32,N=64,K=64", "--trials", "2",
            "--db", db_url, "--local",
        )  # fmt: skip
        assert local.returncode == 0, local.stderr
        assert "handed to autotune serve" not in local.stderr and "matmul_cpu" in local.stdout
        # no --shape: searched here, and it says why (issue 45: nothing said it)
        shapeless = _cli("search", str(MATMUL), "--device", "cpu", "--trials", "1", "--db", db_url)
        assert shapeless.returncode == 0, shapeless.stderr
        assert f"not through autotune serve (pid {service.proc.pid}): no --shape" in shapeless.stderr
    finally:
        assert service.stop() == 0, service.log_text()
    with Store(db_url) as store:
        assert store.trials.duplicate_measurements() == 0
        assert not [
            e
            for e in service.events()
            if e.get("shape") in ("M=32,N=64,K=64", None) and e["event"] == "tuning"
        ]


def test_hostile_search_options_are_refused():
    """A handed-over search's budget is data: unknown keys, absurd values and unknown strategies are refused."""
    from autotune.service.validate import Refusal, checked_options

    assert checked_options(None) is None
    assert checked_options({"trials": 5, "timeout_s": 0.0, "strategy": "random", "seed": 1}) == {
        "trials": 5, "timeout_s": 0.0, "strategy": "random", "seed": 1,
    }  # fmt: skip
    for bad in (
        [1],
        {"trials": 10**20},
        {"trials": "5"},
        {"timeout_s": float("nan")},
        {"strategy": "annealing"},
        {"seed": -1},
        {"configs_file": "/etc/passwd"},
    ):
        with pytest.raises(Refusal):
            checked_options(bad)
