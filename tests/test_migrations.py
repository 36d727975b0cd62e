"""The Alembic migrations: they build exactly the models' schema, coexist with Optuna's tables, round-trip,
and ship inside the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import inspect

from autotune.store import Store, migrations_dir
from autotune.store.models import VERSION_TABLE, Base, include_name

REPO = Path(__file__).resolve().parent.parent
ENV = {
    "device_kind": "cpu",
    "gpu_name": "CPU",
    "cc": "cpu",
    "sm_count": 2,
    "driver": "none",
    "cuda": "none",
    "torch": "2.8.0",
    "triton": "none",
}


def schema_diffs(store: Store) -> list:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with store.db.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE, "include_name": include_name, "compare_type": True}
        )
        return compare_metadata(ctx, Base.metadata)


def test_migrations_dir_in_a_checkout():
    assert migrations_dir() == REPO / "alembic"
    # an alembic/__init__.py would shadow the real alembic package when the repo root is on sys.path
    assert not (REPO / "alembic" / "__init__.py").exists()
    assert list((REPO / "alembic" / "versions").glob("*.py"))


def test_head_revision_read_from_the_files_is_alembics(tmp_path):
    """The schema check reads the head from the migration files without Alembic: the same head as Alembic's,
    and a database at head is checked (``Store.open``) without importing Alembic at all."""
    from alembic.script import ScriptDirectory

    from autotune.store.schema import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
    url = f"sqlite:///{tmp_path / 'h.db'}"
    Store.open(url, create=True).close()
    code = (
        "import sys; from autotune.store import Store; "
        f"Store.open({url!r}, readonly=True).close(); print('alembic' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False"


def test_migrated_schema_matches_models(db_url):
    store = Store(db_url)
    store.schema.upgrade()
    assert schema_diffs(store) == []
    ours = {t for t in inspect(store.db.engine).get_table_names() if t.startswith("autotune_")}
    assert ours == {t.name for t in Base.metadata.sorted_tables} | {VERSION_TABLE}
    store.close()


def test_downgrade_and_upgrade_again(db_url):
    from alembic import command

    from autotune.store import _alembic_config

    store = Store(db_url)
    store.schema.upgrade()
    with store.db.engine.begin() as conn:
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    ours = {t for t in inspect(store.db.engine).get_table_names() if t.startswith("autotune_")}
    assert ours <= {VERSION_TABLE}
    assert store.schema.status()[0] is None
    store.schema.upgrade()
    assert schema_diffs(store) == []
    store.close()


@pytest.mark.parametrize("optuna_first", [False, True], ids=["autotune-first", "optuna-first"])
def test_optuna_tables_coexist(db_url, optuna_first):
    import optuna

    def make_optuna_study():
        storage = optuna.storages.RDBStorage(db_url, engine_kwargs=Store(db_url).db.optuna_engine_kwargs())
        study = optuna.create_study(
            storage=storage, study_name="fp8_gemm|M=64", direction="minimize", load_if_exists=True
        )
        study.optimize(lambda t: t.suggest_int("x", 0, 10) ** 2, n_trials=2)
        storage.engine.dispose()

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if optuna_first:
        make_optuna_study()
    store = Store(db_url)
    assert store.schema.upgrade()[0] is None  # Optuna's alembic_version is not ours
    # our upgrade also set up Optuna's schema (at its head), so concurrent searches never race creating it
    storage = optuna.storages.RDBStorage(db_url)
    assert storage.get_current_version() == storage.get_head_version()
    storage.engine.dispose()
    if not optuna_first:
        make_optuna_study()
    tables = set(inspect(store.db.engine).get_table_names())
    assert {"alembic_version", VERSION_TABLE, "studies", "trials", "autotune_trials"} <= tables
    store.schema.check()
    assert schema_diffs(store) == []  # Optuna's tables are not ours to diff (include_name)
    key = store.keys.ensure("fp8_gemm", "s" * 64, "p" * 64, {}, {"M": 64}, "M=64", {}, ENV)
    assert store.keys.ensure("fp8_gemm", "s" * 64, "p" * 64, {}, {"M": 64}, "M=64", {}, ENV) == key
    storage = optuna.storages.RDBStorage(db_url)
    assert len(optuna.load_study(study_name="fp8_gemm|M=64", storage=storage).trials) == 2
    storage.engine.dispose()
    store.close()


@pytest.mark.slow
def test_wheel_ships_migrations(tmp_path):
    # build from a copy, so that the build neither depends on nor writes into the working tree
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "autotune", src / "autotune", ignore=ignore)
    shutil.copytree(REPO / "alembic", src / "alembic", ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", src)
    readme = REPO / "README.md"
    (src / "README.md").write_text(readme.read_text() if readme.exists() else "autotune\n")
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            "-q",
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("autotune-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "autotune/_migrations/env.py" in names
    assert "autotune/_migrations/script.py.mako" in names
    assert [n for n in names if n.startswith("autotune/_migrations/versions/") and n.endswith(".py")]
    assert not [n for n in names if n.startswith("alembic/")]  # nothing at top level to shadow alembic

    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # dependencies (sqlalchemy, alembic) from our venv's site-packages, never the repo; cwd outside the repo
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOTUNE_DB", "AUTOTUNE_HOME")}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    code = (
        "import autotune, autotune.store as s; from autotune.store import Store;"
        "print(autotune.__file__); print(s.migrations_dir()); print(Store('sqlite:///x.db').schema.upgrade())"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=run_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    pkg_file, mig_dir, result = out.stdout.strip().splitlines()
    assert (
        pkg_file.startswith(str(venv)) and mig_dir.startswith(str(venv)) and mig_dir.endswith("_migrations")
    )
    assert result.startswith("(None, '") and (run_dir / "x.db").is_file()


def test_upgrade_from_a_database_written_by_0001(tmp_path):
    """tests/data/db/autotune_0001.db was written by a real search with schema 0001 (wave 1): 0002 adds
    claims (backfilled as done for every evaluated config), keeps every row, and the result is the models'."""
    import sqlite3

    from autotune.errors import SchemaOutOfDateError
    from autotune.store import ClaimState, Owner
    from autotune.trial import config_hash

    db = tmp_path / "old.db"
    shutil.copy(REPO / "tests" / "data" / "db" / "autotune_0001.db", db)
    with sqlite3.connect(db) as conn:
        trials_before = conn.execute(
            "SELECT id, config, status, time_s FROM autotune_trials ORDER BY id"
        ).fetchall()
        best_before = conn.execute("SELECT key_id, trial_id, config FROM autotune_best_configs").fetchall()
    assert trials_before and best_before
    store = Store(f"sqlite:///{db}")
    with pytest.raises(SchemaOutOfDateError, match="autotune db upgrade"):
        store.schema.check()
    assert store.schema.upgrade() == ("0001", "0009")
    store.schema.check()
    assert schema_diffs(store) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute(
            "SELECT id, config, status, time_s FROM autotune_trials ORDER BY id"
        ).fetchall() == (trials_before)
        assert (
            conn.execute("SELECT key_id, trial_id, config FROM autotune_best_configs").fetchall()
            == best_before
        )
    key_id = store.history.key_states()[0].key_id
    stored = store.trials.recorded(key_id)
    # every evaluated config is claimed done: a search on the upgraded database never re-measures it
    for t in stored:
        claim = store.claims.claim(key_id, config_hash(t.config), Owner(), lease_s=30)
        assert claim.state is ClaimState.DONE
    assert store.trials.best("matmul_cpu")[0].trial_id == best_before[0][1]
    store.close()


