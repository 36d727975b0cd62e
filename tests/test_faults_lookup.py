"""Faults around the runtime lookup and its inputs: a locked SQLite file, a Postgres that never answers,
a password with a raw '@', a newer-schema database, a huge shape dimension. Each one used to hang, leak or
print a stack; each must now give the default (or one line) quickly. "Quickly" is checked by what the lookup
did (which load it waited for, what it said, whether it connected again), not by a stopwatch: a loaded
machine must not fail these tests."""

from __future__ import annotations

import logging
import math
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from autotune.errors import ShapeError
from autotune.runtime import lookup
from autotune.runtime.lookup import best_config, clear_cache
from autotune.shapes import check_shape, format_shape, parse_shape, shape_distance
from autotune.store import Store
from autotune.store.urls import mask_secrets, mask_url, normalize_db_url, url_secrets
from autotune.trial import TrialResult, TrialStatus
from tests.test_lookup import ENV

REPO = Path(__file__).resolve().parent.parent
DEFAULT = {"BLOCK": 0}


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    # the first lookup of a healthy database waits for its rows however loaded the machine (the 1 s default
    # includes SQLAlchemy's import); the tests of the timeout itself set theirs
    monkeypatch.setenv("AUTOTUNE_LOOKUP_TIMEOUT", "60")
    clear_cache()
    yield
    for load in list(
        getattr(lookup, "_loads", {}).values()
    ):  # a background load must not log into the next test
        load.done.wait(10)
    clear_cache()


def tune(store: Store, dims: dict[str, int], config: dict, kernel: str = "gemm") -> None:
    key = store.keys.ensure(kernel, "a" * 64, "s" * 64, {}, dims, format_shape(dims), {"a": "bfloat16"}, ENV)
    store.trials.record(key.id, TrialResult(TrialStatus.OK, config, time_s=1e-5))
    assert store.trials.refresh_best(key.id) is not None


def tuned_sqlite(tmp_path: Path, name: str, config: dict, kernel: str = "gemm") -> str:
    url = f"sqlite:///{tmp_path / name}"
    with Store(url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, config, kernel=kernel)
    return normalize_db_url(url)


def warnings_of(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "autotune.runtime.lookup" and r.levelno == logging.WARNING
    ]


def eventually(predicate, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def loads() -> list:
    """The lookup's loads (one per database, kernel and device): a lookup that connects again adds one."""
    return list(lookup._loads.values())


# ---------------------------------------------------------------- a locked SQLite file


@pytest.fixture(params=["rollback-journal", "wal-exclusive-mode"])
def locked_sqlite(request, tmp_path):
    """A tuned database, and a function that holds an exclusive lock on it (as a writing process would)."""
    url = tuned_sqlite(tmp_path, "locked.db", {"BLOCK": 64})
    path = url.removeprefix("sqlite:///")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    if request.param == "rollback-journal":
        holder.execute("PRAGMA journal_mode=DELETE")
    else:  # WAL readers are not blocked by BEGIN EXCLUSIVE, but they are by the exclusive locking mode
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")

    def release() -> None:
        holder.rollback()
        holder.execute("PRAGMA locking_mode=NORMAL")
        holder.execute("SELECT 1 FROM sqlite_master").fetchall()  # NORMAL takes effect on the next access
        holder.close()

    yield url, release
    try:
        holder.close()
    except sqlite3.Error:
        pass


def test_locked_sqlite_gives_the_default_fast_and_caches_the_failure(locked_sqlite, caplog, monkeypatch):
    url, release = locked_sqlite
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        # the load fails on its own (the 0.25 s busy timeout; it took 124.5 s once), well before the 60 s
        # this test lets the first lookup wait: it says "locked", never "did not answer"
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) is DEFAULT
        said = warnings_of(caplog)
        assert any("locked" in m for m in said) and not any("did not answer" in m for m in said), said
        # the failure is cached: once the file is free again, the next lookups still do not touch it
        release()
        for m in (64, 65, 64):
            assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=m) is DEFAULT
        assert len(loads()) == 1
    assert len([m for m in warnings_of(caplog) if "locked" in m]) == 1
    # once the retry interval has passed, a lookup retries in the background and the rows are used
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "0")
    assert eventually(
        lambda: best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) == {"BLOCK": 64}
    )


