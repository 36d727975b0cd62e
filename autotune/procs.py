"""Child processes the parent decides for: shielded from the terminal's Ctrl-C.

A terminal's Ctrl-C sends SIGINT to the whole process group. A child that died of it mid-write (the Optuna
study writer, a timing worker) left the parent waiting on a process that was gone; a shielded child keeps
running, the parent alone gets the KeyboardInterrupt and ends its children itself (daemon children are
terminated at exit), so an interrupt is one decision in one place. SIGTERM and SIGKILL still end a child.

A shielded child also dies with its parent: a parent killed with -9 (an OOM kill, SIGBUS) cannot end its
children, and a study writer blocked in ``q.get()`` then lived forever, and with it multiprocessing's resource
tracker (it ends when the last holder of its pipe does). A watchdog thread waits on the pipe that spawn leaves
between parent and child (``parent_process().sentinel``: readable when the parent is gone, whoever killed it)
and ends the child. Not ``PR_SET_PDEATHSIG``: it fires when the parent *thread* that started the child ends,
and workers are restarted from the pipeline's threads."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "EXEC_FAILED",
    "ExecFailed",
    "ORPHANED",
    "die_with_parent",
    "ensure_resource_tracker",
    "shielded",
    "start_shielded",
    "started_again",
]

#: the exit code of a spawn-ed child whose exec failed: multiprocessing's fork_exec writes the errno to a
#: pipe nobody reads and the child exits 255 before Python runs, silently (a transient refusal seen once in
#: CI; the same start worked again). A death in Python exits 1 with a traceback, a signal gives a negative
#: code. A file that calls os._exit(255) at import looks the same: it is retried a few times, then reported.
EXEC_FAILED = 255
#: starts of such a child in all before its failure is reported
EXEC_TRIES = 3

#: the exit code of a child whose parent died: it ends itself (``shielded``'s watchdog)
ORPHANED = 70

_T = TypeVar("_T")
log = logging.getLogger("autotune.procs")


class ExecFailed(Exception):
    """A child exited with ``EXEC_FAILED`` before it said anything: it never ran Python."""


def started_again(start: Callable[[], _T], what: str) -> _T:
    """``start()`` (which starts a child and waits for its first word), called again while it raises
    ``ExecFailed``, ``EXEC_TRIES`` times in all; the last ``ExecFailed`` propagates."""
    for attempt in range(1, EXEC_TRIES + 1):
        try:
            return start()
        except ExecFailed:
            if attempt == EXEC_TRIES:
                raise
            log.warning("%s exited before Python ran (exec failed): starting it again", what)
    raise AssertionError("unreachable")


def shielded(target: Callable[..., Any], *args: Any) -> Any:
    """A process target: ``target(*args)`` with SIGINT ignored (pass ``target=shielded, args=(fn, ...)``),
    ended when its parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    return target(*args)


def die_with_parent() -> None:
    """In a spawn-ed child: a daemon thread ends this process (exit ``ORPHANED``) once its parent is gone."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return
    threading.Thread(
        target=_end_when_gone, args=(parent.sentinel,), name="autotune-parent-watch", daemon=True
    ).start()


def _end_when_gone(sentinel: int) -> None:
    from multiprocessing.connection import wait

    wait([sentinel])  # no timeout: the pipe reads as closed only when the parent process is gone
    os._exit(ORPHANED)  # no cleanup that could block (a queue's feeder thread, a lock the parent held)


def start_shielded(proc: Any) -> None:
    """``proc.start()`` (its target wrapped in :func:`shielded`) with SIGINT ignored while it starts, so
    the child ignores it from its first instruction: an ignored disposition survives exec, and Python
    installs its KeyboardInterrupt handler only where SIGINT is not ignored. Outside the main thread
    (workers are restarted from pipeline threads) dispositions cannot change: ``shielded`` covers the
    child from its target on."""
    if threading.current_thread() is not threading.main_thread():
        proc.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def ensure_resource_tracker() -> None:
    """multiprocessing's resource tracker started and alive, before this process creates a queue, an event or a
    lock for a child. Each of those registers with the tracker through a pipe; when the tracker's own exec
    failed (``EXEC_FAILED``), that write raised BrokenPipeError, which click turns into a silent exit 1 (no
    message, seen once in CI). ``ensure_running`` starts the tracker when there is none; called again, it
    writes a probe and starts a new one if the last is dead (its warning about resources that might leak is
    moot: a tracker that never ran tracked none)."""
    from multiprocessing import resource_tracker

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(EXEC_TRIES):
            resource_tracker.ensure_running()
