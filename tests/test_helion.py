"""Helion kernels (autotune/kernel/helion.py, autotune/runtime/helion.py, examples/helion_*.py) on the CPU.

The kernel and drop-in cases (tests/interpreted/helion_cases.py) run in one pytest subprocess under
TRITON_INTERPRET=1: space derivation from Helion's ConfigSpec, validity, compile, correctness, the drop-in
(default, never Helion's autotuner, light import) and a miss tuned by a CPU `autotune serve` and picked up
by the running drop-in, then exported. The CLI cases run `autotune check` and a real `autotune search`."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from interpreted.runner import HERE, ROOT, case_names, check, interpreted_autotune, run_cases

pytestmark = [
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("helion") is None, reason="needs helion (the helion extra)"),
]

CASES = HERE / "helion_cases.py"
RMS = ROOT / "examples" / "helion_rms_norm.py"
MATMUL = ROOT / "examples" / "helion_matmul.py"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    return run_cases(CASES, tmp_path_factory.mktemp("helion_cases"), timeout=1800)


@pytest.mark.parametrize("name", case_names(CASES))
def test_helion(results: dict, name: str) -> None:
    check(results, name)


def autotune(*args: str) -> subprocess.CompletedProcess:
    return interpreted_autotune(*args, timeout=900)


@pytest.mark.parametrize(("path", "shape"), [(RMS, "M=32,N=64"), (MATMUL, "M=32,N=32,K=64")])
def test_cli_check_passes(path: Path, shape: str) -> None:
    proc = autotune("check", str(path), "--device", "cpu", "--shape", shape, "--no-time")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "default config is valid" in proc.stdout


def test_cli_space_shows_the_derived_space() -> None:
    proc = autotune("space", str(RMS), "--facts", "cpu", "--list", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "helion_rms_norm" in proc.stdout and "block_sizes_0=" in proc.stdout


def test_search_with_the_default_strategy_stores_a_helion_config_and_replays(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'helion.db'}"
    shape = ["--shape", "M=32,N=64"]
    out = tmp_path / "search.json"
    proc = autotune(
        "search",
        str(RMS),
        "--device",
        "cpu",
        *shape,
        "--trials",
        "4",
        "--num-tests",
        "2",
        "--db",
        db,
        "--retime-top",
        "0",
        "--json",
        str(out),
        "-q",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    best = autotune("best", "helion_rms_norm", "--db", db, *shape)
    assert best.returncode == 0, best.stderr
    assert "block_sizes_0" in best.stdout
    # replay runs on the Helion landscape the search left (a partial one: a search is not a sweep)
    land = tmp_path / "landscape.json"
    exported = autotune(
        "landscape", "export", "helion_rms_norm", "--shape", "M=32,N=64", "--db", db, "--out", str(land)
    )
    assert exported.returncode == 0, exported.stderr
    replay = autotune(
        "replay", str(land), "--strategy", "auto", "--seeds", "1", "--trials", "3", "--no-transfer"
    )
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert "helion_rms_norm" in replay.stdout


def test_a_nightly_job_tunes_then_verifies_a_helion_kernel_and_reports(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'nightly.db'}"
    job = tmp_path / "job.yaml"
    doc = {
        "name": "helion-cpu-nightly",
        "database": db,
        "devices": "cpu",
        "kernels": [{"file": str(RMS), "shapes": ["M=32,N=64"]}],
        "trials": 3,
        "seed": 0,
        "num_tests": 2,
        "verify": {"repeats": 5, "reference": False},
        "report": str(tmp_path / "report"),
    }
    job.write_text(json.dumps(doc))  # JSON is YAML
    first = autotune("nightly", str(job), "--json", str(tmp_path / "first.json"))
    assert first.returncode == 0, first.stderr[-3000:]
    assert [s["evaluations"] for s in json.loads((tmp_path / "first.json").read_text())["shapes"]] == [3]
    second = autotune("nightly", str(job), "--json", str(tmp_path / "second.json"))
    assert second.returncode == 0, second.stderr[-3000:]
    (v,) = json.loads((tmp_path / "second.json").read_text())["verifications"]
    assert len(v["samples_s"]) == 5 and v["status"] in ("ok", "regression", "improved")
    assert (tmp_path / "report" / "report.json").exists()
