"""Shapes seen in production: best_config's opt-in recording of the lookups that fell back, flushed to
``autotune_shape_requests``, listed by ``autotune show --requests``, planned by the next nightly job."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.runtime import requests_log
from autotune.runtime.lookup import best_config, clear_cache
from autotune.store import Store

sys.path.insert(0, str(Path(__file__).parent))
from test_lookup import DEVICE, tune  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("AUTOTUNE_RECORD", raising=False)
    # these tests count what each explicit flush() writes: the background flush of a new miss must not
    # take them first (test_a_new_miss_is_written_promptly checks that flush, in a process of its own)
    monkeypatch.setattr(requests_log, "NEW_MISS_FLUSH_S", 3600.0)
    clear_cache()
    yield
    clear_cache()


def counts(store: Store) -> dict[tuple[str, str], int]:
    return {(r.kernel_name, r.shape_key): r.count for r in store.requests.recorded()}


def test_fallbacks_are_counted_and_flushed(store):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    for _ in range(3):
        assert best_config("gemm", db=store.url, device="cpu", M=100, N=128, record=True) == {"BLOCK": 64}
    for _ in range(2):  # exact: not recorded
        best_config("gemm", db=store.url, device="cpu", M=64, N=128, record=True)
    assert best_config("other", db=store.url, device="cpu", default={"X": 1}, M=8, record=True) == {"X": 1}
    best_config("gemm", db=store.url, device="cpu", M=100, N=128)  # recording off for this call: not counted
    assert requests_log.flush() == 4
    assert counts(store) == {("gemm", "M=100,N=128"): 3, ("other", "M=8"): 1}
    (r,) = [r for r in store.requests.recorded("gemm")]
    assert r.device_name == DEVICE and r.dims == {"M": 100, "N": 128} and r.first_seen <= r.last_seen
    # only new counts are written by the next flush; they add up in the database
    assert requests_log.flush() == 0
    best_config("gemm", db=store.url, device="cpu", M=100, N=128, record=True)
    assert requests_log.flush() == 1
    assert counts(store)[("gemm", "M=100,N=128")] == 4


def test_env_switch_and_keyword_off(store, monkeypatch):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    monkeypatch.setenv("AUTOTUNE_RECORD", "1")
    clear_cache()
    best_config("gemm", db=store.url, device="cpu", M=200, N=128)
    best_config("gemm", db=store.url, device="cpu", M=200, N=128, record=False)
    best_config("gemm", db=store.url, device="cpu", M=300, N=128, record=False)
    requests_log.flush()
    assert counts(store) == {("gemm", "M=200,N=128"): 1}


def test_export_file_lookups_record_into_the_named_database(store, tmp_path, monkeypatch):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    export = tmp_path / "best.json"
    subprocess.run(
        [sys.executable, "-m", "autotune", "export", "--db", store.url, "--out", str(export)],
        check=True,
        cwd=REPO,
    )
    # the export file has no database: AUTOTUNE_RECORD names one
    monkeypatch.setenv("AUTOTUNE_RECORD", store.url)
    clear_cache()
    assert best_config("gemm", db=str(export), device="cpu", M=65, N=128) == {"BLOCK": 64}
    requests_log.flush()
    assert counts(store) == {("gemm", "M=65,N=128"): 1}


def test_a_failing_database_never_raises_and_keeps_the_counts(store, tmp_path, caplog, monkeypatch):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    bad = f"sqlite:///{tmp_path / 'missing' / 'nowhere.db'}"
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.requests_log"):
        for _ in range(2):
            best_config("gemm", db=store.url, device="cpu", M=100, N=128, record=bad)
        assert requests_log.flush() == 0
        assert requests_log.flush() == 0
    warned = [r for r in caplog.records if r.name == "autotune.runtime.requests_log"]
    assert len(warned) == 1 and "could not record" in warned[0].getMessage()
    # the counts are kept: the same misses land once the database is there
    (m,) = requests_log.misses.values()
    m.target = store.url
    assert requests_log.flush() == 2


def test_a_program_flushes_at_exit_without_heavy_imports(store):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    code = (
        "import sys, autotune\n"
        f"for _ in range(5): autotune.best_config('gemm', db={store.url!r}, device='cpu', M=33, N=128)\n"
        "print(sorted(m for m in ('optuna', 'typer', 'alembic', 'torch') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        # the first lookup's 1 s bound counts the driver's import: on a loaded machine it can run out, and
        # this test is about the flush at exit, not about the bound
        env={**os.environ, "AUTOTUNE_RECORD": "1", "AUTOTUNE_LOOKUP_TIMEOUT": "30"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert counts(store) == {("gemm", "M=33,N=128"): 5}


def test_a_new_miss_is_written_promptly_by_the_background_thread(store):
    """A running `autotune serve` starts on a miss once it is in the database: the background thread writes
    a new missed shape soon after it is first seen, not at its next 30 s flush (made an hour here) or at exit."""
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    code = (
        "import os, sys, time\n"
        "from autotune.runtime import requests_log\n"
        "from autotune.runtime.lookup import best_config\n"
        "from autotune.store import Store\n"
        "requests_log.FLUSH_INTERVAL_S = 3600.0\n"
        f"best_config('gemm', db={store.url!r}, device='cpu', M=77, N=128, record=True)\n"
        f"store = Store({store.url!r})\n"
        "deadline = time.monotonic() + 60\n"
        "while not store.requests.recorded('gemm') and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        "print([r.shape_key for r in store.requests.recorded('gemm')], flush=True)\n"
        "os._exit(0)  # no exit flush: what is there was written by the background thread\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "AUTOTUNE_LOOKUP_TIMEOUT": "30"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['M=77,N=128']"


def test_show_requests_lists_them(store):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    best_config("gemm", db=store.url, device="cpu", M=512, N=128, record=True)
    requests_log.flush()
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "show", "--requests", "--db", store.url],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "M=512,N=128" in proc.stdout and DEVICE in proc.stdout


def triton_export(store, out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "export",
            "--format",
            "triton",
            "--db",
            store.url,
            "--out",
            str(out),
        ],
        check=True,
        cwd=REPO,
    )


def test_triton_export(store, tmp_path):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64, "USE_TMA": True, "num_warps": 4, "num_stages": 3})
    out = tmp_path / "configs.json"
    triton_export(store, out)
    doc = json.loads(out.read_text())
    assert doc["configs"]["gemm"][DEVICE]["M=64,N=128"] == [
        {"kwargs": {"BLOCK": 64, "USE_TMA": True}, "num_warps": 4, "num_stages": 3}
    ]


@pytest.mark.triton
def test_triton_export_as_python_builds_triton_configs(store, tmp_path):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64, "USE_TMA": True, "num_warps": 4, "num_stages": 3})
    triton_export(store, tmp_path / "best_triton.py")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import best_triton\n"
        "(c,) = best_triton.configs('gemm')\n"
        "print(repr(c.kwargs), c.num_warps, c.num_stages)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["{'BLOCK':", "64,", "'USE_TMA':", "True}", "4", "3"]
