"""`autotune search` end to end on the CPU: real worker processes, real Optuna studies, real databases."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.runtime import lookup
from autotune.store import Store
from autotune.trial import TrialStatus, config_hash
from tests.conftest import expected_best

ROOT = Path(__file__).resolve().parents[1]
MATMUL = str(ROOT / "examples" / "matmul_cpu.py")
FAULTY = str(ROOT / "tests" / "kernels" / "faulty.py")
SMALL = "M=64,N=64,K=64"


def autotune(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"autotune {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def only_key(store: Store):
    rows = store.history.key_states()
    assert len(rows) == 1, rows
    return rows[0]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request):
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def _all_trials(url: str):
    store = Store(url)
    out = []
    for r in store.history.key_states():
        out += store.trials.recorded(r.key_id)
    return store, out


def test_search_store_best_and_lookup(url):
    autotune(
        "search",
        MATMUL,
        "--device",
        "cpu",
        "--shape",
        SMALL,
        "--trials",
        "5",
        "--num-tests",
        "3",
        "--seed",
        "0",
        "--db",
        url,
    )
    store, trials = _all_trials(url)
    ok = [t for t in trials if t.status is TrialStatus.OK]
    measured = [t for t in trials if t.status is not TrialStatus.INVALID]
    assert len(measured) == 5 and ok
    # the default config is always evaluated (the speedup baseline)
    assert any(t.config == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "ORDER": "mn"} for t in measured)
    # the 3 fastest were re-timed in 3 interleaved rounds; the best is the lowest median of its 4 samples
    samples: dict[str, list[float]] = {}
    for t in store.trials.recorded(store.history.key_states()[0].key_id, retimed=True):
        if t.status is TrialStatus.OK:
            samples.setdefault(json.dumps(t.config, sort_keys=True), []).append(t.time_s)
    assert sorted(len(v) for v in samples.values())[-3:] == [4, 4, 4]
    # the 2 configs measured once ranked below the finalists, so they cannot outrank them
    want_hash, want_median, want_samples = expected_best(store, store.history.key_states()[0].key_id)
    assert want_samples == 4

    shown = json.loads(autotune("best", "matmul_cpu", "--shape", "K=64,N=64,M=64", "--db", url).stdout)
    assert shown["time_s"] == pytest.approx(want_median)
    assert config_hash(shown["config"]) == want_hash and shown["samples"] == 4

    lookup.clear_cache()
    assert lookup.best_config("matmul_cpu", M=64, N=64, K=64, db=url, device="cpu") == shown["config"]
    # a shape never tuned falls back to the nearest tuned one
    assert lookup.best_config("matmul_cpu", M=80, N=64, K=64, db=url, device="cpu") == shown["config"]

    show = autotune("show", "--db", url).stdout
    assert "matmul_cpu" in show and "M=64,N=64,K=64" in show


def test_resume_measures_nothing_twice(sqlite_url):
    common = ["search", MATMUL, "--device", "cpu", "--shape", SMALL, "--num-tests", "3", "--db", sqlite_url]
    autotune(*common, "--trials", "4", "--seed", "1")
    autotune(*common, "--trials", "4", "--seed", "2")
    store, trials = _all_trials(sqlite_url)
    measured = [t for t in trials if t.status is not TrialStatus.INVALID]
    assert len(measured) == 8
    hashes = [config_hash(t.config) for t in measured]
    assert len(set(hashes)) == len(hashes), "a config was measured twice"
    # one study, resumed: Optuna holds at least the first run's trials (a search does not wait for a study
    # writer still starting: on a loaded machine its own trials reach the study in the next run)
    import optuna

    study = optuna.load_study(study_name=only_key(store).study_name, storage=sqlite_url)
    assert len(study.trials) >= 4


def test_a_config_far_over_the_best_so_far_is_timed_with_fewer_calls_and_the_best_with_all(sqlite_url):
    """Racing (AUTOTUNE_RACE x the best so far, after AUTOTUNE_RACE_CALLS timed calls): a raced trial stores
    the calls it took, and its time is over the final best (the bound only ever falls to the best so far);
    the best, the default (measured before any best) and the finalists' re-timings took every call."""
    from autotune.trial import KIND_RETIME

    env = {"AUTOTUNE_RACE": "1", "AUTOTUNE_RACE_CALLS": "2"}
    common = ["search", MATMUL, "--device", "cpu", "--shape", SMALL, "--num-tests", "6", "--db", sqlite_url]
    autotune(*common, "--trials", "12", "--seed", "3", env=env)
    _, trials = _all_trials(sqlite_url)
    timed = [t for t in trials if t.timed]
    assert timed and {t.calls for t in timed} <= {2, 6}, [t.calls for t in timed]
    search = [t for t in timed if t.kind != KIND_RETIME]
    best = min(search, key=lambda t: t.time_s)
    raced = [t for t in search if t.calls == 2]
    assert raced, "every config beat the best before it: nothing to race"
    assert all(t.time_s > best.time_s for t in raced)
    assert best.calls == 6 and search[0].calls == 6
    assert all(t.calls == 6 for t in timed if t.kind == KIND_RETIME)


