"""Run a ``*_cases.py`` file of this folder in a pytest subprocess under TRITON_INTERPRET=1 and report
each case's outcome, so the main test run can show one test per case."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def case_names(cases_file: Path) -> list[str]:
    """The test functions of a cases file (read without importing it: importing would import triton)."""
    tree = ast.parse(cases_file.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def run_cases(cases_file: Path, tmp_dir: Path, timeout: float = 900) -> dict[str, list[tuple[str, str]]]:
    """{test function: [(test id, "passed" | "skipped" | failure text)]} of one run of ``cases_file``."""
    report = tmp_dir / "report.xml"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            str(cases_file),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )
    if not report.exists():
        raise AssertionError(
            f"the interpreted run wrote no report:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    out: dict[str, list[tuple[str, str]]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = f"{child.get('message', '')}\n{child.text or ''}"[-4000:]
            elif child.tag == "skipped" and outcome == "passed":
                outcome = "skipped: " + (child.get("message") or "")
        out.setdefault(name.split("[")[0], []).append((name, outcome))
    if not out:
        raise AssertionError(
            f"the interpreted run ran no case:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return out


def check(results: dict[str, list[tuple[str, str]]], name: str) -> None:
    """Fail with the case's own failure text; skip when the case skipped."""
    import pytest

    runs = results.get(name)
    assert runs, f"{name} did not run in the interpreted subprocess"
    failed = [
        f"{test_id}: {outcome}"
        for test_id, outcome in runs
        if outcome not in ("passed",) and not outcome.startswith("skipped")
    ]
    assert not failed, "\n".join(failed)
    if all(outcome.startswith("skipped") for _, outcome in runs):
        pytest.skip(runs[0][1])


def interpreted_autotune(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m autotune ARGS`` from the repository root under TRITON_INTERPRET=1, with the caller's
    AUTOTUNE_DB left out (each test names its own database)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("AUTOTUNE_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )
