"""autotune/triton_autotune.py: the @triton.autotune drop-in that reads the database.

The cases (tests/interpreted/dropin_cases.py) launch examples/softmax.py's real kernel in Triton's
interpreter against a real SQLite database written by a real `autotune search`; the interpreter must be
on before triton is first imported, so they run in one pytest subprocess under TRITON_INTERPRET=1 and
each case is reported here as one test."""

from __future__ import annotations

from pathlib import Path

import pytest
from interpreted.runner import HERE, case_names, check, run_cases

CASES = HERE / "dropin_cases.py"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    return run_cases(CASES, tmp_path_factory.mktemp("dropin_cases"))


@pytest.mark.triton
@pytest.mark.parametrize("name", case_names(CASES))
def test_dropin(results: dict, name: str) -> None:
    check(results, name)


def test_import_autotune_stays_light() -> None:
    """`import autotune` pulls no triton (the drop-in lives in its own module)."""
    import subprocess
    import sys

    code = "import sys, autotune; autotune.best_config; print(sorted(m for m in ('triton', 'torch') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1]
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
