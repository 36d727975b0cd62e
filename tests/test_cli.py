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
from autotune.cli.search import print_reports
from autotune.records import BestRecord
from autotune.trial import TrialResult, TrialStatus, fmt_config, fmt_time
from autotune.tuning.report import report_dict
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
        faults=Counter({"ok": 8, "timeout": 1}),
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
        "faults": dict(r.faults),  # added since: the statuses by type ("crashed (illegal address)")
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
        "history": {"measurements": r.history_points, "keys": r.history_keys, "needed": r.history_needed},
        "best_samples": r.best_samples,
        "best_spread": r.best_spread,
        "unreliable": r.unreliable,
        # why the search stopped (the stopping rule, --trials, --timeout): added with the stopping rule
        "stop_reason": r.stop_reason,
        "stop_bound": r.stop_bound,
        "stop_noise": r.stop_noise,
        # where the shape's seconds went: added with the H100 rate measurements
        "time_split": r.time_split,
        # every number a statistic (issue 43): the best's interval, the paired speed-up and its interval
        "best_interval": r.best_interval,
        "paired_speedup": r.paired_speedup,
        "speedup_interval": r.speedup_interval,
        "speedup_pairs": r.speedup_pairs,
        "speedup_significant": False,
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
            "needed": 0,
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
        # every number a statistic (issue 43): the median's interval, the paired speed-up over the default
        "ci_low_s": r.ci_low_s,
        "ci_high_s": r.ci_high_s,
        "speedup": r.speedup,
        "speedup_low": r.speedup_low,
        "speedup_high": r.speedup_high,
        "pairs": r.pairs,
    }
    assert best_dict(r) == expected
    assert json.loads(json.dumps(best_dict(r))) == expected


def test_the_table_flags_an_unreliable_best_and_a_finalist_measured_once(capsys, monkeypatch):
    from dataclasses import replace

    from autotune.cli.common import out

    monkeypatch.setattr(out, "width", 250)  # one line per row (a narrower table folds its cells)
    steady = _report()
    steady.finalists.append(Finalist({"BLOCK": 8}, 2e-5, 2e-5, None, 1))
    wild = replace(_report(), shape_key="M=128", best_samples=4, best_spread=6.1, unreliable=True)
    print_reports([steady, wild], "gemm")
    text = capsys.readouterr().out
    (steady_row,) = [line for line in text.splitlines() if "M=64 " in line and "BLOCK=64" in line]
    (wild_row,) = [line for line in text.splitlines() if "M=128 " in line and "BLOCK=64" in line]
    assert "unreliable" not in steady_row and "3.00x" in steady_row
    assert (
        "unreliable (spread ±610%)" in wild_row and "3.00x (unpaired single samples) (unreliable)" in wild_row
    )
    assert "20.00 us (one sample)" in text and "n=1" not in text


@pytest.mark.parametrize("width", [120, 160])
def test_a_long_config_folds_and_is_never_cut(capsys, monkeypatch, width):
    """Issue 43: the best config was cut (``BLOCK_M=128,BLOCK_N=512,BLOCK_…``) at 120 and 160 columns; it
    folds onto more lines, and the time carries its interval and samples, the speedup its interval."""
    from dataclasses import replace

    from autotune.cli.common import out

    monkeypatch.setattr(out, "width", width)
    config = {
        "BLOCK_M": 128,
        "BLOCK_N": 512,
        "BLOCK_K": 256,
        "GROUP_M": 8,
        "STAGES": 4,
        "WARPS": 8,
        "ORDER": "mn",
    }
    r = _report()
    r = replace(
        r,
        best=replace(r.best, config=config),
        best_samples=4,
        best_interval=(0.9e-5, 1.2e-5),
        paired_speedup=2.9,
        speedup_interval=(2.5, 3.3),
        speedup_pairs=3,
    )
    print_reports([r], "gemm")
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.count("│") > 5]
    assert "".join(cells[2].strip() for cells in rows) == fmt_config(config)
    assert "…" not in "".join("".join(cells) for cells in rows)
    time_cell = " ".join(cells[3].strip() for cells in rows)
    assert "10.00 us [9.00-12.00]" in time_cell and "n=4" in time_cell
    assert "2.90x [2.50-3.30]" in "".join(cells[5].strip() for cells in rows)


def test_times_are_printed_in_sensible_units():
    assert fmt_time(118.25) == "118.250 s"
    assert fmt_time(0.11825) == "118.250 ms"
    assert fmt_time(1.5) == "1.500 s"
    assert fmt_time(2.5e-6) == "2.50 us"
    assert fmt_time(None) == "-"


