"""bench/, the benchmark suite (issue 42): one driver that finds its benchmarks, each a module with
``main(argv) -> int`` that writes its JSON record under ``--out`` and prints a table last; no private names
of autotune imported; the folder stays small (no results trees)."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))

from bench.__main__ import benchmarks  # noqa: E402

NAMES = sorted(benchmarks())


def bench(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )


def test_the_driver_finds_every_module_but_its_helpers():
    modules = {p.stem for p in BENCH.glob("*.py")} - {"__init__", "__main__", "common"}
    assert set(NAMES) == modules
    assert len(NAMES) >= 10


def test_the_driver_lists_the_benchmarks_and_refuses_an_unknown_one():
    listed = bench()
    assert listed.returncode == 0
    assert all(f"  {name} " in listed.stdout for name in NAMES)
    unknown = bench("no_such_benchmark")
    assert unknown.returncode == 2
    assert "no benchmark 'no_such_benchmark'" in unknown.stderr


@pytest.mark.parametrize("name", NAMES)
def test_each_benchmark_has_main_and_a_help_page(name, capsys):
    import importlib

    module = importlib.import_module(f"bench.{name}")
    params = list(inspect.signature(module.main).parameters)
    assert params == ["argv"]
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"])
    assert stop.value.code == 0
    assert "--out" in capsys.readouterr().out


def _private_autotune_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autotune"):
            parts = node.module.split(".") + [a.name for a in node.names]
            found += [f"{node.module}.{a.name}" for a in node.names if any(p.startswith("_") for p in parts)]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("autotune") and "._" in a.name]
    return found


def test_no_benchmark_imports_a_private_name_of_autotune():
    bad = {p.name: _private_autotune_imports(p) for p in BENCH.glob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_the_scan_sees_a_private_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from autotune.runtime.lookup import _read_export\nimport autotune.store._x\n")
    assert _private_autotune_imports(probe) == ["autotune.runtime.lookup._read_export", "autotune.store._x"]


def test_the_suite_stays_small():
    files = [p for p in BENCH.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) <= 40
    assert sum(p.stat().st_size for p in files) <= 3 * 2**20


def test_a_benchmark_writes_its_record_and_prints_its_table_last(tmp_path):
    """lookup_overhead against a database with no tuned row: a real run of the driver (the default answers)."""
    env = dict(os.environ, OUT=str(tmp_path / "out"), AUTOTUNE_COMMIT="abc1234")
    proc = bench("lookup_overhead", "--db", str(tmp_path / "empty.db"), "--n", "50", env=env)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "out" / "lookup_overhead" / "lookup_overhead.json").read_text())
    assert record["benchmark"] == "lookup_overhead"
    assert record["commit"] == "abc1234"
    assert record["command"].startswith("python -m bench lookup_overhead --db ")
    assert {"machine", "date", "results"} <= set(record)
    assert record["results"]["hit_us"] > 0
    last = proc.stdout.strip().splitlines()
    assert last[0].startswith("lookup_overhead on ")
    assert last[-1].startswith("cache hit, untuned shape (us)")
