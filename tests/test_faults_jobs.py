"""Hostile nightly inputs (issue 21): job files that are alias bombs, 5,000 levels deep, not UTF-8, with
duplicate keys or a seed out of range, each one line and exit 2; requests recorded in production that
cannot be tuned, skipped with a reason instead of stopping the job; kernel and shape names carrying HTML
into report.md.

The job-file cases run ``autotune nightly --dry-run`` in a subprocess bounded in time and memory (as
test_faults_space does: a hang or a blow-up fails the test instead of the machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.errors import AutotuneError, SettingsError
from autotune.jobs.nightly import load_job
from autotune.space.load import MAX_YAML_DEPTH, MAX_YAML_NODES
from tests.test_faults_space import TIMEOUT_S, _limit_memory, one_error_line

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "examples" / "matmul_cpu.py"
MAX_SEED = 2**32 - 1  # numpy's and Optuna's samplers take 0 .. 2**32 - 1


def nightly(job: Path, *args: str, db: Path | None = None) -> subprocess.CompletedProcess:
    """``autotune nightly JOB ARGS`` in a fresh interpreter, bounded in time and memory."""
    env = {**os.environ, "AUTOTUNE_DB": str(db or job.parent / "unused.db")}
    try:
        return subprocess.run(
            [sys.executable, "-m", "autotune", "nightly", str(job), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=TIMEOUT_S,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"autotune nightly {job} still running after {TIMEOUT_S} s (a hang)")


def job_text(**fields: str) -> str:
    """A valid job file's text (YAML, one field a line), with ``fields`` replaced or added verbatim."""
    lines = {
        "name": "hostile",
        "devices": "cpu",
        "strategy": "random",
        "evaluations": "2",
        "kernels": f"[{{file: {json.dumps(str(MATMUL))}, shapes: ['M=64,N=64,K=64']}}]",
    }
    lines.update(fields)
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


def write(tmp_path: Path, text: str | bytes, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_valid_job_file_loads(tmp_path):
    """The baseline the hostile files below differ from: it loads (nothing below fails for another reason)."""
    job = load_job(write(tmp_path, job_text(seed=str(MAX_SEED))))
    assert job.name == "hostile" and job.seed == MAX_SEED and job.kernels[0].file == MATMUL


# ---------------------------------------------------------------- row 3: an alias bomb in a job file

#: anchors under an unknown field, each a list of ten aliases of the one before: 10**9 leaves once expanded
BOMB = ["anchors:", '  - &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]'] + [
    f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)
]


@pytest.mark.parametrize(
    "field, use",
    [
        ("name", "*a8"),
        ("deadline", "*a8"),
        ("verify", "{repeats: *a8}"),
        ("requested", "{min_count: *a8}"),
        ("kernels", f"[{{file: {json.dumps(str(MATMUL))}, shapes: *a8}}]"),
    ],
)
def test_job_file_alias_bomb_is_one_line(tmp_path, field, use):
    """A 1 KB job file took 58 s and 3.9 GB with --dry-run (in some fields it did not finish in 60 s)."""
    path = write(tmp_path, "\n".join(BOMB) + "\n" + job_text(**{field: use}))
    assert path.stat().st_size < 1500
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert f"more than {MAX_YAML_NODES:,} nodes once aliases are expanded" in line, line


# ---------------------------------------------------------------- row 8: job files that were exit 3


@pytest.mark.parametrize("opener, closer", [("[", "]"), ("{a: ", "}")])
def test_5000_deep_job_file_is_one_line(tmp_path, opener, closer):
    """It was a RecursionError (exit 3)."""
    path = write(tmp_path, job_text(name=f"{opener * 5000}1{closer * 5000}"))
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in line and f"{path}:1:" in line, line


def test_job_file_not_utf8_is_one_line(tmp_path):
    path = write(tmp_path, job_text().encode() + b"report: caf\xe9\n")
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert "not UTF-8 text" in line, line


@pytest.mark.parametrize(
    "text, where",
    [
        (job_text() + "evaluations: 5\n", 6),  # the later value won, silently
        (job_text(verify="{repeats: 5, repeats: 50}"), 6),
        (
            job_text(
                kernels=f"[{{file: {json.dumps(str(MATMUL))}, shapes: [default], shapes: [requested]}}]"
            ),
            5,
        ),
    ],
)
def test_duplicate_key_in_job_file_is_one_line(tmp_path, text, where):
    path = write(tmp_path, text)
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert "duplicate key" in line and f"{path}:{where}:" in line, line
    with pytest.raises(SettingsError):
        load_job(path)


@pytest.mark.parametrize(
    "seed", [str(MAX_SEED + 1), str(2**64), "-1", str(10**400)], ids=["2**32", "2**64", "-1", "10**400"]
)
def test_seed_out_of_range_is_one_line(tmp_path, seed):
    """numpy's "Seed must be between 0 and 2**32 - 1" came out of the search as exit 3."""
    path = write(tmp_path, job_text(seed=seed))
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert "seed: must be" in line and len(line) < 200, line
    with pytest.raises(AutotuneError, match="seed: must be"):
        load_job(path)