def test_racing_off_and_a_bad_race_factor(tmp_path):
    db = str(tmp_path / "r.db")
    common = ["search", MATMUL, "--device", "cpu", "--shape", SMALL, "--num-tests", "4", "--db", db]
    autotune(*common, "--trials", "6", "--seed", "3", env={"AUTOTUNE_RACE": "0", "AUTOTUNE_RACE_CALLS": "1"})
    _, trials = _all_trials(f"sqlite:///{db}")
    assert trials and {t.calls for t in trials if t.timed} == {4}
    proc = autotune(*common, check=False, env={"AUTOTUNE_RACE": "0.5"})
    assert proc.returncode == 2 and "AUTOTUNE_RACE must be 0 (off) or >= 1" in proc.stderr


def test_failures_are_statuses_and_known_failures_are_not_retried(sqlite_url):
    args = [
        "search",
        FAULTY,
        "--device",
        "cpu",
        "--num-tests",
        "3",
        "--db",
        sqlite_url,
        "--trials",
        "20",
        "--compile-timeout",
        "5",
        "--run-timeout",
        "120",
    ]
    first = autotune(*args)
    store, trials = _all_trials(sqlite_url)
    by_mode = {t.config["MODE"]: t.status for t in trials}
    # --run-timeout 120, but once the default config ran in well under a second the hanging candidate is
    # stopped after the adapted bound (the 10 s floor; 100x the default's time on a loaded machine)
    (hang,) = [t for t in trials if t.config["MODE"] == "hang_run"]
    within = re.search(r"within (\d+(?:\.\d+)?) s", hang.error or "")
    assert within and float(within[1]) < 120, hang.error
    assert by_mode == {
        "ok": TrialStatus.OK,
        "slow": TrialStatus.OK,
        "compile_error": TrialStatus.COMPILE_FAILED,
        "launch_error": TrialStatus.LAUNCH_FAILED,
        "wrong": TrialStatus.WRONG_RESULT,
        "exit": TrialStatus.CRASHED,
        "segfault": TrialStatus.CRASHED,
        "hang_compile": TrialStatus.TIMEOUT,
        "hang_run": TrialStatus.TIMEOUT,
    }
    best = store.trials.best("faulty")
    assert len(best) == 1 and best[0].config == {"MODE": "ok"}
    assert "crashed=2" in first.stdout and "timeout=2" in first.stdout
    # a second search reuses every stored result: nothing is compiled or timed again
    autotune(*args)
    _, again = _all_trials(sqlite_url)
    assert len(again) == len(trials)


def test_two_processes_join_one_postgres_study(pg_url):
    pytest.importorskip("psycopg")
    # create the schema first: concurrent searches never migrate
    autotune("db", "upgrade", "--db", pg_url)
    common = [
        "search",
        MATMUL,
        "--device",
        "cpu",
        "--shape",
        SMALL,
        "--num-tests",
        "3",
        "--db",
        pg_url,
        "--sampler",
        "random",
        "--trials",
        "4",
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "autotune", *common, "--seed", str(s)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in (11, 12)
    ]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    store, trials = _all_trials(pg_url)
    key = only_key(store)
    import optuna

    study = optuna.load_study(study_name=key.study_name, storage=pg_url)
    assert all(t.state.is_finished() for t in study.trials), "a trial was left running"
    # the study mirrors our trials table: one finished Optuna trial per stored trial, real times
    measured = [t for t in trials if t.status is not TrialStatus.INVALID]
    ids = [t.user_attrs["autotune_trial_id"] for t in study.trials]
    assert len(ids) == len(set(ids)) == len(trials)
    assert all(t.value is None or t.value < 10 for t in study.trials), "a penalty value was told"
    assert len(measured) == 8 and store.trials.duplicate_measurements() == 0