def test_every_command_is_mounted_in_the_order_help_lists_them():
    import typer

    group = typer.main.get_command(app)
    assert list(group.commands) == [
        "search",
        "best",
        "show",
        "trials",
        "export",
        "check",
        "space",
        "bench",
        "nightly",
        "report",
        "replay",
        "serve",
        "request",
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


def _commands(group, path=()):
    """(argv prefix, command) of every command of the app, groups included."""
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


#: options backed by a setting: the environment variable their help must name
_SETTING_OPTIONS = {
    "--trials": "AUTOTUNE_TRIALS",
    "--timeout": "AUTOTUNE_TIMEOUT",
    "--strategy": "AUTOTUNE_STRATEGY",
    "--seed": "AUTOTUNE_SEED",
    "--retime-top": "AUTOTUNE_RETIME_TOP",
    "--retime-rounds": "AUTOTUNE_RETIME_ROUNDS",
    "--db": "AUTOTUNE_DB",
    "--devices": "AUTOTUNE_DEVICES",
    "--num-tests": "AUTOTUNE_NUM_TESTS",
    "--compile-timeout": "AUTOTUNE_COMPILE_TIMEOUT",
    "--run-timeout": "AUTOTUNE_RUN_TIMEOUT",
    "--compile-workers": "AUTOTUNE_COMPILE_WORKERS",
}


def test_every_option_help_shows_its_env_var_and_default():
    """Rich markup swallowed "[env: AUTOTUNE_DB]": every option's help must reach the screen whole, and the
    options of a setting name its variable and default."""
    import typer
    from rich.text import Text

    from autotune.settings import ENV_VARS

    group = typer.main.get_command(app)
    seen = set()
    for argv, cmd in _commands(group):
        shown = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "400"})
        assert shown.exit_code == 0, shown.output
        for param in cmd.params:
            if getattr(param, "hidden", False):
                continue  # a deprecated alias (replay --evaluations): not listed
            help_text = Text.from_markup(getattr(param, "help", None) or "").plain
            assert help_text in shown.stdout, (argv, param.name, help_text)
            setting = next((_SETTING_OPTIONS[o] for o in param.opts if o in _SETTING_OPTIONS), None)
            if setting is not None and "search" in argv:
                assert f"[env: {setting}; default: " in shown.stdout.split(param.opts[0], 1)[1].split("\n")[0]
                assert setting in ENV_VARS
                seen.add(setting)
    assert seen == set(_SETTING_OPTIONS.values())


def _tuned_db(path: Path) -> str:
    """A SQLite database with one key of ``gemm`` (M,N,K): an ok trial and a timed-out one."""
    from autotune.store import Store

    db = str(path / "t.db")
    env = {"device_kind": "cpu", "gpu_name": "cpu-test", "cc": "cpu", "sm_count": 2, "driver": "none"}
    env |= {"cuda": "none", "torch": "2.8.0", "triton": "3.6.0"}
    with Store(db) as store:
        store.schema.upgrade()
        dims = {"M": 64, "N": 128, "K": 256}
        key = store.keys.ensure("gemm", "a" * 64, "s" * 64, {}, dims, "M=64,N=128,K=256", {"a": "bf16"}, env)
        store.trials.record(key.id, TrialResult(TrialStatus.OK, {"BLOCK": 64}, time_s=2e-5, tflops=1.5))
        store.trials.record(
            key.id, TrialResult(TrialStatus.TIMEOUT, {"BLOCK": 128}, error="Traceback\n[x] timeout=3 s")
        )
        store.trials.refresh_best(key.id)
    return db


def test_trials_lists_stored_trials_with_their_errors(tmp_path):
    db = _tuned_db(tmp_path)
    runner = CliRunner()
    table = runner.invoke(app, ["trials", "gemm", "--db", db], env={"COLUMNS": "300"})
    assert table.exit_code == 0, table.output
    assert "BLOCK=64" in table.stdout and "timeout" in table.stdout and "[x] timeout=3 s" in table.stdout
    js = runner.invoke(app, ["trials", "gemm", "--db", db, "--status", "timeout", "-f", "json"])
    (row,) = json.loads(js.stdout)
    assert row["status"] == "timeout" and row["config"] == {"BLOCK": 128} and "timeout=3 s" in row["error"]
    assert row["shape"] == "M=64,N=128,K=256"
    shaped = runner.invoke(app, ["trials", "gemm", "--db", db, "--shape", "K=256,M=64,N=128", "-f", "json"])
    assert len(json.loads(shaped.stdout)) == 2
    other = runner.invoke(app, ["trials", "gemm", "--db", db, "--shape", "M=1,N=128,K=256", "-f", "json"])
    assert json.loads(other.stdout) == []
    bad = runner.invoke(app, ["trials", "gemm", "--db", db, "--status", "timout"])
    assert bad.exit_code == 2 and "did you mean timeout?" in bad.stderr