def test_0003_adds_the_nightly_tables_and_keeps_every_row(db_url):
    """0002 -> 0003 (issue 10): three new tables, nothing else touched; and back."""
    from datetime import datetime, timezone

    from alembic import command
    from sqlalchemy import text

    from autotune.store import _alembic_config

    nightly = {"autotune_shape_requests", "autotune_verifications", "autotune_nightly_runs"}
    store = Store(db_url)

    def migrate(fn, rev: str) -> None:
        with store.db.engine.begin() as conn:
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            fn(cfg, rev)

    migrate(command.upgrade, "0002")
    assert not nightly & set(inspect(store.db.engine).get_table_names())
    # raw SQL: the models are at head, which may be past 0003
    with store.db.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO autotune_kernels (name, source_hash, created_at) VALUES ('k', 'a', :t)"),
            {"t": datetime.now(timezone.utc)},
        )

    def kernels() -> list:
        with store.db.engine.connect() as conn:
            return conn.execute(text("SELECT name, source_hash FROM autotune_kernels")).all()

    migrate(command.upgrade, "0003")
    assert nightly <= set(inspect(store.db.engine).get_table_names())
    assert kernels() == [("k", "a")]
    migrate(command.downgrade, "0002")
    assert not nightly & set(inspect(store.db.engine).get_table_names())
    assert kernels() == [("k", "a")]
    store.close()