def test_lookup_timeouts_are_short(tmp_path):
    url = tuned_sqlite(tmp_path, "a.db", {"BLOCK": 64})
    assert best_config("gemm", db=url, device="cpu", M=64) == {"BLOCK": 64}
    with lookup._stores[url].db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 250
        assert conn.exec_driver_sql("PRAGMA query_only").scalar() == 1


@pytest.mark.postgres
def test_postgres_lookup_timeouts_are_short(pg_url):
    with Store(pg_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    assert best_config("gemm", db=pg_url, device="cpu", M=64) == {"BLOCK": 64}
    with lookup._stores[pg_url].db.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "500ms"
        assert conn.exec_driver_sql("SHOW default_transaction_read_only").scalar() == "on"
    lookup._stores[pg_url].close()  # the fixture drops the database afterwards


def test_slow_lookup_never_delays_other_kernels_or_databases(
    tmp_path, hung_postgres, locked_sqlite, monkeypatch
):
    """Lookups of other kernels / databases go on while one database hangs (no I/O under a global lock):
    they are answered while the hung lookup still waits, which it does until this test closes the server."""
    monkeypatch.setattr(lookup, "PG_CONNECT_TIMEOUT_S", 600)  # the hung connect lasts until the server closes
    healthy = tuned_sqlite(tmp_path, "healthy.db", {"BLOCK": 32})
    locked_url, _ = locked_sqlite
    results: dict[str, object] = {}

    def slow(name: str, url: str) -> None:
        results[name] = best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64)

    threads = [
        threading.Thread(target=slow, args=("pg", hung_postgres.url)),
        threading.Thread(target=slow, args=("sqlite", locked_url)),
    ]
    for t in threads:
        t.start()
    assert eventually(lambda: hung_postgres.accepted, timeout=60), "the lookup never reached the server"
    assert best_config("gemm", db=healthy, device="cpu", M=64) == {"BLOCK": 32}
    assert best_config("other", db=healthy, device="cpu", default=DEFAULT, M=64) is DEFAULT
    assert "pg" not in results, "a healthy lookup waited for the hung one"
    hung_postgres.close()  # the hung connect fails now
    for t in threads:
        t.join(60)
    assert results == {"pg": DEFAULT, "sqlite": DEFAULT}


# ---------------------------------------------------------------- a Postgres that accepts and never answers


