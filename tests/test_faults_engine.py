"""Fault matrix, engine rows (the hardening issue's table; the space rows are in test_faults_space.py, the
lookup, masking and shape rows in test_faults_lookup.py): kernel files that exit or hang at import, the
database going away mid-search, meaningless option values. A hanging candidate's adapted timeout is checked
by test_tuner.py's search of the faulty kernel (the same search, run once)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for_trials

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "tests" / "kernels" / "tiny.py")


def autotune(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_check_on_a_file_that_exits_at_import(tmp_path):
    f = tmp_path / "exits.py"
    f.write_text("import os\nos._exit(7)\n")
    line = one_error_line(autotune("check", str(f)))
    assert "exited with code 7" in line


def test_check_on_a_file_that_hangs_at_import(tmp_path):
    f = tmp_path / "hangs.py"
    f.write_text("import time\ntime.sleep(3600)\n")
    line = one_error_line(
        autotune(
            "check", str(f), env={"AUTOTUNE_START_TIMEOUT": "3", "AUTOTUNE_RUN_TIMEOUT": "2"}, timeout=120
        )
    )
    assert "did not finish within 5 s" in line  # the 3 + 2 s bound stopped it, not the 3600 s sleep


def test_search_on_a_file_that_hangs_at_import(tmp_path):
    f = tmp_path / "hangs.py"
    f.write_text("import time\ntime.sleep(3600)\n")
    db = tmp_path / "h.db"
    proc = autotune("search", str(f), "--device", "cpu", "--db", str(db), env={"AUTOTUNE_START_TIMEOUT": "3"})
    line = one_error_line(proc)
    assert "did not start within 3 s" in line and "AUTOTUNE_START_TIMEOUT" in line
    assert not db.exists(), "a bad kernel file must leave no database behind"


def _pg_bin() -> str | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return str(found[-1].parent) if found else None


def _as_pg(*cmd: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else list(cmd)


@pytest.mark.slow
@pytest.mark.postgres
def test_database_going_away_mid_search_is_one_line_and_a_rerun_resumes(tmp_path, closed_port):
    """A Postgres of our own (on a free port: runs in parallel must not share it) stopped during a search:
    one line, exit 2; restarted, the same command resumes with nothing lost and nothing measured twice."""
    if _pg_bin() is None or shutil.which("runuser") is None and os.geteuid() == 0:
        pytest.skip("no Postgres server binaries")
    port = str(closed_port)
    env = {**os.environ, "AUTOTUNE_PG_PORT": port}
    start = subprocess.run(
        ["bash", ".ci/start-postgres.sh"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert start.returncode == 0, start.stderr
    data = Path(os.environ.get("TMPDIR", "/tmp")) / f"autotune-pg-{port}" / "data"
    pg_ctl = [*_as_pg(f"{_pg_bin()}/pg_ctl", "-D", str(data))]
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    cmd = [
        sys.executable, "-m", "autotune", "search", TINY, "--device", "cpu", "--shape", "N=32",
        "--strategy", "exhaustive", "--trials", "100", "--num-tests", "2", "--db", url,
    ]  # fmt: skip
    try:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TINY_COMPILE_SLEEP": "0.4"},
        )  # fmt: skip
        from autotune.store import Store

        store = Store(url)
        assert wait_for_trials(store, 3, timeout_s=240), "the search never stored a trial"
        store.close()
        subprocess.run([*pg_ctl, "-m", "fast", "-w", "stop"], check=True, capture_output=True)
        _, stderr = proc.communicate(timeout=120)
        lines = [x for x in stderr.splitlines() if x.strip() and "━" not in x and "kernel tiny" not in x]
        errors = [x for x in lines if x.startswith("error:")]
        assert proc.returncode == 2, stderr
        assert len(errors) == 1 and "went away" in errors[0] and "rerun" in errors[0], stderr
        assert "internal error" not in stderr and "Traceback" not in stderr
        subprocess.run(
            [*pg_ctl, "-l", str(data.parent / "server.log"), "-w", "start",
             "-o", f"-h 127.0.0.1 -p {port} -k {data.parent} -c fsync=off"],
            check=True, capture_output=True,
        )  # fmt: skip
        store = Store(url)
        before = store.trials.recorded(store.history.key_states()[0].key_id)
        rerun = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        after = store.trials.recorded(store.history.key_states()[0].key_id)
        assert after[: len(before)] == before, "a finished trial was lost"
        assert store.trials.duplicate_measurements() == 0 and len(after) == 24
        store.close()
    finally:
        subprocess.run(["bash", ".ci/start-postgres.sh", "stop"], cwd=ROOT, env=env, capture_output=True)


def _huge_space_kernel(tmp_path: Path, constraint: str | None) -> Path:
    """tiny.py with 12 extra parameters of 10 values each: 24 x 10**12 combinations."""
    extra = {f"P{i}": list(range(10)) for i in range(12)}
    default = {"REPS": 1, "MODE": "a", **{k: 0 for k in extra}}
    space = {"name": "huge", "params": {"REPS": [1, 2], "MODE": ["a", "b", "c"], **extra}}
    if constraint:
        space["constraints"] = [{"name": "never", "expr": constraint}]
    src = (
        Path(TINY)
        .read_text()
        .replace(
            'space = {"name": "tiny", "params": {"REPS": [1, 2, 3, 4, 5, 6, 7, 8], "MODE": ["a", "b", "c"]}}',
            f"space = {space!r}",
        )
        .replace('default_config = {"REPS": 1, "MODE": "a"}', f"default_config = {default!r}")
    )
    f = tmp_path / "huge.py"
    f.write_text(src)
    return f


def test_search_of_a_10_to_the_12_space_samples_instead_of_listing(tmp_path):
    f = _huge_space_kernel(tmp_path, None)
    db = tmp_path / "huge.db"
    # listing 10**12 configs would never end: the subprocess timeout fails the test then
    proc = autotune("search", str(f), "--device", "cpu", "--trials", "3", "--num-tests", "2", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    from autotune.store import Store

    store = Store(f"sqlite:///{db}")
    trials = store.trials.recorded(store.history.key_states()[0].key_id)
    assert len([t for t in trials if t.status.value == "ok"]) == 3, [
        (t.status.value, t.error) for t in trials
    ]


def test_search_of_an_unsatisfiable_10_to_the_12_space_is_one_line(tmp_path):
    f = _huge_space_kernel(tmp_path, "P0 > 100")
    line = one_error_line(autotune("search", str(f), "--device", "cpu", "--db", str(tmp_path / "u.db")))
    assert "no valid config" in line or "violate" in line, line


def test_ctrl_c_to_the_process_group_ends_the_search_with_nothing_lost(tmp_path):
    """What a terminal's Ctrl-C sends: SIGINT to every process of the group (the search, its workers, the
    Optuna study writer). The search used to wait 600 s on the writer the same signal had killed."""
    import signal
    import time

    import optuna

    from autotune.store import Store

    db = tmp_path / "c.db"
    cmd = [
        sys.executable, "-m", "autotune", "search", TINY, "--device", "cpu", "--shape", "N=32",
        "--strategy", "exhaustive", "--trials", "100", "--num-tests", "2", "--db", str(db),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # 2 s a compile: 24 configs take 48 s or more, so the search is still running when the signal comes
        env={**os.environ, "TINY_COMPILE_SLEEP": "2"}, start_new_session=True,
        # as a terminal's foreground job: a runner started in the background (`cmd &`) ignores SIGINT, its
        # children inherit that, and Python then installs no handler (the search ran on to the end)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    store = Store(f"sqlite:///{db}")
    try:
        assert wait_for_trials(store, 3, timeout_s=240), "the search never stored a trial"
        before = store.trials.recorded(store.history.key_states()[0].key_id)
        assert proc.poll() is None, "the search ended before Ctrl-C: nothing to interrupt"
        os.killpg(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the search had not exited 30 s after Ctrl-C ({time.monotonic() - sent:.0f} s)")
        assert proc.returncode == 130, stderr
        assert "interrupted" in stderr and "Traceback" not in stderr, stderr
        row = store.history.key_states()[0]
        after = store.trials.recorded(row.key_id)
        assert after[: len(before)] == before, "a finished trial was lost"
        assert store.trials.duplicate_measurements() == 0
        # the shielded writer finished its queue: the Optuna study holds every stored trial
        study = optuna.load_study(study_name=row.study_name, storage=f"sqlite:///{db}")
        assert len(study.trials) == len(after)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        store.close()
