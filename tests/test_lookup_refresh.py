"""The runtime lookup sees new bests without a restart: a shape that fell back (to the nearest tuned shape or
the default) re-reads its kernel's rows in the background every ``AUTOTUNE_LOOKUP_RETRY`` seconds, and the
call that finds the new rows returns the tuned config; a call never waits for a re-read; an exactly tuned
answer (a hit) never re-reads. Checked by what the lookup did (its loads and answers), not by a stopwatch."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import event

from autotune.runtime import lookup
from autotune.runtime.lookup import best_config, best_config_match, clear_cache
from autotune.store import Store
from tests.test_lookup import tune

REPO = Path(__file__).resolve().parent.parent
DEFAULT = {"BLOCK": 0}
#: short enough that a test sees a re-read; the interval's own value is the setting's business
RETRY = "0.2"

#: another process writes a best row, as `autotune serve` or a nightly job would
WRITER = """
import sys
from autotune.shapes import format_shape
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus
from tests.test_lookup import ENV
url, kernel, m, block = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
dims = {"M": m}
with Store(url) as store:
    key = store.keys.ensure(kernel, "a" * 64, "s" * 64, {}, dims, format_shape(dims), {"a": "bfloat16"}, ENV)
    store.trials.record(key.id, TrialResult(TrialStatus.OK, {"BLOCK": block}, time_s=1e-5))
    assert store.trials.refresh_best(key.id) is not None