class HungServer:
    """A server on 127.0.0.1 that accepts connections and never says a word, until ``close()``."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.url = f"postgresql://postgres:s3cret@127.0.0.1:{self.server.getsockname()[1]}/autotune"
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        self.server.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.accepted.append(conn)  # keep it open, say nothing

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        for conn in self.accepted:
            conn.close()
        self.server.close()


@pytest.fixture
def hung_postgres():
    server = HungServer()
    yield server
    server.close()


def test_postgres_that_never_answers_gives_the_default_within_the_timeout(hung_postgres, caplog, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_LOOKUP_TIMEOUT", "1")  # the default
    url = hung_postgres.url
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        # the first lookup gives up at its timeout with the connect still pending (it waited for the
        # connect once: 11.8 s), and says so
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) is DEFAULT
        assert "did not answer" in warnings_of(caplog)[0]
        (load,) = loads()
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) is DEFAULT
        # the background connect gives up on its own (connect timeout), and says why, once
        assert eventually(lambda: len(warnings_of(caplog)) == 2, timeout=60)
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) is DEFAULT
        assert loads() == [load]  # the lookups after the first neither connected again nor waited
    slow, failed = warnings_of(caplog)
    assert "did not answer within 1 s" in slow and "127.0.0.1" in failed
    assert not any("s3cret" in m for m in (slow, failed))


def test_lookup_timeout_is_settable(hung_postgres, monkeypatch, caplog):
    monkeypatch.setenv("AUTOTUNE_LOOKUP_TIMEOUT", "0.2")
    monkeypatch.setattr(lookup, "PG_CONNECT_TIMEOUT_S", 600)  # the connect hangs until the server closes
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=hung_postgres.url, device="cpu", default=DEFAULT, M=64) is DEFAULT
    (load,) = loads()
    assert not load.done.is_set()  # it gave up waiting, the connect goes on
    (msg,) = warnings_of(caplog)
    assert "did not answer within 0.2 s" in msg, msg
    hung_postgres.close()


# ---------------------------------------------------------------- masking


RAW_AT = "postgresql://u:p%40ss:w@rd!SECRET@{host}/db"
SECRET_URLS = [
    RAW_AT,
    "postgresql://u:pa/ss:SECRET@{host}/db",
    "postgresql://u:a@b/rd!SECRET:x@{host}/db",
    "postgresql://u@{host}/db?sslmode=disable&password=rd!SECRET",
    "postgresql://u:rd!SECRET@{host}/db",
]


@pytest.mark.parametrize("template", SECRET_URLS)
def test_mask_url_hides_any_password(template):
    url = template.format(host="dbhost:5432")
    for one in (url, normalize_db_url(url)):
        masked = mask_url(one)
        assert "SECRET" not in masked and "rd!" not in masked, masked
        assert "dbhost:5432/db" in masked
        # in free text, with another URL next to it, and in repr quotes
        line = f"cannot use {one!r}, nor {one} (nor postgresql://v:other@h2/db): failed"
        masked_line = mask_secrets(line)
        assert "SECRET" not in masked_line and "rd!" not in masked_line and "other" not in masked_line
        assert masked_line.count("dbhost:5432/db") == 2 and "v:***@h2/db" in masked_line
    assert any("SECRET" in s for s in url_secrets(normalize_db_url(url)))


def test_raw_at_password_reaches_the_right_host():
    url = normalize_db_url(RAW_AT.format(host="dbhost:5432"))
    from sqlalchemy.engine import make_url

    u = make_url(url)
    assert (u.host, u.port, u.password) == ("dbhost", 5432, "p@ss:w@rd!SECRET")
    # a '@' that may belong to the query or the path is not re-encoded (only masked)
    assert normalize_db_url("postgresql://u@h/db?application_name=me@box").endswith(
        "u@h/db?application_name=me@box"
    )


def test_mask_secrets_handles_conninfo_and_plain_text():
    assert mask_secrets("host=h password=SECRET user=u") == "host=h password=*** user=u"
    assert mask_secrets("password='rd! SECRET'") == "password=***"
    assert mask_secrets("no url here: a@b c:d") == "no url here: a@b c:d"
    assert mask_secrets("sqlite:////tmp/x.db and /plain/path.db") == "sqlite:////tmp/x.db and /plain/path.db"


def test_cli_masks_through_the_one_masker():
    from autotune import cli
    from autotune.store import urls

    assert not hasattr(cli, "_URL_PASSWORD")
    line = "boom: " + RAW_AT.format(host="h")
    assert cli.mask_secrets(line) == urls.mask_secrets(line)
    assert "SECRET" not in cli.mask_secrets(line) and "rd!" not in cli.mask_secrets(line)


@pytest.mark.parametrize("template", SECRET_URLS)
def test_show_never_prints_a_password(template, closed_port):
    from typer.testing import CliRunner

    from autotune.cli import app

    url = template.format(host=f"127.0.0.1:{closed_port}")
    result = CliRunner().invoke(app, ["show", "--db", url])
    everything = "\n".join((result.output, result.stdout, result.stderr))
    assert result.exit_code == 2, everything
    assert "SECRET" not in everything and "rd!" not in everything, everything
    assert "127.0.0.1" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("template", SECRET_URLS)
def test_lookup_warning_never_shows_a_password(template, closed_port, caplog):
    url = template.format(host=f"127.0.0.1:{closed_port}")
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) is DEFAULT
    (msg,) = warnings_of(caplog)
    assert "SECRET" not in msg and "rd!" not in msg and "127.0.0.1" in msg


# ---------------------------------------------------------------- a newer-schema database


def test_newer_schema_warns_once_and_gives_the_default(db_url, caplog):
    with Store(db_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    engine = create_engine(normalize_db_url(db_url))
    with engine.begin() as conn:
        conn.execute(text("UPDATE autotune_alembic_version SET version_num = 'ffffffff'"))
    engine.dispose()
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        for m in (64, 64, 100):
            assert best_config("gemm", db=db_url, device="cpu", default=DEFAULT, M=m) is DEFAULT
    (msg,) = warnings_of(caplog)
    assert "ffffffff" in msg and "newer autotune" in msg and "upgrade autotune" in msg
    for store in lookup._stores.values():
        store.close()  # Postgres: the fixture drops the database afterwards


# ---------------------------------------------------------------- a huge shape dimension


@pytest.mark.parametrize("value", ["99999999999999999999", str(2**63), str(2**62 + 1), "9" * 5000])
def test_huge_dimension_is_one_line(value):
    with pytest.raises(ShapeError, match=r"is too large \(max 2\*\*62\)") as e:
        parse_shape(f"M={value},N=1,K=1")
    assert "\n" not in str(e.value) and len(str(e.value)) < 200
    with pytest.raises(ShapeError, match="too large"):
        check_shape({"M": int(value) if len(value) < 1000 else 10**5000, "N": 1})
    assert parse_shape(f"M={2**62},N=1") == {"M": 2**62, "N": 1}


def test_cli_refuses_a_huge_dimension_before_any_worker(tmp_path):
    db = tmp_path / "autotune.db"
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "search", "examples/matmul_cpu.py"]
        + ["--shape", "M=99999999999999999999,N=1,K=1", "--device", "cpu", "--db", str(db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "M=99999999999999999999 is too large (max 2**62)" in lines[0], proc.stderr
    assert "frame #" not in proc.stderr and not db.exists()  # refused before anything ran or was written


# ---------------------------------------------------------------- a recorded shape with a zero dimension


def test_zero_or_negative_recorded_dimension_is_skipped_by_the_nearest_shape(tmp_path, caplog):
    """Keys with M=0 and M=-8 in the database (written by hand or an older autotune): the nearest-shape math
    raised "math domain error" (caught: a warning, and the default for every untuned shape). Such a shape is
    now infinitely far away: the nearest valid one answers, and nothing is logged."""
    url = f"sqlite:///{tmp_path / 'zero.db'}"
    with Store(url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
        tune(store, {"M": 0}, {"BLOCK": 1})
        tune(store, {"M": -8}, {"BLOCK": 2})
    with caplog.at_level(logging.DEBUG, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=100) == {"BLOCK": 64}
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=1) == {"BLOCK": 64}
        # a zero or negative dimension asked for has no nearest shape either: the default
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=0) == {"BLOCK": 1}  # exact
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=-3) is DEFAULT
    assert warnings_of(caplog) == []
    assert not [r for r in caplog.records if "domain" in r.getMessage()]


@pytest.mark.parametrize("bad", [0, -1, 0.0, -2.5, float("nan"), float("inf"), True, "64", None])
def test_shape_distance_to_a_bad_dimension_is_infinite(bad):
    assert shape_distance({"M": 64, "N": 8}, {"M": bad, "N": 8}) == math.inf
    assert shape_distance({"M": bad, "N": 8}, {"M": 64, "N": 8}) == math.inf
    assert shape_distance({"M": 64, "N": 8}, {"M": 128, "N": 8}) == 1.0
    assert shape_distance({"M": 2**70}, {"M": 2**71}) == 1.0


_GATED_IMPORT = """
import importlib.abc, sys, threading

