"""examples/softmax.py: a kernel file made with the TritonKernel helper from a triton.Config list.

The kernel and helper cases (tests/interpreted/softmax_cases.py) run in one pytest subprocess under
TRITON_INTERPRET=1 (see tests/interpreted/README.md); the CLI cases here run `autotune` itself under the
interpreter: `check` and a real `search` into SQLite, then `best` reads a listed config back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from interpreted.runner import HERE, ROOT, case_names, check, interpreted_autotune, run_cases

pytestmark = pytest.mark.triton

CASES = HERE / "softmax_cases.py"
SOFTMAX = ROOT / "examples" / "softmax.py"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    return run_cases(CASES, tmp_path_factory.mktemp("softmax_cases"))


@pytest.mark.parametrize("name", case_names(CASES))
def test_softmax(results: dict, name: str) -> None:
    check(results, name)


def autotune(*args: str) -> subprocess.CompletedProcess:
    return interpreted_autotune(*args, timeout=600)


def test_cli_check_passes() -> None:
    proc = autotune("check", str(SOFTMAX), "--device", "cpu", "--shape", "n_rows=4,n_cols=300", "--no-time")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_search_stores_a_listed_config(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'softmax.db'}"
    shape = ["--shape", "n_rows=4,n_cols=600"]
    proc = autotune(
        "search", str(SOFTMAX), "--device", "cpu", *shape, "--trials", "5", "--num-tests", "2", "--db", db
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    best = autotune("best", "softmax", "--db", db, *shape)
    assert best.returncode == 0, best.stderr
    rows = json.loads(best.stdout)
    row = rows[0] if isinstance(rows, list) else rows
    # the listed configs, read here (no launch: the interpreter is not needed to read a list)
    from autotune.kernel.contract import _import_file
    from autotune.space.triton import config_dict

    assert row["config"] in [config_dict(c) for c in _import_file(SOFTMAX).CONFIGS]