# ---------------------------------------------------------------- downgrades (issue 21, row 10)

#: the tables of 0001, which every downgrade keeps (with their 0001 columns)
KEPT = (
    "autotune_environments",
    "autotune_kernels",
    "autotune_shapes",
    "autotune_tuning_keys",
    "autotune_trials",
    "autotune_best_configs",
)
OLD_DB = REPO / "tests" / "data" / "db" / "autotune_0001.db"


def alembic_cli(url: str, *args: str) -> None:
    """The developer's command (docs/database.md), run from the repository root with its alembic.ini."""
    proc = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"db={url}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def copy_0001_rows(store: Store) -> dict[str, list[str]]:
    """Copy the rows a real search wrote at 0001 (tests/data/db/autotune_0001.db) into ``store``'s 0001
    schema; returns each kept table's columns that every revision has."""
    from sqlalchemy import MetaData, create_engine, select

    src_engine = create_engine(f"sqlite:///{OLD_DB}")
    src, dst = MetaData(), MetaData()
    src.reflect(src_engine, only=KEPT)
    dst.reflect(store.db.engine, only=KEPT)
    with src_engine.connect() as s, store.db.engine.begin() as d:
        for table in src.sorted_tables:  # parents first
            rows = [dict(r) for r in s.execute(select(table)).mappings()]
            assert rows, table.name
            d.execute(dst.tables[table.name].insert(), rows)
    src_engine.dispose()
    return {t: [c.name for c in src.tables[t].columns if c.name != "reused_from"] for t in KEPT}


def kept_rows(store: Store, columns: dict[str, list[str]]) -> dict[str, list[tuple]]:
    from sqlalchemy import text

    with store.db.engine.connect() as conn:
        return {
            t: [tuple(r) for r in conn.execute(text(f"SELECT {', '.join(cols)} FROM {t} ORDER BY id"))]
            for t, cols in columns.items()
        }


def add_0003_rows(store: Store) -> None:
    """A verification, a request and a run: rows of the tables 0003 adds, referencing kept rows."""
    from datetime import datetime, timezone

    from sqlalchemy import text

    now = datetime.now(timezone.utc)
    with store.db.engine.begin() as conn:
        key_id, trial_id = conn.execute(text("SELECT key_id, trial_id FROM autotune_best_configs")).one()
        conn.execute(
            text(
                "INSERT INTO autotune_verifications (key_id, trial_id, run_id, kernel_name, shape_key, "
                "device_name, config, config_hash, samples_s, threshold, status, created_at) VALUES "
                "(:k, :t, 'r', 'matmul_cpu', 'M=64', 'cpu', '{}', 'h', '[]', 0.03, 'ok', :now)"
            ),
            {"k": key_id, "t": trial_id, "now": now},
        )
        conn.execute(
            text(
                "INSERT INTO autotune_shape_requests (kernel_name, shape_key, dims, dtypes_key, device_name, "
                "count, first_seen, last_seen) VALUES ('matmul_cpu', 'M=8', '{\"M\": 8}', '', 'cpu', 1, :now, :now)"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO autotune_nightly_runs (run_id, job_name, hostname, status, summary, started_at) "
                "VALUES ('r', 'j', 'h', 'done', '{}', :now)"
            ),
            {"now": now},
        )