"""


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_LOOKUP_TIMEOUT", "60")  # a first load waits for its rows, however loaded
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", RETRY)
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RECHECK", RETRY)
    clear_cache()
    yield
    for load in list(lookup._loads.values()):  # a background re-read must not log into the next test
        if load.refresh is not None:
            load.refresh.done.wait(60)
    clear_cache()


def eventually(predicate, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def write_from_another_process(url: str, kernel: str, m: int, block: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, url, kernel, str(m), str(block)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def load_of(kernel: str = "gemm"):
    (load,) = [v for k, v in lookup._loads.items() if k[1] == kernel]
    return load


def test_a_fallback_is_served_tuned_once_another_process_writes_its_best(store):
    tune(store, {"M": 64}, {"BLOCK": 64})
    # nearest: M=128 falls back to M=64's config; another kernel, nothing tuned: the default
    assert best_config_match("gemm", db=store.url, device="cpu", M=128)[:2] == ({"BLOCK": 64}, "nearest")
    assert best_config("fresh", db=store.url, device="cpu", default=DEFAULT, M=128) is DEFAULT
    write_from_another_process(store.url, "gemm", 128, 128)
    write_from_another_process(store.url, "fresh", 128, 32)
    # the same process, no clear_cache(): within the retry interval (plus the re-read) the tuned answers
    assert eventually(lambda: best_config("gemm", db=store.url, device="cpu", M=128) == {"BLOCK": 128})
    assert best_config_match("gemm", db=store.url, device="cpu", M=128) == ({"BLOCK": 128}, "exact", "")
    assert eventually(
        lambda: best_config("fresh", db=store.url, device="cpu", default=DEFAULT, M=128) == {"BLOCK": 32}
    )
    # the other shapes answer from the new rows too; an exact answer stays put
    assert best_config("gemm", db=store.url, device="cpu", M=64) == {"BLOCK": 64}
    assert best_config("gemm", db=store.url, device="cpu", M=120) == {"BLOCK": 128}


def test_a_recorded_miss_stops_counting_once_served_tuned(sqlite_url):
    from autotune.runtime import requests_log

    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    for _ in range(3):
        assert best_config("gemm", db=sqlite_url, device="cpu", record=True, M=128) == {"BLOCK": 64}
    assert requests_log.flush() == 3
    with Store(sqlite_url) as store:
        tune(store, {"M": 128}, {"BLOCK": 128})
    assert eventually(
        lambda: best_config("gemm", db=sqlite_url, device="cpu", record=True, M=128) == {"BLOCK": 128}
    )
    requests_log.flush()
    for _ in range(10):  # tuned now: these lookups are hits, not misses
        assert best_config("gemm", db=sqlite_url, device="cpu", record=True, M=128) == {"BLOCK": 128}
    assert requests_log.flush() == 0


def test_a_hit_never_rereads(sqlite_url, monkeypatch):
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "0")  # any re-read would be due at once
    assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 64}
    first = load_of()
    queries: list[str] = []
    event.listen(
        lookup._stores[sqlite_url].db.engine, "before_cursor_execute", lambda *a: queries.append(a[2])
    )
    with Store(sqlite_url) as store:  # a newer best of the same shape: a hit is final until clear_cache()
        tune(store, {"M": 64}, {"BLOCK": 16}, time_s=1e-6)
    for _ in range(1000):
        assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 64}
    assert load_of() is first and first.refresh is None and queries == []

    # a shape that falls back does re-read (in the background), and its kernel's rows are then the new ones
    assert best_config("gemm", db=sqlite_url, device="cpu", M=100) == {"BLOCK": 64}
    assert eventually(lambda: best_config("gemm", db=sqlite_url, device="cpu", M=100) == {"BLOCK": 16})
    assert load_of() is not first
    assert queries
    assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 64}  # still the cached hit
    clear_cache()
    assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 16}


def test_rereads_are_at_most_one_per_interval(sqlite_url, monkeypatch):
    """Many calls of a missed shape within the interval start one re-read, not one each."""
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "3600")
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RECHECK", "3600")
    assert best_config("gemm", db=sqlite_url, device="cpu", default=DEFAULT, M=128) == {"BLOCK": 64}
    first = load_of()
    for m in (128, 256, 128) * 100:
        assert best_config("gemm", db=sqlite_url, device="cpu", default=DEFAULT, M=m) == {"BLOCK": 64}
    assert load_of() is first and first.refresh is None  # the interval has not passed: nothing re-read
    with Store(sqlite_url) as store:  # something changed: the look that comes next re-reads the rows
        tune(store, {"M": 32}, {"BLOCK": 32})
    first.recheck_at = 0.0  # the interval has passed (as it would an hour later)
    for m in (128, 256, 128) * 100:
        assert best_config("gemm", db=sqlite_url, device="cpu", default=DEFAULT, M=m) == {"BLOCK": 64}
    refresh = first.refresh
    assert refresh is not None and eventually(lambda: load_of() is refresh)
    assert refresh.refresh is None  # the new rows' interval starts now: no second re-read yet


@pytest.fixture
def tuned_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'tuned.db'}"
    with Store(url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    return url


def hold_exclusive(url: str) -> sqlite3.Connection:
    """Lock the (WAL) file as a writing process could: WAL readers are blocked by the exclusive locking mode."""
    # the exclusive mode needs the file to itself: the lookup's idle pooled connections are closed first (the
    # re-read opens a new one, as after a pool recycle)
    lookup._stores[url].db.engine.dispose()
    holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")
    return holder


def release(holder: sqlite3.Connection) -> None:
    holder.rollback()
    holder.execute("PRAGMA locking_mode=NORMAL")
    holder.execute("SELECT 1 FROM sqlite_master").fetchall()  # NORMAL takes effect on the next access
    holder.close()


def test_a_call_during_a_slow_reread_returns_the_fallback_at_once(tuned_file, monkeypatch):
    # the re-read waits on the lock until it is released (a slow database), not 0.25 s
    monkeypatch.setattr(lookup, "SQLITE_BUSY_TIMEOUT_S", 600)
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "3600")
    assert best_config("gemm", db=tuned_file, device="cpu", default=DEFAULT, M=128) == {"BLOCK": 64}
    assert best_config("other", db=tuned_file, device="cpu", default=DEFAULT, M=128) is DEFAULT
    with Store(tuned_file) as store:
        tune(store, {"M": 128}, {"BLOCK": 128})
        tune(store, {"M": 128}, {"BLOCK": 8}, kernel="other")
    holder = hold_exclusive(tuned_file)
    try:
        first, other = load_of("gemm"), load_of("other")
        first.recheck_at = other.recheck_at = 0.0  # the interval has passed
        for _ in range(3):  # each call returns while the re-read it started still waits on the lock
            assert best_config("gemm", db=tuned_file, device="cpu", default=DEFAULT, M=128) == {"BLOCK": 64}
            assert best_config("other", db=tuned_file, device="cpu", default=DEFAULT, M=128) is DEFAULT
            assert first.refresh is not None and not first.refresh.done.is_set()
            assert other.refresh is not None and not other.refresh.done.is_set()
        refresh = first.refresh
    finally:
        release(holder)
    # the lock gone, the re-reads end and the next calls answer from their rows
    assert eventually(lambda: best_config("gemm", db=tuned_file, device="cpu", M=128) == {"BLOCK": 128})
    assert load_of("gemm") is refresh
    assert eventually(
        lambda: best_config("other", db=tuned_file, device="cpu", default=DEFAULT, M=128) == {"BLOCK": 8}
    )


def test_a_failing_reread_keeps_the_rows_warns_once_and_tries_again(tuned_file, caplog):
    assert best_config("gemm", db=tuned_file, device="cpu", M=128) == {"BLOCK": 64}
    first = load_of()
    with Store(tuned_file) as store:
        tune(store, {"M": 128}, {"BLOCK": 128})
    holder = hold_exclusive(tuned_file)
    try:
        with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
            failed = []

            def a_reread_failed() -> bool:
                # every call answers from the rows read before (the nearest shape), never the default
                assert best_config("gemm", db=tuned_file, device="cpu", default=DEFAULT, M=128) == {
                    "BLOCK": 64
                }
                refresh = first.refresh
                if refresh is not None and refresh.done.is_set() and refresh.rows is None:
                    failed.append(refresh)
                return len(set(map(id, failed))) >= 2  # failed, and failed again one interval later

            assert eventually(a_reread_failed)
            assert load_of() is first
        said = [
            r.getMessage()
            for r in caplog.records
            if r.name == "autotune.runtime.lookup" and r.levelno == logging.WARNING
        ]
        assert len(said) == 1 and "re-reading" in said[0] and "locked" in said[0], said
    finally:
        release(holder)
    assert eventually(lambda: best_config("gemm", db=tuned_file, device="cpu", M=128) == {"BLOCK": 128})


def test_an_unused_fallback_never_rereads(tuned_file, monkeypatch):
    """Re-reads are driven by calls: a process that no longer asks for a missed shape reads nothing."""
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "0")
    assert best_config("gemm", db=tuned_file, device="cpu", M=128) == {"BLOCK": 64}
    first = load_of()
    time.sleep(0.3)
    assert load_of() is first and first.refresh is None


def test_a_fallback_looks_cheaply_every_few_seconds_and_rereads_only_what_changed(sqlite_url, monkeypatch):
    """Issue 45: a production miss was served tuned only after the 60 s re-read. Now a shape that fell back
    looks every ``AUTOTUNE_LOOKUP_RECHECK`` seconds (default 2) with one aggregate query; the rows are read
    again only when a best was stored, replaced or deleted."""
    from autotune import settings

    assert settings.LOOKUP_RECHECK_S <= 5 < settings.LOOKUP_RETRY_S
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "3600")  # only the cheap look may bring the new best
    assert best_config("gemm", db=sqlite_url, device="cpu", M=128) == {"BLOCK": 64}
    first = load_of()
    queries: list[str] = []
    event.listen(
        lookup._stores[sqlite_url].db.engine, "before_cursor_execute", lambda *a: queries.append(a[2])
    )
    for _ in range(3):  # nothing changed: each look is one query, and the rows stay
        first.recheck_at = 0.0
        assert best_config("gemm", db=sqlite_url, device="cpu", M=128) == {"BLOCK": 64}
        refresh = first.refresh
        assert refresh is not None and refresh.done.wait(60) and refresh.rows is None
        assert load_of() is first and 0 < first.recheck_at < float("inf")
    selects = [q for q in queries if q.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 3 and all("count(" in q.lower() for q in selects), queries
    write_from_another_process(sqlite_url, "gemm", 128, 128)
    assert eventually(lambda: best_config("gemm", db=sqlite_url, device="cpu", M=128) == {"BLOCK": 128})
    assert load_of() is not first


def test_an_answer_is_exact_only_for_the_source_hash_asked_for(sqlite_url):
    """Issue 45: v2's lookups answered ``exact`` with v1's configs. A config tuned for the shape under
    another source is a fallback (``nearest``, from that shape), re-checked like one; asked without a
    source hash, the newest is exact as before."""
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64}, source="1" * 64)
    v2 = best_config_match("gemm", db=sqlite_url, device="cpu", source_hash="2" * 12, M=64)
    assert v2 == ({"BLOCK": 64}, "nearest", "M=64")
    assert best_config_match("gemm", db=sqlite_url, device="cpu", source_hash="1" * 12, M=64)[1] == "exact"
    assert best_config_match("gemm", db=sqlite_url, device="cpu", M=64)[1] == "exact"
    with Store(sqlite_url) as store:
        tune(store, {"M": 64}, {"BLOCK": 16}, source="2" * 64)
    assert eventually(
        lambda: (
            best_config_match("gemm", db=sqlite_url, device="cpu", source_hash="2" * 12, M=64)
            == ({"BLOCK": 16}, "exact", "")
        )
    )
