"""The results store on real SQLite files and a real Postgres (see conftest.py: ``db_url``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, update

from autotune.env import env_hash
from autotune.errors import DatabaseUnreachableError, SchemaOutOfDateError, StoreError
from autotune.shapes import format_shape
from autotune.store import Store, default_db_url, mask_url, normalize_db_url
from autotune.store.models import VERSION_TABLE
from autotune.trial import TrialResult, TrialStatus, config_hash

REPO = Path(__file__).resolve().parent.parent
ENV = {
    "device_kind": "cuda",
    "gpu_name": "NVIDIA H200",
    "cc": "9.0",
    "sm_count": 132,
    "driver": "570.86",
    "cuda": "12.8",
    "torch": "2.8.0",
    "triton": "3.6.0",
    "hostname": "node1",
}
SHAPE = {"M": 64, "N": 2112, "K": 7168}


def ensure(
    store: Store,
    *,
    kernel: str = "fp8_gemm",
    shape: dict[str, int] | None = None,
    env: dict | None = None,
    source: str = "5" * 64,
    space: str = "a" * 64,
    dtypes: dict | None = None,
):
    shape = shape or SHAPE
    return store.keys.ensure(
        kernel,
        source,
        space,
        {"BLOCK_M": {"choices": [64, 128]}},
        shape,
        format_shape(shape),
        dtypes or {"a": "float8_e4m3fn", "out": "bfloat16"},
        env or ENV,
    )


def ok(config: dict, time_s: float, **kw) -> TrialResult:
    return TrialResult(TrialStatus.OK, config, time_s=time_s, tflops=1e-9 / time_s, **kw)


def run_py(code: str, *args: str, timeout: float = 120) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "AUTOTUNE_DB"}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ---------------------------------------------------------------- URLs


def test_normalize_db_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize_db_url("results.db") == f"sqlite:///{tmp_path / 'results.db'}"
    assert normalize_db_url(str(tmp_path / "a.db")) == f"sqlite:///{tmp_path / 'a.db'}"
    assert normalize_db_url("sqlite:///rel.db") == f"sqlite:///{tmp_path / 'rel.db'}"
    assert normalize_db_url("sqlite:////abs/x.db") == "sqlite:////abs/x.db"
    assert normalize_db_url("postgresql://u:p@h:5/db") == "postgresql+psycopg://u:p@h:5/db"
    assert (
        normalize_db_url("postgres://u@h/db?sslmode=require") == "postgresql+psycopg://u@h/db?sslmode=require"
    )
    assert normalize_db_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    for bad in ("mysql://u:s3cret@h/db", "", "postgresql+psycopg2://u:s3cret@h/db"):
        with pytest.raises(StoreError) as e:
            normalize_db_url(bad)
        assert "s3cret" not in str(e.value)


def test_mask_url():
    assert mask_url("postgresql+psycopg://u:s3cret@h:5432/db") == "postgresql+psycopg://u:***@h:5432/db"
    assert "s3cret" not in mask_url("postgresql://u@h/db?password=s3cret&sslmode=require")
    assert mask_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert mask_url("/plain/path.db") == "/plain/path.db"
    assert "s3cret" not in mask_url("weird://u:s3cret@[bad")  # unparsable: still masked, no exception


def test_default_db_url(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    monkeypatch.delenv("AUTOTUNE_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_url() == f"sqlite:///{tmp_path / 'xdg' / 'autotune' / 'autotune.db'}"
    monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "home"))
    assert default_db_url() == f"sqlite:///{tmp_path / 'home' / 'autotune.db'}"
    monkeypatch.setenv("AUTOTUNE_DB", "postgresql://u@h/db")
    assert default_db_url() == "postgresql+psycopg://u@h/db"
    assert not (tmp_path / "home").exists() and not (tmp_path / "xdg").exists()


def test_default_dir_is_created_only_when_writing(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    monkeypatch.setenv("AUTOTUNE_HOME", str(tmp_path / "deep" / "home"))
    store = Store()
    assert store.url == f"sqlite:///{tmp_path / 'deep' / 'home' / 'autotune.db'}"
    assert not (tmp_path / "deep").exists()
    assert store.schema.upgrade()[0] is None
    assert (tmp_path / "deep" / "home" / "autotune.db").is_file()
    store.close()


# ---------------------------------------------------------------- keys and trials


def test_ensure_key_is_idempotent(store):
    k1 = ensure(store)
    assert ensure(store) == k1
    # the hostname is provenance, not identity: another node of the same kind shares the key
    assert ensure(store, env={**ENV, "hostname": "node2"}) == k1
    assert k1.env_hash == env_hash(ENV)
    assert k1.study_name == ensure(store).study_name
    assert k1.study_name.startswith("fp8_gemm|M=64,N=2112,K=7168|")
    others = [
        ensure(store, shape={"M": 128, "N": 2112, "K": 7168}),
        ensure(store, env={**ENV, "torch": "2.9.0"}),
        ensure(store, source="6" * 64),
        ensure(store, space="b" * 64),
        ensure(store, dtypes={"a": "bfloat16"}),
    ]
    assert len({k.id for k in [k1, *others]}) == 6
    assert len({k.study_name for k in [k1, *others]}) == 6
    assert len(store.history.key_states()) == 6


def test_ensure_key_concurrent(db_url):
    Store(db_url).schema.upgrade()
    n = 8
    barrier = threading.Barrier(n)
    results, errors = [], []

    def worker():
        store = Store(db_url)  # own engine, own connections: the race is in the database
        try:
            barrier.wait()
            results.append(ensure(store))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            store.close()

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert len(results) == n and len(set(results)) == 1
    with Store(db_url) as store:
        assert len(store.history.key_states()) == 1


def test_ensure_key_concurrent_processes(db_url):
    Store(db_url).schema.upgrade()
    code = (
        "import sys, time\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_store import Store, ensure\n"
        "s = Store(sys.argv[1])\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "print(ensure(s).id)\n"
    )
    start = str(time.time() + 3)
    procs = [run_py(code, db_url, start) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert len({o.strip() for o, _ in outs}) == 1
    with Store(db_url) as store:
        assert len(store.history.key_states()) == 1


def test_record_and_find_trial(store):
    key = ensure(store)
    cfg = {"BLOCK_M": 64, "BLOCK_N": 128, "stages": 3}
    assert store.trials.find(key.id, config_hash(cfg)) is None
    full = TrialResult(
        TrialStatus.OK,
        cfg,
        time_s=1.5e-5,
        mean_s=1.6e-5,
        min_s=1.4e-5,
        spread=0.02,
        launches=2.0,
        tflops=850.0,
        gbps=1200.0,
        compile_s=3.2,
        worker="w0",
        hostname="node1",
        kernels={"gemm_kernel": {"median_s": 7.5e-6, "launches": 2}},
    )
    t1 = store.trials.record(key.id, full, optuna_trial_number=0)
    assert store.trials.find(key.id, config_hash(cfg)) == full
    bad = {"BLOCK_M": 256, "BLOCK_N": 256, "stages": 5}
    wrong = TrialResult(TrialStatus.WRONG_RESULT, bad, time_s=1e-6, error="max abs diff 3.5 > atol")
    store.trials.record(key.id, wrong, optuna_trial_number=1)
    found = store.trials.find(key.id, config_hash(bad))
    assert found == wrong and found.status is TrialStatus.WRONG_RESULT and found.error == wrong.error
    # a second result of the same config (e.g. a re-verification): the newest wins in find_trial
    t3 = store.trials.record(key.id, full, optuna_trial_number=2)
    assert t3 > t1
    crashed = TrialResult(TrialStatus.CRASHED, cfg, error="worker died (SIGSEGV)")
    store.trials.record(key.id, crashed)
    assert store.trials.find(key.id, config_hash(cfg)) == crashed
    assert [t.status for t in store.trials.recorded(key.id)] == ["ok", "wrong_result", "ok", "crashed"]
    assert store.trials.counts(key.id) == {"ok": 2, "wrong_result": 1, "crashed": 1}
    assert store.trials.optuna_numbers(key.id) == [0, 1, 2]
    # another key does not see these
    assert store.trials.find(ensure(store, source="7" * 64).id, config_hash(cfg)) is None


def test_record_trial_bad_key_is_store_error(store):
    with pytest.raises(StoreError):
        store.trials.record(424242, ok({"a": 1}, 1.0))


def test_refresh_best_picks_fastest_ok_measured(store):
    key = ensure(store)
    assert store.trials.refresh_best(key.id) is None
    store.trials.record(key.id, TrialResult(TrialStatus.WRONG_RESULT, {"c": 0}, time_s=1e-6, error="wrong"))
    store.trials.record(key.id, ok({"c": 1}, 5e-6, measured=False))  # placeholder timing
    assert store.trials.refresh_best(key.id) is None and store.trials.best("fp8_gemm") == []
    store.trials.record(key.id, ok({"c": 2}, 3e-5))
    slow = store.trials.refresh_best(key.id)
    assert slow is not None and slow.config == {"c": 2}
    t_fast = store.trials.record(key.id, ok({"c": 3}, 2e-5))
    store.trials.record(key.id, TrialResult(TrialStatus.TIMEOUT, {"c": 4}, error="timed out"))
    best = store.trials.refresh_best(key.id)
    assert best is not None
    assert (best.config, best.time_s, best.trial_id) == ({"c": 3}, 2e-5, t_fast)
    assert best.updated_at >= slow.updated_at and best.updated_at.tzinfo is not None
    assert (best.kernel_name, best.shape_key, best.dims) == ("fp8_gemm", "M=64,N=2112,K=7168", SHAPE)
    assert best.dtypes == {"a": "float8_e4m3fn", "out": "bfloat16"}
    assert (best.device_name, best.cc, best.torch, best.triton) == ("NVIDIA H200", "9.0", "2.8.0", "3.6.0")
    assert (best.env_hash, best.source_hash, best.space_hash, best.key_id) == (
        key.env_hash,
        "5" * 64,
        "a" * 64,
        key.id,
    )
    assert store.trials.best("fp8_gemm") == [best]
    # unchanged best: the row is not rewritten
    assert store.trials.refresh_best(key.id) == best


def test_best_filters_and_order(store):
    h200 = ensure(store)
    m128 = ensure(store, shape={"M": 128, "N": 2112, "K": 7168})
    b200 = ensure(store, env={**ENV, "gpu_name": "NVIDIA B200", "cc": "10.0"})
    other = ensure(store, kernel="attention", shape={"S": 4096})
    for i, key in enumerate([h200, m128, b200, other]):
        store.trials.record(key.id, ok({"i": i}, 1e-5))
        store.trials.refresh_best(key.id)
        time.sleep(0.01)  # distinct updated_at
    assert [b.config["i"] for b in store.trials.best("fp8_gemm")] == [2, 1, 0]  # newest first
    assert [b.config["i"] for b in store.trials.best("fp8_gemm", shape_key="M=64,N=2112,K=7168")] == [2, 0]
    assert [b.config["i"] for b in store.trials.best("fp8_gemm", device_name="NVIDIA H200")] == [1, 0]
    assert [b.config["i"] for b in store.trials.best("fp8_gemm", "M=128,N=2112,K=7168", "NVIDIA H200")] == [1]
    assert store.trials.best("fp8_gemm", device_name="NVIDIA A100") == []
    assert store.trials.best("nope") == []


def test_summary(store):
    key = ensure(store)
    empty = ensure(store, shape={"M": 1, "N": 2, "K": 3})
    store.trials.record(key.id, ok({"c": 1}, 2e-5))
    store.trials.record(key.id, ok({"c": 2}, 1e-5))
    store.trials.record(key.id, TrialResult(TrialStatus.COMPILE_FAILED, {"c": 3}, error="ptxas"))
    store.trials.refresh_best(key.id)
    rows = {r.key_id: r for r in store.history.key_states()}
    row = rows[key.id]
    assert (row.kernel_name, row.shape_key, row.device_name, row.study_name) == (
        "fp8_gemm",
        "M=64,N=2112,K=7168",
        "NVIDIA H200",
        key.study_name,
    )
    assert row.source_hash == "5" * 64 and row.space_hash == "a" * 64 and row.env_hash == key.env_hash
    assert row.dtypes == {"a": "float8_e4m3fn", "out": "bfloat16"} and row.dtypes_key == key.dtypes_key
    assert row.dims == SHAPE and row.running == 0 and row.measured == 3 and row.best_trial_id is not None
    assert row.trials == 3 and row.counts == {"ok": 2, "compile_failed": 1}
    assert row.best_time_s == 1e-5 and row.best_tflops == pytest.approx(1e-4)
    assert rows[empty.id].trials == 0 and rows[empty.id].best_time_s is None
    assert [r.key_id for r in store.history.key_states(kernel_name="other")] == []


# ---------------------------------------------------------------- roles, records, opening


def test_store_is_exactly_its_roles_over_one_database(sqlite_url):
    from autotune.store import ROLES
    from autotune.store import protocols as p

    store = Store(sqlite_url)
    roles = {name: value for name, value in vars(store).items() if name != "db"}
    assert set(roles) == set(ROLES)
    assert all(role.db is store.db for role in roles.values()), "the roles share the store's one Database"
    assert store.trials.claims is store.claims  # a stored trial completes its claim through the claims role
    for name, protocol in {
        "trials": p.TrialStore,
        "claims": p.ClaimStore,
        "keys": p.KeyStore,
        "history": p.HistorySource,
        "requests": p.RequestStore,
        "verifications": p.VerificationStore,
        "schema": p.SchemaStore,
    }.items():
        assert isinstance(getattr(store, name), protocol), name
    for bundle in (p.StoreReader, p.SearchStore, p.PlanSource):
        assert isinstance(store, bundle), bundle.__name__
    # a role does only its own job: the history role is no TrialStore, the claims role no HistorySource
    assert not isinstance(store.history, p.TrialStore) and not isinstance(store.claims, p.HistorySource)


def test_consumers_take_anything_shaped_like_the_role(store):
    """``load_history`` is typed against ``HistorySource``: the store's role and a stand-in both serve."""
    from autotune.search.base import load_history
    from autotune.space.space import Space
    from autotune.store.protocols import HistorySource

    space = Space.from_dict({"name": "s", "params": {"c": [1, 2, 3]}})
    other = ensure(store, shape={"M": 1, "N": 2, "K": 3}, space=space.hash())
    store.trials.record(other.id, ok({"c": 2}, 3e-5))
    points = load_history(store.history, "fp8_gemm", space, ENV)
    assert [(pt.config, pt.time_s, pt.group) for pt in points] == [({"c": 2}, 3e-5, other.id)]

    class Canned:
        def key_states(self, kernel_name=None):
            return []

        def transfer(self, kernel_name, space_hash, env, exclude_key_id=None, params=None):
            return [(7, {"M": 8}, {"c": 1}, 1e-3, 0.5, "NVIDIA H100")]

    history = Canned()
    assert isinstance(history, HistorySource)
    (pt,) = load_history(history, "fp8_gemm", space, ENV)
    assert (pt.dims, pt.config, pt.time_s, pt.weight, pt.group, pt.device) == (
        {"M": 8},
        {"c": 1},
        1e-3,
        0.5,
        7,
        "NVIDIA H100",
    )


