"""What a search shows while it runs (``autotune.tuning.progress``): with stderr not a terminal, one plain
line per finished trial, written while the search still runs, and one per shape; ``--quiet`` none. A real
``autotune search`` subprocess on the tiny CPU kernel, held mid-way by the kernel's compile gate."""

from __future__ import annotations

import io
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from rich.console import Console

from autotune.shapes import format_shape
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus
from autotune.tuning.progress import SearchProgress, choose_mode, trial_line
from autotune.tuning.report import TrialEvent

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "tests" / "kernels" / "tiny.py")
TRIALS = 5


def _search(db: Path, gate: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "autotune", "search", TINY, "--device", "cpu", "--shape", "N=32"]
    cmd += ["--strategy", "random", "--seed", "1", "--trials", str(TRIALS), "--num-tests", "2"]
    cmd += ["--compile-workers", "0", "--db", str(db), *extra]
    env = {**os.environ, "TINY_GATE": str(gate), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _lines(stream) -> queue.Queue[str | None]:
    q: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def test_a_piped_search_prints_a_line_per_finished_trial_while_it_runs(tmp_path):
    gate = tmp_path / "gate"
    proc = _search(tmp_path / "p.db", gate)
    try:
        lines = _lines(proc.stderr)
        seen: list[str] = []
        # Every compile but the default config's waits for the gate: the default's trial line must come
        # while the search is held (the process cannot have finished).
        while not any(" trial " in line for line in seen):
            line = lines.get(timeout=300)
            assert line is not None, f"search ended before any trial line: {seen} {proc.stdout.read()}"
            seen.append(line)
        first = next(line for line in seen if " trial " in line)
        assert proc.poll() is None
        assert first.startswith(f"[N=32] trial 1/{TRIALS} ok ") and "REPS=1,MODE=a" in first
        assert "best so far" in first
        gate.touch()
        while (line := lines.get(timeout=300)) is not None:
            seen.append(line)
        assert proc.wait(timeout=60) == 0, seen
    finally:
        gate.touch()
        proc.kill() if proc.poll() is None else None
    trial_lines = [line for line in seen if line.startswith("[N=32] trial ")]
    assert [line.split()[2] for line in trial_lines] == [f"{i}/{TRIALS}" for i in range(1, TRIALS + 1)]
    with Store.open(str(tmp_path / "p.db"), create=False, readonly=True) as store:
        (state,) = store.history.key_states()
        assert sum(state.counts.values()) >= TRIALS
    done = [line for line in seen if line.startswith("[N=32] done: ")]
    assert len(done) == 1 and f"{TRIALS} evaluated" in done[0]


def test_quiet_prints_no_progress(tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    proc = _search(tmp_path / "q.db", gate, "--quiet")
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    assert " trial " not in stderr and "done:" not in stderr
    assert "best config per shape" in stdout


def test_a_failed_trial_line_says_why_and_verbose_says_all():
    error = "launch failed: " + "x" * 300
    ev = TrialEvent(
        {"N": 32},
        TrialResult(TrialStatus.LAUNCH_FAILED, {"REPS": 2}, error=error, compile_s=0.5),
        False,
        3,
        10,
        TrialResult(TrialStatus.OK, {"REPS": 1}, time_s=2e-3),
    )
    short = trial_line(ev)
    assert short.startswith(
        f"[{format_shape({'N': 32})}] trial 3/10 launch_failed - REPS=2; best so far 2.000 ms"
    )
    assert "launch failed: xxx" in short and error not in short
    long = trial_line(ev, verbose=True)
    assert error in long and "compile 0.50 s" in long


def test_the_mode_follows_the_terminal_and_the_flags():
    tty = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert choose_mode(tty) == "bar" and choose_mode(pipe) == "lines"
    assert choose_mode(tty, quiet=True) == "quiet" == choose_mode(pipe, quiet=True, verbose=True)
    assert choose_mode(tty, bar=False) == "lines"  # a nightly job's log


def test_the_bar_ends_on_the_table_s_best_not_the_fastest_single_sample():
    from autotune.tuning.report import ShapeReport

    console = Console(file=io.StringIO(), force_terminal=True)
    shape = {"N": 32}
    fast_once = TrialResult(TrialStatus.OK, {"REPS": 1}, time_s=3.343e-3)
    with SearchProgress(console, "bar") as progress:
        progress.start_shape(shape, 2)
        progress.on_event(TrialEvent(shape, fast_once, False, 1, 2, fast_once))
        (task,) = progress._bar.tasks
        assert task.fields["best"] == "best so far 3.343 ms"
        median = TrialResult(TrialStatus.OK, {"REPS": 1}, time_s=4.062e-3)
        progress.finish_shape(ShapeReport(shape, "N=32", "s", median, None, 2, 0, 0))
        assert task.fields["best"] == "best 4.062 ms" and task.completed == 2
