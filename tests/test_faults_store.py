"""The store under faults (issue 21): claims of owners that share a hostname but not a pid namespace
(containers), and the state a kill -9 leaves behind (running claims, a running nightly run), which the next
process closes and ``autotune show`` never lists as running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.store import Store
from autotune.store.claims import ClaimState, Owner
from autotune.store.models import ClaimRow
from tests.conftest import wait_for_trials
from tests.test_store import ensure

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "tests" / "kernels" / "tiny.py")


def dead_pid() -> int:
    """A pid that existed a moment ago and is gone now."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


@pytest.fixture
def sqlite_store(sqlite_url):
    s = Store(sqlite_url)
    s.schema.upgrade()
    yield s
    s.close()


def test_owner_id_carries_a_token_and_the_pid_namespace():
    a, b = Owner(), Owner()
    host, pid, token, namespace = a.id.rsplit(":", 3)
    assert (host, int(pid)) == (a.host, os.getpid()) and token and namespace == a.namespace
    assert a.namespace == b.namespace and a.id != b.id  # same process, told apart by the token


def test_a_pid_gone_in_another_namespace_is_not_a_dead_owner(sqlite_store):
    """Same hostname, a pid that does not exist here, another pid namespace (another container): the owner
    may well be alive, so its claim is busy until its lease expires."""
    key = ensure(sqlite_store)
    elsewhere = Owner(pid=dead_pid(), namespace="4026500000")
    me = Owner()
    assert sqlite_store.claims.claim(key.id, "h", elsewhere, lease_s=1.0).state is ClaimState.CLAIMED
    assert sqlite_store.claims.claim(key.id, "h", me, lease_s=30).state is ClaimState.BUSY
    assert sqlite_store.claims.close_stale() == 0
    assert sqlite_store.history.key_states()[0].running == 1
    time.sleep(1.2)  # the lease ran out: now it may be taken over
    assert sqlite_store.claims.claim(key.id, "h", me, lease_s=30).state is ClaimState.CLAIMED


def test_a_pid_gone_in_our_namespace_is_taken_over_and_closed_at_once(sqlite_store):
    key = ensure(sqlite_store)
    ghost = Owner(pid=dead_pid())
    for h in ("h1", "h2"):
        assert sqlite_store.claims.claim(key.id, h, ghost, lease_s=3600).state is ClaimState.CLAIMED
    assert sqlite_store.history.key_states()[0].running == 0  # never shown as running
    assert sqlite_store.claims.claim(key.id, "h1", Owner(), lease_s=30).state is ClaimState.CLAIMED
    assert sqlite_store.claims.close_stale() == 1  # h2: nobody proposed it again, still closed
    assert sqlite_store.claims.running(key.id) == {"h1": sqlite_store.claims.running(key.id)["h1"]}


def test_an_old_owner_id_without_a_namespace_waits_for_its_lease(sqlite_store):
    """Claims written before the namespace was recorded: their pid proves nothing, the lease decides."""
    key = ensure(sqlite_store)
    ghost = Owner(pid=dead_pid())
    assert sqlite_store.claims.claim(key.id, "h", ghost, lease_s=3600).state is ClaimState.CLAIMED
    with sqlite_store.db.session(write=True) as s:
        row = s.query(ClaimRow).one()
        row.owner = f"{ghost.host}:{ghost.pid}:{ghost.token}"
    assert sqlite_store.claims.claim(key.id, "h", Owner(), lease_s=30).state is ClaimState.BUSY


def _search(db: Path, shape: str, *extra: str, env: dict | None = None, **kw) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "autotune", "search", TINY, "--device", "cpu", "--shape", shape,
        "--strategy", "exhaustive", "--num-tests", "2", "--db", str(db), *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})}, **kw,
    )  # fmt: skip


def _running_rows(store: Store) -> int:
    with store.db.session() as s:
        return s.query(ClaimRow).filter(ClaimRow.status == "running").count()


def test_kill_9_leaves_no_claim_running(tmp_path):
    """A search killed with -9 holds running claims; `autotune show` does not list them as running, and the
    next search (here of another shape) closes them."""
    db = tmp_path / "k.db"
    proc = _search(db, "N=32", "--trials", "100", env={"TINY_COMPILE_SLEEP": "1"}, start_new_session=True)
    store = Store(f"sqlite:///{db}")
    try:
        assert wait_for_trials(store, 2, timeout_s=240), "the search never stored a trial"
        deadline = time.monotonic() + 60
        while _running_rows(store) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _running_rows(store) > 0, "the killed search held no claim: nothing to test"
        show = subprocess.run(
            [sys.executable, "-m", "autotune", "show", "--db", str(db)],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert show.returncode == 0, show.stderr
        assert store.history.key_states()[0].running == 0
        rerun = _search(db, "N=16", "--trials", "2")
        _, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err
        assert _running_rows(store) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        store.close()


def test_a_killed_nightly_run_is_closed_as_killed_by_the_next(tmp_path):
    db = tmp_path / "n.db"
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: killed\ndevices: cpu\nkernels:\n  - file: {TINY}\n    shapes: ['N=32']\n"
        "strategy: random\ntrials: 20\nseed: 0\nnum_tests: 2\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", "nightly", str(job)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TINY_COMPILE_SLEEP": "1", "AUTOTUNE_DB": str(db)}, start_new_session=True,
    )  # fmt: skip
    store = Store(f"sqlite:///{db}")
    try:
        assert wait_for_trials(store, 1, timeout_s=240), "the nightly run never stored a trial"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert [r.status for r in store.verifications.runs()] == ["running"]
        # what the next `autotune nightly` does first
        store.verifications.start_run("next", "killed", "here")
        assert [r.status for r in store.verifications.runs()] == ["killed", "running"]
        killed = store.verifications.runs()[0]
        assert killed.finished_at is not None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        store.close()


