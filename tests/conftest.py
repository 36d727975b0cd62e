"""Shared fixtures. Database URLs: ``sqlite_url`` (a file in tmp_path), ``pg_url`` (a fresh database on the
server of ``AUTOTUNE_TEST_PG_URL``, dropped afterwards) and ``db_url`` (parametrized over both, so the
same store test runs on each backend, as in optuna/testing/storages.py).

Start a throwaway server with ``eval "$(.ci/start-postgres.sh)"``. Without ``AUTOTUNE_TEST_PG_URL`` the
Postgres tests are skipped, except under CI (``CI`` set), where they fail: CI must not skip silently.

Markers (pyproject.toml): ``triton`` tests skip when triton cannot be imported (the ``triton`` extra is
optional; the kernel files and the interpreter runs they start need it); ``slow`` tests run under CI, or
with ``--run-slow``, and are skipped in a developer's default run."""

from __future__ import annotations

import functools
import os
import socket
import uuid
from collections.abc import Iterator

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="run the tests marked slow (the default under CI, where CI is set)",
    )


@functools.cache
def triton_missing() -> str | None:
    """Why triton cannot be imported here, or None. Any ImportError counts (not only a missing module:
    a broken install must skip the same way)."""
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return f"needs triton (the triton extra): {type(e).__name__}: {e}"
    return None


def run_slow(config: pytest.Config) -> bool:
    return bool(config.getoption("--run-slow") or os.environ.get("CI"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not run_slow(config):
        skip = pytest.mark.skip(reason="slow: run with --run-slow (CI runs it)")
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # checked here, not at collection: triton is imported only when a test that needs it is about to run
    if item.get_closest_marker("triton") and (why := triton_missing()):
        pytest.skip(why)


def pg_server_url() -> str:
    """The admin URL of the test server, or skip (fail under CI) without one."""
    url = os.environ.get("AUTOTUNE_TEST_PG_URL", "").strip()
    if not url:
        msg = 'AUTOTUNE_TEST_PG_URL is not set (start a server: eval "$(.ci/start-postgres.sh)")'
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {msg}", pytrace=False)
        pytest.skip(msg)
    return url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'autotune.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty database on the test server: postgresql+psycopg://.../autotune_test_<random>."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from autotune.store import normalize_db_url

    server = make_url(normalize_db_url(pg_server_url()))
    name = f"autotune_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            # DDL on databases has no SQLAlchemy construct; the name is ours, not user input
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield server.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            # FORCE (Postgres 13+): a test's leftover pooled connections must not keep it alive
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request) -> str:
    return request.getfixturevalue(f"{'pg' if request.param == 'postgres' else 'sqlite'}_url")


@pytest.fixture
def closed_port() -> int:
    """A local TCP port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def store(db_url):
    """A Store on ``db_url`` with the schema created."""
    from autotune.store import Store

    s = Store(db_url)
    s.schema.upgrade()
    yield s
    s.close()


def wait_for_trials(store, n: int, timeout_s: float = 300.0) -> list:
    """Poll ``store`` until its (only) key holds ``n`` trials; returns them ([] on timeout). Connection
    errors while a search creates the database are retried."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            rows = store.history.key_states()
        except Exception:
            continue
        if rows and rows[0].trials >= n:
            return store.trials.recorded(rows[0].key_id)
    return []


def expected_best(store, key_id: int) -> tuple[str, float, int]:
    """(config hash, median, samples) the best row must hold, recomputed from the trials: the lowest median
    over the configs with 3 ok samples or more; where none has, over each config's ok samples, where, once
    finalists were re-timed, a config measured once competes only if its sample beats a finalist's search
    sample (it ranked below every finalist when they were chosen)."""
    import statistics

    from autotune.trial import TrialStatus, config_hash

    search = {
        config_hash(t.config): t.time_s for t in store.trials.recorded(key_id) if t.status is TrialStatus.OK
    }
    samples: dict[str, list[float]] = {}
    for t in store.trials.recorded(key_id, retimed=True):
        if t.status is TrialStatus.OK:
            samples.setdefault(config_hash(t.config), []).append(t.time_s)
    # a best needs 3 samples (its search sample and 2 interleaved re-timings) where any config has them
    eligible = {h: v for h, v in samples.items() if len(v) >= 3}
    if not eligible:
        finalists = [h for h, v in samples.items() if len(v) > 1]
        cutoff = max((search[h] for h in finalists), default=float("inf"))
        eligible = {h: v for h, v in samples.items() if len(v) > 1 or v[0] < cutoff}
    best = min(eligible, key=lambda h: statistics.median(eligible[h]))
    return best, statistics.median(eligible[best]), len(eligible[best])
