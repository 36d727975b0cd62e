"""``autotune.procs``: every child dies with its parent. A search, a service or a nightly run killed with -9
(an OOM kill, SIGBUS) left its Optuna study writer (blocked in ``q.get()``) and multiprocessing's resource
tracker alive for ever (issue 45); now no process it started survives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "kernels" / "tiny.py"
#: a deadline for a loaded 2-core machine, not a target
WAIT_S = 240.0


def _descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (Linux ``/proc``)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in found:
                    found.add(k)
                    todo.append(k)
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie whose new parent does not reap it has ended all the same)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def _wait_for_children(proc: subprocess.Popen, need: int) -> set[int]:
    """The process's descendants once there are ``need`` of them (workers, writer, tracker started)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"it exited ({proc.returncode}) before it was killed"
        kids = {k for k in _descendants(proc.pid) if _alive(k)}
        if len(kids) >= need and any("resource_tracker" in _cmdline(k) for k in kids):
            return kids
        time.sleep(0.3)
    raise AssertionError(f"fewer than {need} children after {WAIT_S} s: {_descendants(proc.pid)}")


def _survivors_after_kill9(cmd: list[str], env: dict[str, str], need: int) -> dict[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", *cmd],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own group: the cleanup below never reaches pytest
    )
    kids: set[int] = set()
    try:
        kids = _wait_for_children(proc, need)
        time.sleep(2)  # the children settled in their waits (the writer in q.get(), workers idle)
        kids |= {k for k in _descendants(proc.pid) if _alive(k)}
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.2)
        return {k: _cmdline(k) for k in kids if _alive(k)}
    finally:
        for k in kids:  # whatever survived: not left on the machine
            if _alive(k):
                os.kill(k, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to list children")
def test_no_child_of_a_search_survives_kill_9(tmp_path):
    survivors = _survivors_after_kill9(
        ["search", str(TINY), "--device", "cpu", "--shape", "N=32", "--trials", "20", "--num-tests", "2",
         "--db", f"sqlite:///{tmp_path / 's.db'}", "--local"],
        {"TINY_COMPILE_SLEEP": "5"},
        need=3,
    )  # fmt: skip
    assert survivors == {}, f"left running after kill -9 of the search: {survivors}"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to list children")
def test_no_child_of_a_service_survives_kill_9(tmp_path):
    survivors = _survivors_after_kill9(
        ["serve", "--kernels", str(TINY), "--devices", "cpu", "--db", f"sqlite:///{tmp_path / 's.db'}"],
        {},
        need=3,
    )
    assert survivors == {}, f"left running after kill -9 of the service: {survivors}"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to list children")
def test_no_child_of_a_nightly_run_survives_kill_9(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: soak\ntrials: 20\nverify: false\nkernels:\n  - file: {TINY}\n    shapes: ['N=32']\n"
        f"database: sqlite:///{tmp_path / 'n.db'}\n"
    )
    survivors = _survivors_after_kill9(["nightly", str(job)], {"TINY_COMPILE_SLEEP": "5"}, need=3)
    assert survivors == {}, f"left running after kill -9 of the nightly run: {survivors}"
