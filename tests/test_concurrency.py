"""Many `autotune search` processes on one database: claims keep every config measured once; a search killed
with SIGKILL loses nothing finished and leaves nothing stuck. Real processes, real databases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.store import Store
from autotune.trial import TrialStatus, config_hash
from tests.conftest import expected_best, wait_for_trials

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "tests" / "kernels" / "tiny.py")
SPACE_SIZE = 24


def search_cmd(url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autotune",
        "search",
        TINY,
        "--device",
        "cpu",
        "--shape",
        "N=32",
        "--strategy",
        "exhaustive",
        "--trials",
        "100",
        "--num-tests",
        "2",
        "--db",
        url,
        *extra,
    ]


def run_many(url: str, n: int, env: dict | None = None) -> list[subprocess.CompletedProcess]:
    procs = [
        subprocess.Popen(
            search_cmd(url),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        for _ in range(n)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=900)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def check_no_duplicates(url: str) -> None:
    store = Store(url)
    rows = store.history.key_states()
    assert len(rows) == 1, rows
    key = rows[0].key_id
    trials = store.trials.recorded(key)
    ran = [t for t in trials if t.status is not TrialStatus.INVALID]
    hashes = [config_hash(t.config) for t in ran]
    assert len(hashes) == len(set(hashes)), "a config was measured twice"
    assert store.trials.duplicate_measurements() == 0
    assert len(set(hashes)) == SPACE_SIZE
    # Behaviour, not speed: every config ran once and ended ok, or as `timeout` when a loaded machine
    # starved a candidate past the adaptive run limit (10 s floor); anything else is a bug, named here.
    failed = [
        (t.config, t.status.value, (t.error or "")[-300:]) for t in ran if t.status is not TrialStatus.OK
    ]
    assert all(status == TrialStatus.TIMEOUT.value for _, status, _ in failed), failed
    assert any(t.status is TrialStatus.OK for t in ran), failed
    assert store.claims.running(key) == {}
    # a consistent best row: the lowest median over each config's measurements (its search trial and the
    # finalists' re-timings, which every searcher adds), a once-measured config not outranking the finalists
    want_hash, want_median, want_samples = expected_best(store, key)
    best = store.trials.best("tiny")
    assert len(best) == 1 and best[0].time_s == pytest.approx(want_median)
    assert config_hash(best[0].config) == want_hash and best[0].samples == want_samples
    import optuna

    study = optuna.load_study(study_name=rows[0].study_name, storage=url)
    assert all(t.state.is_finished() for t in study.trials)
    ids = [t.user_attrs["autotune_trial_id"] for t in study.trials]
    assert len(ids) == len(set(ids)) == len(trials)


@pytest.mark.slow
@pytest.mark.postgres
def test_eight_processes_on_a_fresh_postgres(pg_url):
    # no `db upgrade` first: the processes race to create our schema and Optuna's on an empty database.
    # Generous limits: eight searches on a shared 2-core machine are slow, and this test is about claims
    # (a lease a starved renewal thread lets lapse would let a second process measure a config again).
    results = run_many(pg_url, 8, env={"AUTOTUNE_LEASE": "600", "AUTOTUNE_START_TIMEOUT": "600"})
    for r in results:
        assert r.returncode == 0, r.stderr[-2000:]
        assert "Traceback" not in r.stderr
    check_no_duplicates(pg_url)


@pytest.mark.slow
def test_four_processes_on_one_sqlite_file(sqlite_url):
    results = run_many(sqlite_url, 4)
    for r in results:
        assert r.returncode == 0, r.stderr[-2000:]
    check_no_duplicates(sqlite_url)


def test_kill_9_mid_search_then_rerun(sqlite_url):
    env = {**os.environ, "TINY_COMPILE_SLEEP": "0.3"}
    proc = subprocess.Popen(
        search_cmd(sqlite_url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    store = Store(sqlite_url)
    done = wait_for_trials(store, 4)
    assert done, "the search never stored a trial"
    os.killpg(proc.pid, signal.SIGKILL)  # the orchestrator and its worker, mid-evaluation
    proc.wait(timeout=30)
    key = store.history.key_states()[0].key_id
    assert store.claims.running(key), "a claim should have been in flight"
    before = store.trials.recorded(key)
    assert before[: len(done)] == done
    # rerun on the same host: the dead owner's claim is taken over at once, nothing is measured twice
    rerun = subprocess.run(search_cmd(sqlite_url), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    after = store.trials.recorded(key)
    assert after[: len(before)] == before, "a finished trial was lost"
    check_no_duplicates(sqlite_url)