def test_downgrade_to_each_revision_and_upgrade_again_keeps_the_data(db_url):
    """`alembic downgrade` 0006 -> 0005 -> 0004 -> 0003 -> 0002 -> 0001 with data (on SQLite it failed: "FOREIGN KEY
    constraint failed", batch mode dropped a table other rows reference), then upgraded back: the kept
    tables' rows are unchanged at every step, and the schema is the models' again."""
    from sqlalchemy import text

    store = Store(db_url)
    alembic_cli(db_url, "upgrade", "0001")
    columns = copy_0001_rows(store)
    alembic_cli(db_url, "upgrade", "head")
    add_0003_rows(store)
    before = kept_rows(store, columns)
    assert len(before["autotune_trials"]) == 4
    for rev, gone in [
        ("0006", set()),
        ("0005", {"autotune_services"}),
        ("0004", set()),
        ("0003", set()),
        ("0002", {"autotune_verifications", "autotune_shape_requests", "autotune_nightly_runs"}),
        ("0001", {"autotune_claims"}),
    ]:
        alembic_cli(db_url, "downgrade", rev)
        assert store.schema.status()[0] == rev
        assert not gone & set(inspect(store.db.engine).get_table_names())
        assert kept_rows(store, columns) == before, rev
    assert store.schema.upgrade() == ("0001", "0009")
    assert schema_diffs(store) == [] and kept_rows(store, columns) == before
    with store.db.engine.connect() as conn:  # 0002 backfilled a done claim per evaluated config again
        assert conn.execute(text("SELECT count(*) FROM autotune_claims WHERE status = 'done'")).scalar() == 4
    if store.db.is_sqlite:
        with store.db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() == []
    store.close()


def test_0005_inconclusive_verdicts_and_clock_columns_round_trip(db_url):
    """0005 allows the `inconclusive` verdict (and still refuses unknown ones), adds the clock columns;
    its downgrade stores an inconclusive verification as `failed` (0004's spelling of "no verdict")."""
    from sqlalchemy import text
    from sqlalchemy.exc import IntegrityError

    store = Store(db_url)
    alembic_cli(db_url, "upgrade", "0001")
    copy_0001_rows(store)
    alembic_cli(db_url, "upgrade", "head")
    add_0003_rows(store)
    with store.db.engine.begin() as conn:
        conn.execute(text("UPDATE autotune_verifications SET status = 'inconclusive', throttled = 2"))
        conn.execute(text("UPDATE autotune_trials SET clock_min_mhz = 1500, throttled = false"))
    with pytest.raises(IntegrityError), store.db.engine.begin() as conn:
        conn.execute(text("UPDATE autotune_verifications SET status = 'maybe'"))
    alembic_cli(db_url, "downgrade", "0004")
    with store.db.engine.connect() as conn:
        assert conn.execute(text("SELECT status FROM autotune_verifications")).scalars().all() == ["failed"]
    assert "clock_min_mhz" not in {c["name"] for c in inspect(store.db.engine).get_columns("autotune_trials")}
    alembic_cli(db_url, "upgrade", "head")
    assert schema_diffs(store) == []
    store.close()


def test_0008_keeps_one_request_per_version_and_its_downgrade_keeps_the_first(db_url):
    """Requests of two versions of one kernel and shape are two rows at 0008 (the unique key includes the
    hashes); the downgrade to 0007's key keeps the first of them, and the upgrade works again."""
    from autotune.store.models import ShapeRequestRow

    store = Store(db_url)
    try:
        store.schema.upgrade()
        first = store.services.enqueue("k", {"N": 8}, "N=8", "CPU", source_hash="v1")
        second = store.services.enqueue("k", {"N": 8}, "N=8", "CPU", source_hash="v2")
        assert first != second
        alembic_cli(db_url, "downgrade", "0007")
        store.close()
        with store.db.engine.connect() as conn:
            ids = [r[0] for r in conn.exec_driver_sql(f"SELECT id FROM {ShapeRequestRow.__tablename__}")]
        assert ids == [first]
        assert store.schema.upgrade() == ("0007", "0009")
        assert [r.source_hash for r in store.requests.recorded()] == [""]
        assert not schema_diffs(store)
    finally:
        store.close()
