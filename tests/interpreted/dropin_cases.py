"""The drop-in's cases (autotune/triton_autotune.py), run by tests/test_triton_dropin.py in a pytest
process started under TRITON_INTERPRET=1 (Triton's interpreter must be on before triton is first
imported, so these cannot run in the main test process).

On the CPU, with examples/softmax.py's real kernel and a real SQLite database written by a real
`autotune search` of that file."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("run by tests/test_triton_dropin.py under TRITON_INTERPRET=1", allow_module_level=True)

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton", exc_type=ImportError)

from autotune.kernel.contract import _import_file  # noqa: E402
from autotune.runtime import lookup  # noqa: E402
from autotune.runtime.triton_autotune import DatabaseAutotuner, autotune  # noqa: E402
from autotune.space.triton import config_dict  # noqa: E402
from autotune.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "softmax.py"
TUNED = {"n_rows": 8, "n_cols": 300}
KEY = ["n_rows", "n_cols"]


def search(db: str, *, shape: dict[str, int] = TUNED, trials: int = 4) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("AUTOTUNE_DB", None)
    shape_arg = ",".join(f"{k}={v}" for k, v in shape.items())
    args = ["search", str(SOFTMAX), "--device", "cpu", "--shape", shape_arg, "--trials", str(trials)]
    args += ["--num-tests", "2", "--seed", "0", "--db", db]
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory) -> str:
    """A SQLite database in which a real `autotune search` tuned softmax for TUNED on this CPU."""
    url = f"sqlite:///{tmp_path_factory.mktemp('dropin') / 'tuned.db'}"
    search(url)
    return url


@pytest.fixture(scope="module")
def mod() -> Any:
    module = _import_file(SOFTMAX)
    assert type(module.softmax_kernel).__name__ == "InterpretedFunction"
    return module


@pytest.fixture(autouse=True)
def fresh_lookup(monkeypatch):
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    monkeypatch.delenv("AUTOTUNE_RECORD", raising=False)
    lookup.clear_cache()
    yield
    lookup.clear_cache()


def stored_best(url: str) -> dict[str, Any]:
    store = Store(url, readonly=True)
    try:
        (best,) = [b for b in store.trials.best("softmax") if b.dims == TUNED]
        return dict(best.config)
    finally:
        store.close()


def launch(tuned: Any, n_rows: int, n_cols: int, dtype: Any = None) -> None:
    rows, cols = n_rows, n_cols
    x = 3 * torch.randn(rows, cols, dtype=dtype or torch.float16)
    out = torch.empty_like(x)
    tuned[(rows,)](out, x, x.stride(0), out.stride(0), rows, cols)
    ref = torch.softmax(x.float(), dim=-1)
    assert torch.allclose(out.float(), ref, rtol=1e-2, atol=1e-3)


def dropin(mod: Any, **kw: Any) -> DatabaseAutotuner:
    return autotune(configs=mod.CONFIGS, key=KEY, **{"kernel": "softmax", **kw})(mod.softmax_kernel)


# ---------------------------------------------------------------- the database's answer


def test_tuned_shape_launches_the_stored_config(mod, tuned_db) -> None:
    tuned = dropin(mod, db=tuned_db)
    launch(tuned, **TUNED)
    assert tuned.last_source == "exact"
    assert config_dict(tuned.best_config) == stored_best(tuned_db)
    # the stored config is one of the listed ones: the listed triton.Config object itself is launched
    assert any(tuned.best_config is c for c in mod.CONFIGS)
    launch(tuned, **TUNED)  # later launches: the same answer from the in-process cache
    assert tuned.last_source == "exact" and config_dict(tuned.best_config) == stored_best(tuned_db)


def test_triton_fallback_never_benchmarks_a_tuned_shape(mod, tuned_db) -> None:
    tuned = dropin(mod, db=tuned_db, fallback="triton")
    launch(tuned, **TUNED)
    assert tuned.last_source == "exact" and tuned._triton is None  # Triton's autotuner never built


def test_untuned_shape_takes_the_nearest_tuned_one(mod, tuned_db) -> None:
    # best_config's rule: the nearest tuned shape's config beats the fallback
    tuned = dropin(mod, db=tuned_db)
    launch(tuned, 4, 40)
    assert tuned.last_source == "nearest" and config_dict(tuned.best_config) == stored_best(tuned_db)


def test_the_kernel_file_and_module_helpers_use_the_database(mod, tuned_db, monkeypatch) -> None:
    monkeypatch.setenv("AUTOTUNE_DB", tuned_db)
    fresh = _import_file(SOFTMAX)  # a new decorator instance, reading AUTOTUNE_DB
    x = torch.randn(TUNED["n_rows"], TUNED["n_cols"], dtype=torch.float16)
    y = fresh.softmax(x)
    assert torch.allclose(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    assert fresh.softmax_dropin.last_source == "exact"
    assert config_dict(fresh.softmax_dropin.best_config) == stored_best(tuned_db)


def test_autotune_print_says_each_key_s_choice_once(mod, tuned_db, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AUTOTUNE_PRINT", "1")
    tuned = dropin(mod, db=tuned_db)
    for _ in range(3):
        launch(tuned, **TUNED)
    launch(tuned, 4, 40)
    lines = capsys.readouterr().out.splitlines()
    config = ", ".join(f"{k}: {v}" for k, v in tuned._chosen[(8, 300)].kwargs.items())
    assert lines == [
        f"autotune: kernel softmax (n_rows=8, n_cols=300): {config} (tuned for this shape)",
        f"autotune: kernel softmax (n_rows=4, n_cols=40): {config} (tuned for the nearest shape "
        "n_rows=8,n_cols=300)",
    ]
    monkeypatch.delenv("AUTOTUNE_PRINT")
    quiet = dropin(mod, db=tuned_db)
    launch(quiet, **TUNED)
    assert capsys.readouterr().out == ""


def test_autotune_print_says_a_fallback(mod, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AUTOTUNE_PRINT", "1")
    tuned = dropin(mod, db=str(tmp_path / "empty.db"))
    launch(tuned, **TUNED)
    launch(tuned, **TUNED)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("autotune: kernel softmax (n_rows=8, n_cols=300): ") and line.endswith(
        "(not tuned: the first listed config)"
    )


# ---------------------------------------------------------------- fallbacks


def test_untuned_kernel_falls_back_to_the_first_config(mod, tuned_db) -> None:
    tuned = dropin(mod, db=tuned_db, kernel="softmax_never_tuned")
    launch(tuned, **TUNED)
    assert tuned.last_source == "first" and tuned.best_config is mod.CONFIGS[0]


def test_untuned_kernel_falls_back_to_the_given_default(mod, tuned_db) -> None:
    default = {"BLOCK_SIZE": 512, "num_warps": 2, "num_stages": 1}
    tuned = dropin(mod, db=tuned_db, kernel="softmax_never_tuned", default=default)
    assert tuned.fallback == "default"
    launch(tuned, 5, 1000)
    assert tuned.last_source == "default" and config_dict(tuned.best_config) == default
    given = triton.Config({"BLOCK_SIZE": 256}, num_warps=1, num_stages=2)
    tuned = dropin(mod, db=tuned_db, kernel="softmax_never_tuned", default=given, fallback="default")
    launch(tuned, 5, 1000)
    assert tuned.best_config is given


def test_untuned_kernel_falls_back_to_tritons_autotuning(mod, tuned_db) -> None:
    few = mod.CONFIGS[:3]
    tuned = autotune(configs=few, key=KEY, kernel="softmax_never_tuned", db=tuned_db, fallback="triton")(
        mod.softmax_kernel
    )
    launch(tuned, 3, 300)
    assert tuned.last_source == "triton"
    assert tuned.best_config in few and set(tuned._triton.configs_timings) == set(few)
    launch(tuned, 3, 300)  # Triton's own per-key cache: no second benchmark
    assert len(tuned._triton.cache) == 1


def test_a_key_that_is_not_an_integer_takes_the_fallback(mod, tuned_db) -> None:
    tuned = DatabaseAutotuner(
        mod.softmax_kernel,
        mod.softmax_kernel.arg_names,
        mod.CONFIGS,
        ["in_ptr"],
        kernel="softmax",
        db=tuned_db,
    )
    x = torch.randn(2, 64, dtype=torch.float16)
    out = torch.empty_like(x)
    tuned[(2,)](out, x, x.stride(0), out.stride(0), 2, 64)
    assert tuned.last_source == "first"


# ---------------------------------------------------------------- a database that cannot answer


def _garbage_db(tmp_path: Path) -> str:
    p = tmp_path / "garbage.db"
    p.write_bytes(b"this is not a database\x00" * 100)
    return str(p)


@pytest.mark.parametrize("what", ["missing-dir", "garbage-file", "empty-file", "unreachable-postgres"])
def test_broken_database_never_raises(mod, tmp_path, closed_port, caplog, what: str) -> None:
    db = {
        "missing-dir": lambda: str(tmp_path / "no" / "such" / "dir" / "x.db"),
        "garbage-file": lambda: _garbage_db(tmp_path),
        "empty-file": lambda: (tmp_path / "empty.db").touch() or str(tmp_path / "empty.db"),
        "unreachable-postgres": lambda: f"postgresql://u:secret@127.0.0.1:{closed_port}/db",
    }[what]()
    tuned = dropin(mod, db=db)
    launch(tuned, **TUNED)
    assert tuned.last_source == "first"
    launch(tuned, **TUNED)
    assert "secret" not in caplog.text


def test_locked_database_never_raises(mod, tuned_db, tmp_path) -> None:
    path = tmp_path / "locked.db"
    shutil.copy(tuned_db.removeprefix("sqlite:///"), path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("CREATE TABLE IF NOT EXISTS held (x)")
    try:
        tuned = dropin(mod, db=str(path))
        launch(tuned, **TUNED)
        assert tuned.last_source == "first"
    finally:
        holder.rollback()
        holder.close()


def test_a_miss_is_asked_again_and_later_rows_are_used(mod, tuned_db, tmp_path, monkeypatch) -> None:
    """A database tuned after the first launch (or one still loading then) is used once asked again."""
    import autotune.runtime.triton_autotune as dropin_mod

    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "0")
    path = tmp_path / "later.db"
    tuned = dropin(mod, db=str(path))
    launch(tuned, **TUNED)
    assert tuned.last_source == "first"
    shutil.copy(tuned_db.removeprefix("sqlite:///"), path)  # tuned meanwhile
    launch(tuned, **TUNED)
    assert tuned.last_source == "first"  # not asked again before RECHECK_S
    monkeypatch.setattr(dropin_mod, "RECHECK_S", 0.0)
    tuned._chosen.clear()  # the recheck time was set with the old RECHECK_S
    lookup.clear_cache()
    launch(tuned, **TUNED)
    assert tuned.last_source == "exact" and config_dict(tuned.best_config) == stored_best(tuned_db)


def test_a_nearest_answer_gives_way_to_a_later_exact_best_without_a_restart(
    mod, tuned_db, tmp_path, monkeypatch
) -> None:
    """A key served by the nearest tuned shape launches the config tuned for it once it exists (e.g. tuned
    by `autotune serve` from the recorded miss), in the same process and without clear_cache()."""
    import autotune.runtime.triton_autotune as dropin_mod

    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "0")
    monkeypatch.setattr(dropin_mod, "RECHECK_S", 0.0)
    shutil.copy(tuned_db.removeprefix("sqlite:///"), tmp_path / "later.db")
    url = f"sqlite:///{tmp_path / 'later.db'}"
    tuned = dropin(mod, db=url)
    launch(tuned, 4, 40)
    assert tuned.last_source == "nearest"
    search(url, shape={"n_rows": 4, "n_cols": 40}, trials=2)
    end = time.monotonic() + 120
    while tuned.last_source != "exact" and time.monotonic() < end:
        launch(tuned, 4, 40)  # the lookup re-reads in the background; the launch never waits for it
        time.sleep(0.05)
    assert tuned.last_source == "exact"


# ---------------------------------------------------------------- recording misses


def test_miss_is_recorded_when_recording_is_on(mod, tuned_db, tmp_path) -> None:
    from autotune.runtime import requests_log

    url = f"sqlite:///{tmp_path / 'rec.db'}"
    shutil.copy(tuned_db.removeprefix("sqlite:///"), tmp_path / "rec.db")
    tuned = dropin(mod, db=url, record=True)
    launch(tuned, 4, 40)  # untuned: served by the nearest shape, and recorded
    launch(tuned, **TUNED)  # tuned exactly: not recorded
    assert requests_log.flush() >= 1
    store = Store(url, readonly=True)
    try:
        seen = [(r.kernel_name, r.dims) for r in store.requests.recorded("softmax")]
    finally:
        store.close()
    assert seen == [("softmax", {"n_rows": 4, "n_cols": 40})]
    off = dropin(mod, db=url, record=False, kernel="softmax")
    lookup.clear_cache()
    launch(off, 6, 60)
    assert requests_log.flush() == 0


# ---------------------------------------------------------------- declaration errors


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"key": ["n_rowz"]}, "n_rowz not among"),
        ({"fallback": "fastest"}, "choose one of"),
        ({"fallback": "default"}, "needs default="),
        ({"kernel": ""}, "non-empty"),
    ],
)
def test_bad_declarations_fail_at_decoration(mod, kw: dict[str, Any], message: str) -> None:
    args = {"configs": mod.CONFIGS, "key": KEY, "kernel": "softmax", **kw}
    with pytest.raises(ValueError, match=message):
        autotune(**args)(mod.softmax_kernel)


def test_pre_hook_of_the_listed_config_runs(mod, tuned_db) -> None:
    calls: list[dict[str, Any]] = []
    best = stored_best(tuned_db)
    configs = [
        triton.Config(
            {k: v for k, v in config_dict(c).items() if k not in ("num_warps", "num_stages")},
            num_warps=c.num_warps,
            num_stages=c.num_stages,
            pre_hook=(lambda nargs: calls.append(nargs)) if config_dict(c) == best else None,
        )
        for c in mod.CONFIGS
    ]
    tuned = autotune(configs=configs, key=KEY, kernel="softmax", db=tuned_db)(mod.softmax_kernel)
    launch(tuned, **TUNED)
    assert len(calls) == 1 and calls[0]["n_cols"] == TUNED["n_cols"] and "BLOCK_SIZE" in calls[0]


def test_a_stored_config_that_does_not_fit_falls_back(mod, tmp_path, caplog) -> None:
    """A stored config the kernel rejects (here a block size its code refuses) is the fallback, not an error."""
    import json
    from datetime import datetime, timezone

    from autotune.env import current_device_name
    from autotune.records import EXPORT_FORMAT, EXPORT_VERSION, BestRecord

    stale = {"BLOCK_SIZE": 300, "num_warps": 4, "num_stages": 2}  # tl.arange needs a power of two
    record = BestRecord(
        "softmax", "n_rows=8,n_cols=300", dict(TUNED), {}, current_device_name("cpu"), "", "", "", "", "", "",
        stale, 1e-3, None, datetime.now(timezone.utc), 1, 1,
    )  # fmt: skip
    export = tmp_path / "best.json"
    records = [record.to_json()]
    export.write_text(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "records": records}))
    tuned = dropin(mod, db=str(export))
    launch(tuned, **TUNED)
    assert tuned.last_source == "first" and "failed to launch" in caplog.text
    launch(tuned, **TUNED)  # remembered: not tried again
    assert tuned.last_source == "first" and caplog.text.count("failed to launch") == 1


@pytest.mark.postgres
def test_tuned_in_postgres_launches_the_stored_config(mod, pg_url) -> None:
    search(pg_url)
    tuned = dropin(mod, db=pg_url)
    launch(tuned, **TUNED)
    assert tuned.last_source == "exact" and config_dict(tuned.best_config) == stored_best(pg_url)