OLD_DB = ROOT / "tests" / "data" / "db" / "autotune_0001.db"
MATMUL = ROOT / "examples" / "matmul_cpu.py"


@pytest.mark.parametrize(
    "command",
    [
        ["nightly", "{job}"],
        ["search", str(MATMUL), "--device", "cpu", "--trials", "1", "--db", "{db}"],
        ["show", "--db", "{db}"],
        ["export", "--out", "{out}", "--db", "{db}"],
        ["report", "--out", "{out_dir}", "--db", "{db}"],
    ],
    ids=lambda c: c[0],
)
def test_a_refusing_command_writes_nothing(tmp_path, command):
    """A database at revision 0001: every command refuses (run `autotune db upgrade`) and leaves the file
    byte for byte as it was, with no file beside it (a writable SQLite connection alone switched it to WAL)."""
    import hashlib
    import shutil

    folder = tmp_path / "db"
    folder.mkdir()
    db = folder / "old.db"
    shutil.copy(OLD_DB, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: refused\ndevices: cpu\nkernels:\n  - file: {MATMUL}\n    shapes: ['M=64,N=64,K=64']\n"
        "strategy: random\ntrials: 2\nseed: 0\n"
    )
    args = [a.format(job=job, db=db, out=tmp_path / "x.json", out_dir=tmp_path / "r") for a in command]
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "AUTOTUNE_DB": str(db)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "0001" in proc.stderr and "autotune db upgrade" in proc.stderr, proc.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before, "a refusing command changed the database"
    assert sorted(p.name for p in folder.iterdir()) == ["old.db"]


def _chattr(flag: str, *paths: Path) -> bool:
    """``chattr flag paths``; False where the filesystem or the user cannot set attributes."""
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root (CI runs as root)")
@pytest.mark.parametrize("immutable", ["db", "shm", "folder"])
def test_an_immutable_sqlite_database_is_refused_with_what_to_do(tmp_path, immutable):
    """Issue 45: an immutable database (``chattr +i``) was opened read-only behind the writer's back, its
    ``-shm`` index mapped read-only: a file changed under the mapping ends the process by SIGBUS with no
    line. A writer now refuses it before SQLite opens anything, naming the file and the fix."""
    from autotune.errors import StoreError

    db = tmp_path / "i.db"
    with Store(f"sqlite:///{db}") as s:
        s.schema.upgrade()
        ensure(s)
    (tmp_path / "i.db-shm").touch()
    target = {"db": db, "shm": tmp_path / "i.db-shm", "folder": tmp_path}[immutable]
    if not _chattr("+i", target):
        pytest.skip("this filesystem does not take chattr +i")
    try:
        with Store(f"sqlite:///{db}") as s, pytest.raises(StoreError) as caught:
            ensure(s, shape={"M": 64, "N": 64, "K": 64})
        message = str(caught.value)
        assert str(target) in message and "chattr -i" in message, message
        assert "\n" not in message
    finally:
        _chattr("-i", target)


def test_a_fatal_signal_in_the_cli_says_so_on_stderr(tmp_path):
    """Issue 45: a SIGBUS (a mapped database file truncated under the process) ended ``autotune`` with
    nothing on stderr; the fault handler now names the signal and the stack."""
    code = (
        "import os, signal, sys; sys.argv = ['autotune', 'show', '--help']; from autotune.cli import main; "
    )
    code += "import autotune.cli as c; c.app = lambda: os.kill(os.getpid(), signal.SIGBUS); main()"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "Bus error" in done.stderr, done.stderr


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MB tmpfs (root only: CI runs as root): a disk that fills."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs (root only): {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem is full."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_search_failed_by_a_full_disk_stores_no_config_twice_when_searched_again(small_fs):
    """Issue 45: after a disk-full a service's search failed (``database or disk is full``), its request was
    taken again and 2 configs were stored twice: the long-lived tuner's pipeline still held the failed
    search's candidates, whose outcomes the next search stored beside its own measurements of them."""
    from autotune.engine import SimulatedBackend
    from autotune.errors import DatabaseUnreachableError
    from autotune.settings import SearchSettings
    from autotune.space import Space
    from autotune.trial import TrialResult
    from autotune.tuning.tuner import Tuner
    from tests.test_engine import SPACE, sim_info, synthetic

    filler = small_fs / "filler"
    calls = []

    def answer(config, shape) -> TrialResult:
        calls.append(config)
        if len(calls) == 3:  # the disk fills while candidates are still queued
            _fill(filler)
        time.sleep(0.05)
        return synthetic(config, shape)

    backend = SimulatedBackend(sim_info(Space.from_dict(SPACE), {"A": 1, "B": 1, "C": "x"}), answer)
    settings = SearchSettings(
        devices="sim:0", strategy="exhaustive", trials=12, compile_workers=0, retime_top=0, seed=1
    )
    store = Store(f"sqlite:///{small_fs / 'a.db'}")
    store.schema.upgrade()
    tuner = Tuner("sim", store, settings, backend=backend, long_lived=True)
    with tuner:
        tuner.start()
        with pytest.raises(DatabaseUnreachableError, match="disk is full"):
            tuner.search_shape({"N": 8})
        filler.unlink()
        tuner.search_shape({"N": 8})  # `autotune serve` takes the handed-back request again
    assert store.trials.duplicate_measurements() == 0
    store.close()
