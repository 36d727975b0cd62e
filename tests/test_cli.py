"""The command line as a package (autotune/cli/): records printed as JSON are derived from their dataclasses,
every command keeps its name, settings are checked at start-up, and the error edge is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.cli.inspect import best_dict
from autotune.cli.search import report_dict
from autotune.records import BestRecord
from autotune.trial import TrialResult, TrialStatus
from autotune.tuning.tuner import Finalist, ShapeReport

ROOT = Path(__file__).resolve().parents[1]


def _report() -> ShapeReport:
    best = TrialResult(TrialStatus.OK, {"BLOCK": 64}, time_s=1e-5, spread=0.01, device="cpu")
    default = TrialResult(TrialStatus.OK, {"BLOCK": 16}, time_s=3e-5, device="cpu")
    return ShapeReport(
        shape={"M": 64},
        shape_key="M=64",
        study_name="gemm-abc",
        best=best,
        default=default,
        evaluations=9,
        reused=2,
        invalid=1,
        statuses=Counter({"ok": 8, "timeout": 1}),
        total_statuses={"ok": 10, "timeout": 1},
        valid_configs=120,
        exhaustive=False,
        budget=10,
        wall_s=3.5,
        busy=1,
        loop_s_per_trial=0.002,
        device_gap_s=(0.001, 0.004),
        devices=("cpu",),
        strategy="auto",
        finalists=[
            Finalist({"BLOCK": 64}, 1.1e-5, 1e-5, 0.01, 4),
            Finalist({"BLOCK": 32}, 1e-5, 1.05e-5, 0.1, 4),
        ],
        history_points=30,
        history_keys=2,
    )


def test_search_json_has_every_report_field_as_before():
    r = _report()
    expected = {  # the hand-written mapping search --json had before it was derived from ShapeReport
        "shape": r.shape,
        "study": r.study_name,
        "evaluations": r.evaluations,
        "reused": r.reused,
        "invalid": r.invalid,
        "statuses": dict(r.statuses),
        "total_statuses": r.total_statuses,
        "valid_configs": r.valid_configs,
        "exhaustive": r.exhaustive,
        "wall_s": r.wall_s,
        "busy": r.busy,
        "budget": r.budget,
        "devices": list(r.devices),
        "loop_s_per_trial": r.loop_s_per_trial,
        "device_gap_s": list(r.device_gap_s),
        "best": r.best.to_dict(),
        "default": r.default.to_dict(),
        "speedup": r.speedup,
        "strategy": r.strategy,
        "finalists": [f.__dict__ for f in r.finalists],
        "finalists_within_noise": r.within_noise,
        "history": {"measurements": r.history_points, "keys": r.history_keys},
        # why the search stopped (the stopping rule, --trials, --timeout): added with the stopping rule
        "stop_reason": r.stop_reason,
        "stop_bound": r.stop_bound,
        "stop_noise": r.stop_noise,
    }
    got = json.loads(json.dumps(report_dict(r), default=str))
    assert got == json.loads(json.dumps(expected, default=str))
    assert got["speedup"] == pytest.approx(3.0) and got["finalists_within_noise"] is True
    empty = report_dict(ShapeReport({"M": 1}, "M=1", "s", None, None, 0, 0, 0))
    assert (
        empty["best"] is None
        and empty["device_gap_s"] is None
        and empty["history"]
        == {
            "measurements": 0,
            "keys": 0,
        }
    )


def test_a_new_record_field_needs_no_cli_edit():
    @dataclass
    class Wider(ShapeReport):
        occupancy: float = 0.75

    base = _report()
    wider = Wider(**{k: v for k, v in base.__dict__.items()})
    assert report_dict(wider) == {**report_dict(base), "occupancy": 0.75}


def _best() -> BestRecord:
    return BestRecord(
        kernel_name="gemm",
        shape_key="M=64",
        dims={"M": 64},
        dtypes={"a": "bfloat16"},
        device_name="NVIDIA H200",
        cc="9.0",
        env_hash="e" * 32,
        torch="2.8.0",
        triton="3.6.0",
        source_hash="a" * 64,
        space_hash="s" * 64,
        config={"BLOCK": 64},
        time_s=1e-5,
        tflops=12.5,
        updated_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        key_id=7,
        trial_id=42,
        samples=4,
        spread=0.02,
    )


def test_best_json_has_every_record_field_as_before():
    r = _best()
    expected = {  # the hand-written mapping `autotune best` had before it was derived from BestRecord
        "kernel": r.kernel_name,
        "shape": r.dims,
        "dtypes": r.dtypes,
        "device": r.device_name,
        "cc": r.cc,
        "config": r.config,
        "time_s": r.time_s,
        "samples": r.samples,
        "spread": r.spread,
        "tflops": r.tflops,
        "torch": r.torch,
        "triton": r.triton,
        "source_hash": r.source_hash,
        "space_hash": r.space_hash,
        "env_hash": r.env_hash,
        "updated_at": str(r.updated_at),
    }
    assert best_dict(r) == expected
    assert json.loads(json.dumps(best_dict(r))) == expected


def test_every_command_is_mounted_in_the_order_help_lists_them():
    import typer

    group = typer.main.get_command(app)
    assert list(group.commands) == [
        "search",
        "best",
        "show",
        "export",
        "check",
        "space",
        "bench",
        "nightly",
        "report",
        "replay",
        "db",
        "landscape",
    ]
    assert list(group.commands["db"].commands) == ["upgrade", "check"]
    assert list(group.commands["landscape"].commands) == ["export"]
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "nightly" in result.stdout


def test_domain_errors_are_one_line_with_their_exit_code(tmp_path):
    runner = CliRunner()
    db = str(tmp_path / "x.db")
    assert runner.invoke(app, ["db", "upgrade", "--db", db]).exit_code == 0
    missing = runner.invoke(app, ["best", "gemm", "--db", db])  # NotFoundError: exit 1
    assert (
        missing.exit_code == 1
        and missing.stderr.strip() == f"error: no tuned config of 'gemm' in sqlite:///{db}"
    )
    bad = runner.invoke(app, ["export", "--out", str(tmp_path / "x.txt"), "--db", db])  # SettingsError: 2
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1 and ".json" in bad.stderr
    assert runner.invoke(app, ["db", "check", "--db", db]).exit_code == 0


def test_a_bad_strategy_in_the_environment_stops_any_command_at_start_up(tmp_path):
    env = {**os.environ, "AUTOTUNE_STRATEGY": "annealing"}
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "show", "--db", str(tmp_path / "s.db")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "unknown strategy 'annealing'" in lines[0], (
        proc.stderr
    )
    assert not (tmp_path / "s.db").exists()
