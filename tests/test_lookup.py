"""The runtime lookup ``best_config``: cached, never raising, light to import."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from sqlalchemy import event

from autotune.env import current_device_name
from autotune.runtime import lookup
from autotune.runtime.lookup import best_config, clear_cache
from autotune.shapes import format_shape
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus

REPO = Path(__file__).resolve().parent.parent
DEVICE = current_device_name("cpu")
ENV = {
    "device_kind": "cpu",
    "gpu_name": DEVICE,
    "cc": "cpu",
    "sm_count": 2,
    "driver": "none",
    "cuda": "none",
    "torch": "2.8.0",
    "triton": "3.6.0",
}
DEFAULT = {"BLOCK": 0}


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    # A first lookup waits AUTOTUNE_LOOKUP_TIMEOUT (1 s) for its rows, SQLAlchemy's import included, which a
    # loaded machine can exceed; these tests check the answers, so they wait longer (the timeout's own tests
    # in test_faults_lookup.py set theirs). Subprocesses inherit it.
    monkeypatch.setenv("AUTOTUNE_LOOKUP_TIMEOUT", "60")
    clear_cache()
    yield
    clear_cache()


def tune(
    store: Store,
    dims: dict[str, int],
    config: dict,
    *,
    kernel: str = "gemm",
    source: str = "a" * 64,
    time_s: float = 1e-5,
    **env,
) -> None:
    key = store.keys.ensure(
        kernel, source, "s" * 64, {}, dims, format_shape(dims), {"a": "bfloat16"}, {**ENV, **env}
    )
    store.trials.record(key.id, TrialResult(TrialStatus.OK, config, time_s=time_s))
    assert store.trials.refresh_best(key.id) is not None


def warnings_of(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "autotune.runtime.lookup" and r.levelno == logging.WARNING
    ]


def test_exact_hit(store):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    tune(store, {"M": 4096, "N": 128}, {"BLOCK": 256})
    assert best_config("gemm", db=store.url, device="cpu", M=64, N=128) == {"BLOCK": 64}
    assert best_config("gemm", db=store.url, device="cpu", N=128, M=64) == {"BLOCK": 64}  # any kwarg order
    assert best_config("gemm", db=store.url, device="cpu", M=4096, N=128, default=DEFAULT) == {"BLOCK": 256}


def test_nearest_shape_logs_debug(store, caplog):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    tune(store, {"M": 4096, "N": 128}, {"BLOCK": 256})
    with caplog.at_level(logging.DEBUG, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=store.url, device="cpu", M=100, N=128) == {"BLOCK": 64}
        assert best_config("gemm", db=store.url, device="cpu", M=3000, N=100) == {"BLOCK": 256}
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("M=100,N=128" in m and "M=64,N=128" in m for m in debug)
    assert any("M=4096,N=128" in m for m in debug)
    assert not warnings_of(caplog)
    # other dimension names are not "near": the default
    assert best_config("gemm", db=store.url, device="cpu", default=DEFAULT, S=64) is DEFAULT


def test_an_unknown_dimension_name_warns_once_with_a_hint(store, caplog):
    """``KK=256`` for ``K`` is a typo that would give the default config forever: one warning says so."""
    tune(store, {"M": 64, "K": 128}, {"BLOCK": 64})
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        for _ in range(3):
            assert best_config("gemm", db=store.url, device="cpu", default=DEFAULT, M=64, KK=256) is DEFAULT
        assert best_config("gemm", db=store.url, device="cpu", default=DEFAULT, M=64, KK=512) is DEFAULT
    (msg,) = warnings_of(caplog)
    assert "unknown dimension KK (did you mean K?)" in msg and "M,K" in msg, msg
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=store.url, device="cpu", M=70, K=100) == {"BLOCK": 64}  # right names
    assert not warnings_of(caplog)


def test_default_when_nothing_tuned(store, caplog):
    tune(store, {"M": 64}, {"BLOCK": 64})
    assert best_config("other", db=store.url, device="cpu", default=DEFAULT, M=64) is DEFAULT
    assert best_config("other", db=store.url, device="cpu", M=64) is None
    tune(store, {"M": 64}, {"BLOCK": 32}, gpu_name="NVIDIA H200")
    assert best_config("gemm", db=store.url, device="cpu", M=64) == {"BLOCK": 64}
    assert not warnings_of(caplog)


def test_missing_db_file_warns_once(tmp_path, caplog):
    path = tmp_path / "none" / "autotune.db"
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        for m in range(50):
            assert best_config("gemm", db=str(path), device="cpu", default=DEFAULT, M=64 + m % 3) is DEFAULT
        assert best_config("gemm", db=str(path), default=DEFAULT, M=64) is DEFAULT
    (msg,) = warnings_of(caplog)
    assert "gemm" in msg and str(path) in msg
    assert not path.exists() and not path.parent.exists()  # the lookup never creates a database


def test_db_without_schema_warns_once(db_url, caplog):
    with Store(db_url) as store:
        store.schema.status()  # SQLite: creates the (empty) database file
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        for _ in range(5):
            assert best_config("gemm", db=db_url, device="cpu", default=DEFAULT, M=64) is DEFAULT
    (msg,) = warnings_of(caplog)
    assert "autotune db upgrade" in msg


def test_unreachable_postgres_warns_once(closed_port, caplog):
    url = f"postgresql://postgres:s3cret@127.0.0.1:{closed_port}/autotune"
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64) is DEFAULT
        (failed,) = lookup._loads.values()
        for m in range(19):
            assert best_config("gemm", db=url, device="cpu", default=DEFAULT, M=64 + m % 2) is DEFAULT
    # the failure is remembered: no lookup after the first connects again (nor waits for a connect)
    assert list(lookup._loads.values()) == [failed] and failed.done.is_set() and failed.rows is None
    (msg,) = warnings_of(caplog)
    assert "127.0.0.1" in msg and "s3cret" not in msg


def test_bad_url_or_shape_never_raises(caplog):
    with caplog.at_level(logging.WARNING, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db="mysql://u:s3cret@h/db", default=DEFAULT, M=64) is DEFAULT
        assert best_config("gemm", db="mysql://u:s3cret@h/db", default=DEFAULT, M=64) is DEFAULT
        assert best_config("gemm", db="mysql://u:s3cret@h/db", default=DEFAULT, M=[1]) is DEFAULT
    assert len(warnings_of(caplog)) == 1 and "s3cret" not in warnings_of(caplog)[0]


def test_cache_hits_do_not_query(sqlite_url, monkeypatch):
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
        tune(store, {"M": 1024}, {"BLOCK": 128})
    assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 64}
    queries = []
    event.listen(
        lookup._stores[sqlite_url].db.engine, "before_cursor_execute", lambda *a: queries.append(a[2])
    )
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for _ in range(1000):  # served from the cache: no query, and the deleted file is not missed
        assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 64}
    # another shape of the same kernel: served from the rows loaded by the first call
    assert best_config("gemm", db=sqlite_url, device="cpu", M=900) == {"BLOCK": 128}
    assert queries == []
    clear_cache()  # the file is gone: now the default
    assert best_config("gemm", db=sqlite_url, device="cpu", default=DEFAULT, M=64) is DEFAULT


def test_returns_a_copy(sqlite_url):
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64, "order": [1, 0]})
    got = best_config("gemm", db=sqlite_url, device="cpu", M=64)
    got["BLOCK"] = -1
    got["order"].append(9)
    assert best_config("gemm", db=sqlite_url, device="cpu", M=64) == {"BLOCK": 64, "order": [1, 0]}


def test_uses_autotune_db_env(sqlite_url, monkeypatch):
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    monkeypatch.setenv("AUTOTUNE_DB", sqlite_url)
    assert best_config("gemm", device="cpu", M=64) == {"BLOCK": 64}


def test_version_and_source_preference(store, monkeypatch, caplog):
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    tune(store, {"M": 64}, {"v": "torch-2.8"}, torch="2.8.0")
    time.sleep(0.01)
    tune(store, {"M": 64}, {"v": "torch-2.7"}, torch="2.7.1")  # newest
    time.sleep(0.01)
    tune(store, {"M": 64}, {"v": "src-b"}, torch="2.6.0", source="b" * 64)  # newest, other source
    # torch not imported by the caller: no version preference, the newest wins
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert best_config("gemm", db=store.url, device="cpu", M=64) == {"v": "src-b"}
    # a source hash (or its prefix) selects that source's rows first
    clear_cache()
    assert best_config("gemm", db=store.url, device="cpu", source_hash="a" * 12, M=64) == {"v": "torch-2.7"}
    # then the running torch version (its local '+cu128' suffix ignored)
    clear_cache()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.8.0+cu128"))
    assert best_config("gemm", db=store.url, device="cpu", source_hash="a" * 64, M=64) == {"v": "torch-2.8"}
    # a source hash nobody tuned: fall back across sources and versions, saying so at DEBUG
    clear_cache()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.9.0"))
    with caplog.at_level(logging.DEBUG, logger="autotune.runtime.lookup"):
        assert best_config("gemm", db=store.url, device="cpu", source_hash="c" * 64, M=64) == {"v": "src-b"}
    debug = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert "source" in debug and "torch 2.6.0" in debug and "running torch 2.9.0" in debug


def test_import_is_light(sqlite_url):
    with Store(sqlite_url) as store:
        store.schema.upgrade()
        tune(store, {"M": 64}, {"BLOCK": 64})
    code = (
        "import sys\n"
        "heavy = ('optuna', 'typer', 'alembic', 'torch', 'triton')\n"
        "import autotune.runtime.lookup\n"
        "loaded = [m for m in (*heavy, 'sqlalchemy') if m in sys.modules]\n"
        "assert not loaded, f'import autotune.runtime.lookup loaded {loaded}'\n"
        "from autotune.runtime.lookup import best_config\n"
        "assert best_config('gemm', db=sys.argv[1], M=64) == {'BLOCK': 64}\n"
        "assert best_config('gemm', db=sys.argv[1] + '.missing', default=1, M=64) == 1\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, f'best_config loaded {loaded}'\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_DB", "PYTHONPATH")}
    out = subprocess.run(
        [sys.executable, "-c", code, sqlite_url],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def export(db: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", "export", "--db", db, "--out", str(out), *extra],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def test_exported_file_answers_like_the_database(store, tmp_path):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    tune(store, {"M": 4096, "N": 128}, {"BLOCK": 256})
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 8}, kernel="other")
    out = tmp_path / "best.json"
    proc = export(store.url, out, "--kernel", "gemm")
    assert proc.returncode == 0, proc.stderr
    for shape in ({"M": 64, "N": 128}, {"M": 4096, "N": 128}, {"M": 100, "N": 128}, {"M": 3000, "N": 100}):
        clear_cache()
        from_db = best_config("gemm", db=store.url, device="cpu", **shape)
        clear_cache()
        assert best_config("gemm", db=str(out), device="cpu", **shape) == from_db
    # --kernel filtered the other kernel out
    assert best_config("other", db=str(out), device="cpu", default=DEFAULT, M=64, N=128) == DEFAULT


def test_exported_file_needs_no_sqlalchemy(store, tmp_path):
    tune(store, {"M": 64, "N": 128}, {"BLOCK": 64})
    out = tmp_path / "best.json"
    assert export(store.url, out).returncode == 0
    code = (
        "import sys, autotune\n"
        "print(autotune.best_config('gemm', device='cpu', M=64, N=128))\n"
        "print(sorted(m for m in ('sqlalchemy', 'optuna', 'alembic', 'typer', 'torch') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "AUTOTUNE_DB": str(out)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["{'BLOCK': 64}", "[]"]


def test_bad_export_file_warns_once_and_returns_default(tmp_path, caplog):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else", "records": []}')
    for _ in range(3):
        assert best_config("gemm", db=str(bad), device="cpu", default=DEFAULT, M=1, N=2) == DEFAULT
        assert (
            best_config("gemm", db=str(tmp_path / "missing.json"), device="cpu", default=DEFAULT, M=1)
            == DEFAULT
        )
    assert len(warnings_of(caplog)) == 2


def test_export_errors(store, tmp_path):
    proc = export(store.url, tmp_path / "best.txt")
    assert proc.returncode == 2 and "must end in .json" in proc.stderr
    proc = export(store.url, tmp_path / "best.json")
    assert proc.returncode == 1 and "nothing tuned" in proc.stderr
    assert not (tmp_path / "best.json").exists()


def test_an_export_file_of_another_version_falls_back_with_a_warning(tmp_path, caplog):
    import json as _json

    from autotune.records import EXPORT_FORMAT, EXPORT_VERSION
    from autotune.runtime import lookup as _lookup

    f = tmp_path / "best.json"
    f.write_text(_json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION + 1, "records": []}))
    _lookup.clear_cache()
    with caplog.at_level("WARNING"):
        assert _lookup.best_config("k", M=1, default={"d": 1}, db=str(f), device="cpu") == {"d": 1}
    assert "version" in caplog.text and "export it again" in caplog.text
