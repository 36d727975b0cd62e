"""The command line under bad input (issue 21): every output path that cannot be written (a missing
folder, a directory) is one line and exit 2, checked before the work it would hold, with no temporary file
left behind; an age for --since that overflows; a --from-triton file that exits or hangs at import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_faults_engine import one_error_line

ROOT = Path(__file__).resolve().parents[1]
MATMUL = ROOT / "examples" / "matmul_cpu.py"


def autotune(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *map(str, args)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=timeout,
    )  # fmt: skip


def configs_file(tmp_path: Path) -> Path:
    f = tmp_path / "configs.py"
    f.write_text("CONFIGS = [{'BLOCK': 32, 'num_warps': 4, 'num_stages': 2}]\n")
    return f


def nightly_job(tmp_path: Path) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: out\ndevices: cpu\ndatabase: {tmp_path / 'n.db'}\nkernels:\n  - file: {MATMUL}\n"
        "    shapes: ['M=64,N=64,K=64']\nstrategy: random\ntrials: 2\nseed: 0\n"
    )
    return job


def _bad_targets(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "a_folder.json"
    folder.mkdir()
    return {"missing folder": tmp_path / "no" / "such" / "out.json", "directory": folder}


COMMANDS = {
    "export": lambda t, out: ["export", "--out", out, "--db", t / "e.db"],
    "export triton": lambda t, out: ["export", "--format", "triton", "--out", out, "--db", t / "e.db"],
    "search --json": lambda t, out: [
        "search",
        MATMUL,
        "--device",
        "cpu",
        "--trials",
        "1",
        "--db",
        t / "s.db",
        "--json",
        out,
    ],  # fmt: skip
    "nightly --json": lambda t, out: ["nightly", nightly_job(t), "--json", out],
    "space --out": lambda t, out: ["space", "--from-triton", f"{configs_file(t)}:CONFIGS", "--out", out],
    "landscape export": lambda t, out: [
        "landscape",
        "export",
        "k",
        "--shape",
        "N=1",
        "--out",
        out,
        "--db",
        t / "l.db",
    ],
}


@pytest.mark.parametrize("target", ["missing folder", "directory"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unwritable_output_is_one_line_and_leaves_nothing(tmp_path, command, target):
    out = _bad_targets(tmp_path)[target]
    if command == "export triton":
        out = out.with_suffix(".py") if target == "missing folder" else out
    line = one_error_line(autotune(*COMMANDS[command](tmp_path, out)))
    assert str(out) in line and "cannot write" in line, line
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "n.db").exists(), "refused after the work"


def test_report_onto_a_directory_is_one_line_and_leaves_no_tmp(tmp_path):
    from autotune.store import Store

    db = tmp_path / "r.db"
    Store.open(str(db), create=True).close()
    out = tmp_path / "report"
    (out / "report.md").mkdir(parents=True)
    pytest.importorskip("plotly")
    line = one_error_line(autotune("report", "--out", out, "--db", db))
    assert "report.md" in line and "directory" in line
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("age", ["99999999999d", "9999999999999999999999h"])
def test_since_with_an_overflowing_age_is_one_line(tmp_path, age):
    line = one_error_line(
        autotune("report", "--out", tmp_path / "r", "--since", age, "--db", tmp_path / "x.db")
    )
    assert "--since" in line


def test_space_from_triton_on_a_file_that_exits_at_import(tmp_path):
    f = tmp_path / "exits.py"
    f.write_text("import os\nos._exit(7)\nCONFIGS = []\n")
    line = one_error_line(autotune("space", "--from-triton", f"{f}:CONFIGS"))
    assert str(f) in line and "exited with code 7" in line


def test_space_from_triton_on_a_file_that_hangs_at_import(tmp_path):
    f = tmp_path / "hangs.py"
    f.write_text("import time\ntime.sleep(3600)\nCONFIGS = []\n")
    proc = autotune("space", "--from-triton", f"{f}:CONFIGS", env={"AUTOTUNE_START_TIMEOUT": "3"})
    line = one_error_line(proc)
    assert "did not finish within 3 s" in line and "AUTOTUNE_START_TIMEOUT" in line


def test_space_from_triton_still_reads_a_list_and_reports_its_errors(tmp_path):
    ok = autotune("space", "--from-triton", f"{configs_file(tmp_path)}:CONFIGS")
    assert ok.returncode == 0 and "BLOCK" in ok.stdout, ok.stderr
    line = one_error_line(autotune("space", "--from-triton", f"{configs_file(tmp_path)}:NOPE"))
    assert "defines no 'NOPE'" in line


def _landscape(tmp_path: Path, configs: list, name: str = "land.json") -> Path:
    import json

    from autotune.engine.simulated import FORMAT, VERSION

    doc = {
        "format": FORMAT, "version": VERSION, "kernel": "k", "device_name": "cpu", "shape": {"N": 1},
        "space": {"name": "k", "params": {"B": [1, 2, 3]}}, "configs": configs,
    }  # fmt: skip
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _ok(b: int, t: object) -> dict:
    return {"config": {"B": b}, "status": "ok", "time_s": t}


@pytest.mark.parametrize(
    "configs, why",
    [
        ([_ok(1, 0), _ok(2, 2e-5)], "time_s > 0"),
        ([_ok(1, "fast"), _ok(2, 2e-5)], "time_s > 0"),
        ([_ok(1, -1e-5), _ok(2, 2e-5)], "time_s > 0"),
        ([_ok(1, float("nan")), _ok(2, 2e-5)], "time_s > 0"),
        ([{"config": {"B": 1}, "status": "ok"}, _ok(2, 2e-5)], "time_s > 0"),
        ([], "empty"),
        ([{"config": {"B": 1}, "status": "timeout", "time_s": None}], "no ok config"),
    ],
    ids=["zero", "fast", "negative", "nan", "missing", "empty", "no-ok"],
)
def test_replay_of_a_landscape_with_bad_times_is_one_line(tmp_path, configs, why):
    """Before: 0 and "fast" were internal errors (exit 3), the rest regret tables of nan or -100 %."""
    land = _landscape(tmp_path, configs)
    line = one_error_line(autotune("replay", land, "--strategy", "random", "--trials", "2", "--seeds", "1"))
    assert str(land) in line and why in line, line


def test_replay_of_a_good_landscape_still_runs(tmp_path):
    land = _landscape(tmp_path, [_ok(1, 3e-5), _ok(2, 2e-5), {"config": {"B": 3}, "status": "timeout"}])
    proc = autotune("replay", land, "--strategy", "random", "--trials", "2", "--seeds", "1")
    assert proc.returncode == 0, proc.stderr
    assert "nan" not in proc.stdout and "-100" not in proc.stdout


#: a command of ours that meets a broken pipe (as a search did when multiprocessing's resource tracker never
#: started: typer's handler for `| head` exited 1 without a word)
BROKEN_PIPE_SCRIPT = """
import sys
import autotune.cli as cli

@cli.app.command("boom")
def boom() -> None:
    raise BrokenPipeError(32, "Broken pipe")

sys.argv = ["autotune", "boom"]
cli.main()
"""


def test_a_broken_pipe_of_ours_is_an_internal_error_and_a_closed_stdout_stays_quiet():
    def run(stdout):
        return subprocess.run(
            [sys.executable, "-c", BROKEN_PIPE_SCRIPT],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )

    ours = run(subprocess.PIPE)
    assert ours.returncode == 3 and "internal error" in ours.stderr, ours.stderr
    assert "a pipe to a child process broke" in ours.stderr
    read, write = os.pipe()
    os.close(read)  # `autotune trials | head` after head exited
    try:
        quiet = run(write)
    finally:
        os.close(write)
    assert quiet.returncode == 1 and quiet.stderr == "", quiet.stderr