def test_best_row_is_the_record_mapped(store):
    """refresh_best writes the row the mapper derives from the BestRecord, field by field: a new
    BestRecord field needs a column of its name (this test says which), not an edit of the trials role."""
    from dataclasses import fields

    from sqlalchemy import select

    from autotune.records import BestRecord
    from autotune.store.models import BestConfigRow
    from autotune.store.rows import best_columns, best_record, from_db_time

    key = ensure(store)
    store.trials.record(key.id, ok({"c": 1}, 2e-5))
    store.trials.record(key.id, ok({"c": 2}, 1e-5, device="cuda:1"))
    record = store.trials.refresh_best(key.id)
    assert record is not None and record.config == {"c": 2} and record.dtypes == key_dtypes(key)
    columns = {c.key for c in BestConfigRow.__table__.columns} - {"id"}
    assert set(best_columns(record)) == columns
    unmapped = {f.name for f in fields(BestRecord)} - columns - {"dtypes"}
    assert not unmapped, f"BestRecord fields without a best_configs column: {unmapped}"
    with store.db.session() as s:
        row = s.scalars(select(BestConfigRow).where(BestConfigRow.key_id == key.id)).one()
        stored = {c: getattr(row, c) for c in columns}
        assert best_record(row) == record
    stored["updated_at"] = from_db_time(stored["updated_at"])
    assert stored == best_columns(record)
    assert best_record(BestConfigRow(**best_columns(record))) == record  # the mappers round-trip