blocking, released = threading.Event(), threading.Event()


class SlowImport(importlib.abc.MetaPathFinder):
    # importing SQLAlchemy (and psycopg) took 0.1 s to seconds: here, until the test releases it
    def find_spec(self, name, path=None, target=None):
        if name == "sqlalchemy":
            blocking.set()
            released.wait(30)
            blocking.clear()
        return None


sys.meta_path.insert(0, SlowImport())
import autotune

got = autotune.best_config("gemm", db=sys.argv[1], device="cpu", default={"BLOCK": 1}, M=64)
print("returned", got, "while importing" if blocking.is_set() else "after the import")
released.set()
"""


def test_first_lookup_bound_includes_importing_sqlalchemy(tmp_path):
    """The first call's bound (AUTOTUNE_LOOKUP_TIMEOUT) started only after SQLAlchemy and the driver were
    imported in the calling thread (1.51 s against a server that never answers): the import now runs in
    the load's thread, so the call returns the default while an import that does not end is still going."""
    proc = subprocess.run(
        [sys.executable, "-c", _GATED_IMPORT, str(tmp_path / "never.db")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "AUTOTUNE_LOOKUP_TIMEOUT": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "returned {'BLOCK': 1} while importing" in proc.stdout, proc.stdout + proc.stderr