def test_best_and_show_print_json_or_a_table(tmp_path):
    db = _tuned_db(tmp_path)
    runner = CliRunner()
    js = runner.invoke(app, ["best", "gemm", "--db", db])  # JSON stays the default for scripts
    (row,) = json.loads(js.stdout)
    assert row["config"] == {"BLOCK": 64} and row["time_s"] == 2e-5
    table = runner.invoke(app, ["best", "gemm", "--db", db, "-f", "table"], env={"COLUMNS": "300"})
    assert table.exit_code == 0 and "BLOCK=64" in table.stdout and "20.00 us" in table.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(table.stdout)
    shown = runner.invoke(app, ["show", "--db", db, "-f", "json"])
    (key,) = json.loads(shown.stdout)
    assert key["kernel_name"] == "gemm" and key["counts"] == {"ok": 1, "timeout": 1} and key["trials"] == 2
    assert "M=64,N=128,K=256" in runner.invoke(app, ["show", "--db", db], env={"COLUMNS": "300"}).stdout
    bad = runner.invoke(app, ["show", "--db", db, "-f", "yaml"])
    assert bad.exit_code == 2 and "choose json or table" in bad.stderr


def test_unknown_kernel_and_dimension_names_get_a_did_you_mean(tmp_path):
    db = _tuned_db(tmp_path)
    runner = CliRunner()
    for argv in (
        ["best", "gem"],
        ["trials", "gem"],
        ["export", "--out", str(tmp_path / "x.json"), "--kernel", "gem"],
    ):
        r = runner.invoke(app, [*argv, "--db", db])
        assert r.exit_code == 1 and "did you mean 'gemm'? (known kernels: gemm)" in r.stderr, r.stderr
    typo = runner.invoke(app, ["best", "gemm", "--db", db, "--shape", "M=64,N=128,KK=256"])
    assert typo.exit_code == 2 and "unknown KK (did you mean K?)" in typo.stderr, typo.stderr
    assert len(typo.stderr.strip().splitlines()) == 1


def test_version():
    r = CliRunner().invoke(app, ["--version"])
    from autotune import __version__

    assert r.exit_code == 0 and r.stdout.strip() == f"autotune {__version__}"


def test_bench_exits_non_zero_when_the_config_did_not_run_ok():
    faulty = str(ROOT / "tests" / "kernels" / "faulty.py")
    runner = CliRunner()
    argv = ["bench", faulty, "--device", "cpu", "--num-tests", "2", "--config"]
    bad = runner.invoke(app, [*argv, '{"MODE": "launch_error"}'], env={"COLUMNS": "300"})
    assert bad.exit_code == 2 and "launch_failed" in bad.stdout, bad.output
    assert "did not run ok on 1 of 1 shape(s) (launch_failed)" in bad.stderr
    good = runner.invoke(app, [*argv, '{"MODE": "ok"}'], env={"COLUMNS": "300"})
    assert good.exit_code == 0 and " ok " in good.stdout, good.output


def test_space_without_facts_uses_this_machines_device():
    import torch

    runner = CliRunner()
    here = runner.invoke(
        app, ["space", str(ROOT / "search_spaces" / "matmul_cpu.yaml")], env={"COLUMNS": "300"}
    )
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    assert here.exit_code == 0 and f"valid on {device};" in here.stdout, here.output
    h200 = runner.invoke(app, ["space", str(ROOT / "search_spaces" / "matmul_cpu.yaml"), "--facts", "h200"])
    assert h200.exit_code == 0 and "valid on h200;" in h200.stdout, h200.output


def test_replay_budget_is_trials_and_evaluations_a_deprecated_alias(tmp_path):
    land = str(ROOT / "data" / "landscapes" / "gemm_fp8_128x24576x1536.json")
    common = [land, "--strategy", "random", "--seeds", "1", "--depth", "2", "--no-transfer"]
    runner = CliRunner()
    new = runner.invoke(app, ["replay", *common, "--trials", "3", "--json", str(tmp_path / "new.json")])
    assert new.exit_code == 0 and "deprecated" not in new.stderr, new.output
    old = runner.invoke(app, ["replay", *common, "--evaluations", "3", "--json", str(tmp_path / "old.json")])
    assert old.exit_code == 0 and old.stderr.strip() == "warning: --evaluations is deprecated: use --trials"
    (run,) = json.loads((tmp_path / "old.json").read_text())
    assert len(run["best_after"]) == 3
    assert json.loads((tmp_path / "new.json").read_text())[0]["configs"] == run["configs"]