def test_optuna_private_models_stay_in_the_study_writer():
    """Optuna's private table models (``optuna.storages._rdb``) are used by one file: an Optuna upgrade that
    moves them breaks only there (and that file falls back to Optuna's public ``add_trial``)."""
    users = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "autotune").rglob("*.py")
        if "optuna.storages._rdb" in p.read_text()
    )
    assert users == ["autotune/store/optuna_study.py"]


def key_dtypes(key) -> dict:
    import json

    return json.loads(key.dtypes_key)


def test_open_creates_or_checks(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    with pytest.raises(StoreError):
        Store.open(url, readonly=True)  # nothing there to read
    assert not (tmp_path / "new.db").exists()
    with Store.open(url, create=True, readonly=True) as later:  # left for the caller to create later
        assert later.schema.missing() and not (tmp_path / "new.db").exists()
    with Store.open(url, create=True) as store:
        current, head = store.schema.status()
        assert current == head and not store.schema.missing()
    with Store.open(url, readonly=True) as ro:
        assert ro.readonly and ro.history.key_states() == []
    from autotune.store import _version_table

    engine = create_engine(url)
    with engine.begin() as conn:  # an older revision is never migrated implicitly, even with create
        conn.execute(update(_version_table).values(version_num="0001"))
    engine.dispose()
    for create in (False, True):
        with pytest.raises(SchemaOutOfDateError, match="autotune db upgrade"):
            Store.open(url, create=create)


# ---------------------------------------------------------------- schema and errors


def test_schema_check_on_empty_db(db_url):
    store = Store(db_url)
    assert store.schema.status()[0] is None
    with pytest.raises(SchemaOutOfDateError) as e:
        store.schema.check()
    assert "no autotune schema" in str(e.value)
    assert f"autotune db upgrade --db {store.masked_url}" in str(e.value)
    # a store method on a database without tables says the same, not a raw SQL error
    with pytest.raises(SchemaOutOfDateError, match="autotune db upgrade"):
        store.trials.best("fp8_gemm")
    store.schema.upgrade()
    store.schema.check()
    store.close()


@pytest.mark.postgres
def test_errors_never_show_the_password(pg_url):
    # trust auth ignores the password, so this URL connects and the schema error is about a real database
    url = pg_url.replace("postgresql+psycopg://postgres@", "postgresql+psycopg://postgres:s3cret@")
    assert "s3cret" in url
    store = Store(url)
    assert store.url == url and "s3cret" not in store.masked_url and "***" in store.masked_url
    for call in (
        store.schema.check,
        lambda: store.trials.best("k"),
        lambda: store.trials.record(1, ok({}, 1.0)),
    ):
        with pytest.raises(SchemaOutOfDateError) as e:
            call()
        assert (
            "s3cret" not in str(e.value) and "***" in str(e.value) and "autotune db upgrade" in str(e.value)
        )
    assert "s3cret" not in repr(store)
    store.close()


def test_unreachable_server_fails_fast(closed_port):
    store = Store(f"postgresql://postgres:s3cret@127.0.0.1:{closed_port}/autotune")
    t0 = time.monotonic()
    for call in (store.schema.check, store.schema.upgrade, lambda: store.trials.best("k")):
        with pytest.raises(DatabaseUnreachableError) as e:
            call()
        assert "127.0.0.1" in str(e.value) and "s3cret" not in str(e.value)
    assert time.monotonic() - t0 < 10


def test_readonly_sqlite_missing_file_is_not_created(tmp_path):
    path = tmp_path / "sub" / "missing.db"
    store = Store(str(path), readonly=True)
    for call in (store.schema.check, lambda: store.trials.best("k")):
        with pytest.raises(DatabaseUnreachableError) as e:
            call()
        assert str(path) in str(e.value)
    assert not path.exists() and not path.parent.exists()


def test_readonly_store_reads_but_never_writes(sqlite_url):
    with Store(sqlite_url) as rw:
        rw.schema.upgrade()
        key = ensure(rw)
        rw.trials.record(key.id, ok({"c": 1}, 1e-5))
        rw.trials.refresh_best(key.id)
        ro = Store(sqlite_url, readonly=True)
        assert [b.config for b in ro.trials.best("fp8_gemm")] == [{"c": 1}]
        ro.schema.check()
        with pytest.raises(StoreError):
            ro.trials.record(key.id, ok({"c": 2}, 1e-5))
        with pytest.raises(StoreError):
            ro.schema.upgrade()
        ro.close()


@pytest.mark.postgres
def test_readonly_postgres_never_writes(pg_url):
    with Store(pg_url) as rw:
        rw.schema.upgrade()
        key = ensure(rw)
    with Store(pg_url, readonly=True) as ro:
        ro.schema.check()
        assert ro.trials.best("fp8_gemm") == []
        with pytest.raises(StoreError):
            ro.keys.ensure("k", "s", "p", {}, {"M": 1}, "M=1", {}, ENV)
        ro.db.engine.dispose()
    with Store(pg_url) as rw:
        assert len(rw.history.key_states()) == 1 and rw.history.key_states()[0].key_id == key.id


def test_upgrade_is_idempotent_and_keeps_data(db_url):
    store = Store(db_url)
    before, head = store.schema.upgrade()
    assert before is None and head
    key = ensure(store)
    store.trials.record(key.id, ok({"c": 1}, 1e-5))
    best = store.trials.refresh_best(key.id)
    assert store.schema.upgrade() == (head, head)
    assert Store(db_url).schema.upgrade() == (head, head)
    assert store.schema.status() == (head, head)
    assert store.trials.best("fp8_gemm") == [best] and len(store.trials.recorded(key.id)) == 1
    store.close()


def test_concurrent_upgrades(db_url):
    code = (
        "import sys, time\n"
        "import alembic.command, alembic.script\n"  # imported before the start line: the upgrades overlap
        "from autotune.store import Store\n"
        "s = Store(sys.argv[1])\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "print(s.schema.upgrade())\n"
    )
    start = str(time.time() + 3)
    procs = [run_py(code, db_url, start) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    store = Store(db_url)
    current, head = store.schema.status()
    assert current == head  # one row in the version table (several would read "a,b")
    assert sorted(o.strip() for o, _ in outs) == sorted([f"(None, '{head}')"] + [f"('{head}', '{head}')"] * 2)
    ensure(store)
    store.close()


def test_newer_database_is_refused(db_url):
    store = Store(db_url)
    store.schema.upgrade()
    engine = create_engine(store.url)
    from autotune.store import _version_table

    with engine.begin() as conn:
        conn.execute(update(_version_table).values(version_num="ffffffffffff"))
    engine.dispose()
    for call in (store.schema.check, store.schema.upgrade):
        with pytest.raises(StoreError, match="newer autotune") as e:
            call()
        assert not isinstance(e.value, SchemaOutOfDateError)
    assert store.schema.status()[0] == "ffffffffffff"
    store.close()


def test_version_table_name(store):
    from sqlalchemy import inspect

    ours = {t for t in inspect(store.db.engine).get_table_names() if t.startswith("autotune_")}
    assert VERSION_TABLE in ours and "autotune_trials" in ours


def test_reopen_makes_timeouts_and_crashes_measurable_again(store):
    from autotune.store import ClaimState, Owner

    key = ensure(store)
    failed = [
        TrialResult(TrialStatus.TIMEOUT, {"BLOCK_M": 64}, error="run did not finish within 10 s"),
        TrialResult(TrialStatus.CRASHED, {"BLOCK_M": 128}, error="illegal address: ..."),
    ]
    kept = [ok({"BLOCK_M": 32}, 1e-3), TrialResult(TrialStatus.COMPILE_FAILED, {"BLOCK_M": 16}, error="x")]
    store.trials.record_many(key.id, [(r, None, None) for r in failed + kept])
    assert store.trials.reopen(key.id) == 2
    # no longer the configs' evaluations: not found, not counted, claimable again (by one process)
    for r in failed:
        assert store.trials.find(key.id, config_hash(r.config)) is None
    assert store.trials.counts(key.id) == {"ok": 1, "compile_failed": 1}
    owner = Owner("node1", os.getpid(), "t")
    hashes = [config_hash(r.config) for r in failed + kept]
    claims = store.trials.claims.claim_many(key.id, hashes, owner, lease_s=30)
    states = [claims[h].state for h in hashes]
    assert states == [ClaimState.CLAIMED, ClaimState.CLAIMED, ClaimState.DONE, ClaimState.DONE]
    # kept as records; measured again, the config has its new result
    assert [r.status for r in store.trials.recorded(key.id, retimed=True)][:2] == [r.status for r in failed]
    store.trials.record(key.id, ok({"BLOCK_M": 64}, 2e-3))
    assert store.trials.find(key.id, config_hash({"BLOCK_M": 64})).status is TrialStatus.OK
    assert store.trials.reopen(key.id) == 0  # re-opened once already; the new ok is no failure