@pytest.mark.parametrize(
    "args,message",
    [
        (["search", "nope.py"], "no such kernel file"),
        (["search", MATMUL, "--shape", "M=1,N"], "bad shape"),
        (["search", MATMUL, "--shape", "M=0,N=1,K=1"], "must be positive"),
        (["search", MATMUL, "--strategy", "annealing"], "unknown strategy"),
        (["search", MATMUL, "--sampler", "annealing"], "unknown strategy"),
        (["search", MATMUL, "--timeout", "nan"], "--timeout must be a finite number"),
        (["search", MATMUL, "--run-timeout", "0"], "--run-timeout must be > 0"),
        (["search", MATMUL, "--run-timeout", "inf"], "--run-timeout must be a finite number"),
        (["search", MATMUL, "--devices", "tpu:0"], "unknown device"),
        (["search", MATMUL, "--devices", "cuda:0,cuda:0"], "names a device twice"),
        (["search", MATMUL, "--trials", "0"], "--trials"),
        (["search", MATMUL, "--device", "cpu", "--shape", "M=64,N=64"], "missing K"),
        (["best", "matmul_cpu", "--shape", "M=64;N=2"], "bad shape"),
        (["check", "nope.py"], "no such kernel file"),
        (["bench", MATMUL, "--config", "{bad"], "not valid JSON"),
        (["space", "search_spaces/none.yaml"], "none.yaml"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    db = tmp_path / "never.db"
    proc = (
        autotune(*args, "--db", str(db), check=False)
        if args[0] in ("search", "best")
        else autotune(*args, check=False)
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    if args[0] == "search":
        assert not db.exists(), "nothing may be written for bad input"


def test_bad_kernel_file_is_one_line(tmp_path):
    bad = tmp_path / "bad_kernel.py"
    bad.write_text("KERNEL = object()\n")
    proc = autotune("search", str(bad), "--device", "cpu", "--db", str(tmp_path / "x.db"), check=False)
    assert proc.returncode == 2 and "KERNEL lacks" in proc.stderr and "bad_kernel.py" in proc.stderr


def test_unreachable_database_masks_password(closed_port):
    url = f"postgresql+psycopg://user:s3cret@127.0.0.1:{closed_port}/db"
    for args in (["search", MATMUL, "--db", url], ["best", "matmul_cpu", "--db", url], ["show", "--db", url]):
        proc = autotune(*args, check=False)
        assert proc.returncode == 2, proc.stderr
        assert "s3cret" not in proc.stderr + proc.stdout and "***" in proc.stderr


def test_schema_out_of_date_says_what_to_run(tmp_path):
    import sqlite3

    db = tmp_path / "old.db"
    autotune("db", "upgrade", "--db", str(db))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE autotune_alembic_version SET version_num = '0000_from_the_future'")
    before = db.read_bytes()
    proc = autotune("search", MATMUL, "--device", "cpu", "--db", str(db), check=False)
    assert proc.returncode == 2 and "newer" in proc.stderr
    assert db.read_bytes() == before
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    proc = autotune("best", "matmul_cpu", "--db", str(empty), check=False)
    assert proc.returncode == 2 and "autotune db upgrade" in proc.stderr


def test_check_space_and_bench_commands():
    proc = autotune("check", MATMUL, "--device", "cpu")
    assert proc.stdout.count("ok ") >= 6 and "FAIL" not in proc.stdout
    proc = autotune("space", "search_spaces/gemm_fp8.yaml", "--facts", "h200")
    assert "valid on h200" in proc.stdout
    proc = autotune("bench", MATMUL, "--device", "cpu", "--shape", SMALL, "--num-tests", "3")
    assert "ok" in proc.stdout and "us" in proc.stdout


def test_check_reports_a_broken_kernel(tmp_path):
    broken = tmp_path / "zeros.py"
    broken.write_text(
        (ROOT / "examples" / "matmul_cpu.py")
        .read_text()
        .replace(
            'a = torch.randn(shape["M"], shape["K"], device=device)',
            'a = torch.zeros(shape["M"], shape["K"], device=device)',
        )
        .replace('space = "matmul_cpu"', f'space = "{ROOT / "search_spaces" / "matmul_cpu.yaml"}"')
    )
    proc = autotune("check", str(broken), "--device", "cpu", check=False)
    assert proc.returncode == 2 and "all-zero" in proc.stdout


def test_orchestrator_never_imports_the_kernel_file_or_torch(tmp_path):
    # The search runs in this fresh interpreter; only its spawned worker may import torch and the kernel.
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from autotune.cli import app\n"
        f"r = CliRunner().invoke(app, ['search', {MATMUL!r}, '--device', 'cpu', '--trials', '2', '--num-tests', '2',"
        f" '--shape', 'M=32,N=32,K=32', '--db', {str(tmp_path / 'o.db')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m in ('torch', 'triton') or m.startswith('autotune_kernel_')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_kernel_file_bug_stops_cleanly_and_leaves_no_running_trial(sqlite_url):
    proc = autotune("search", FAULTY, "--device", "cpu", "--shape", "N=13", "--db", sqlite_url, check=False)
    assert proc.returncode == 2 and "N=13 is unlucky" in proc.stderr and "Traceback" not in proc.stderr
    import optuna

    store = Store(sqlite_url)
    try:
        study = optuna.load_study(study_name=only_key(store).study_name, storage=sqlite_url)
        states = [t.state for t in study.trials]
    except KeyError:  # the search stopped before its study writer had started: the next search copies
        states = []
    # the database study only ever receives finished trials; the claim in flight was handed back
    assert optuna.trial.TrialState.RUNNING not in states
    assert store.claims.running(only_key(store).key_id) == {}


@pytest.mark.slow
@pytest.mark.triton
def test_gemm_fp8_search_runs_in_the_triton_interpreter(sqlite_url):
    # The real Triton FP8 kernel through the whole pipeline on a CPU (times are the interpreter's, not a GPU's).
    args = [
        "search",
        str(ROOT / "examples" / "gemm_fp8.py"),
        "--device",
        "cpu",
        "--shape",
        "M=64,N=64,K=128",
        "--trials",
        "4",
        "--num-tests",
        "2",
        "--seed",
        "3",
        "--db",
        sqlite_url,
    ]
    autotune(*args, env={"TRITON_INTERPRET": "1"})
    store, trials = _all_trials(sqlite_url)
    measured = [t for t in trials if t.status is not TrialStatus.INVALID]
    assert len(measured) == 4 and all(t.status is TrialStatus.OK for t in measured), [
        t.error for t in measured
    ]
    split = [t for t in measured if t.config.get("SPLIT_K", 1) > 1]
    for t in split:  # split-K times every kernel it launches: partials + reduction, or the one fused kernel
        expected = (
            {"_autotune_gemm_fp8_kernel", "_autotune_gemm_fp8_splitk_reduce"}
            if t.config.get("SPLIT_REDUCE", "kernel") == "kernel"
            else {"_autotune_gemm_fp8_splitk_fused"}
        )
        assert set(t.kernels) == expected
    assert store.trials.best("gemm_fp8")[0].config in [t.config for t in measured]
    # without the interpreter the kernel file says what to do, instead of failing every config
    proc = autotune(*args, check=False, env={"TRITON_INTERPRET": "0"})
    assert proc.returncode == 2 and "TRITON_INTERPRET=1" in proc.stderr


def test_bad_environment_setting_is_one_line(tmp_path):
    proc = autotune(
        "search", MATMUL, "--db", str(tmp_path / "e.db"), check=False, env={"AUTOTUNE_TRIALS": "many"}
    )
    assert proc.returncode == 2 and "AUTOTUNE_TRIALS='many' is not an integer" in proc.stderr
    assert not (tmp_path / "e.db").exists()
    # read in the worker, but checked once at start-up: one line, instead of every trial failing
    proc = autotune(
        "search", MATMUL, "--db", str(tmp_path / "e.db"), check=False, env={"AUTOTUNE_FLUSH_BYTES": "lots"}
    )
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "AUTOTUNE_FLUSH_BYTES" in lines[0]
    assert not (tmp_path / "e.db").exists()
