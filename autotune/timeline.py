"""``AUTOTUNE_TRACE_STARTUP=1``: where a search's seconds go, process by process.

The command that starts the search (``start``) creates a file and hands its path to the processes it starts
(through the environment they inherit); every process appends its spans there as JSON lines (one short
``O_APPEND`` write each, so lines from several processes never interleave) and the command prints them as one
timeline at its end (``report``): what ran in which process, when, relative to the command's own start. With
the variable unset every call here is a no-op costing a dictionary lookup: nothing is timed, nothing written.

Times are wall-clock (``time.time()``): the only clock the processes of one host share. Imports nothing
heavy (a worker imports it before torch)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO, Any

from autotune import settings

#: this process's label in the timeline ("orchestrator", "timer cuda:0", "compiler 2"...)
_label = "orchestrator"
#: the timeline's file (None: not traced), resolved on first use
_path: str | None = None
_resolved = False
#: this process created the file (the command the user started): it prints and removes it
_owner = False


def _file() -> str | None:
    global _path, _resolved
    if not _resolved:
        value = settings.trace_startup()
        _path = value if value is not None and os.path.isabs(value) else None
        _resolved = True
    return _path


def enabled() -> bool:
    return _file() is not None


def process_started() -> float:
    """Wall-clock time this process started (Linux: its start in clock ticks since boot, from /proc, against
    the boot-time clock, so the interpreter's start-up and imports before any autotune code count), else
    now."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - max(0.0, age)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()


def start() -> bool:
    """In the command the user started, when ``AUTOTUNE_TRACE_STARTUP`` is on: create the timeline's file
    and hand it to every process started from now on. Returns whether the command is traced."""
    global _path, _resolved, _owner
    value = settings.trace_startup()
    if value is None:
        return False
    if not os.path.isabs(value):  # "1": this is the command; an inherited path means a parent collects
        fd, value = tempfile.mkstemp(prefix="autotune-timeline-", suffix=".jsonl")
        os.close(fd)
        settings.share_trace_startup(value)
        _owner = True
    _path, _resolved = value, True
    span("process start -> autotune's code runs (interpreter, imports)", process_started(), time.time())
    return True


def set_process(label: str) -> None:
    """Name this process in the timeline (a worker, once it knows its role)."""
    global _label
    _label = label


def span(what: str, t0: float, t1: float | None = None, process: str | None = None) -> None:
    """Record ``what`` running from ``t0`` to ``t1`` (wall-clock; ``t1`` None: an instant)."""
    path = _file()
    if path is None:
        return
    line = json.dumps({"p": process or _label, "pid": os.getpid(), "w": what, "t0": t0, "t1": t1}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:  # the command ended and removed it: nothing will read this
        return
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def mark(what: str) -> None:
    """Record an instant (``what`` happened now)."""
    if enabled():
        span(what, time.time())


@contextlib.contextmanager
def phase(what: str) -> Iterator[None]:
    """Record the ``with`` block as a span."""
    if not enabled():
        yield
        return
    t0 = time.time()
    try:
        yield
    finally:
        span(what, t0, time.time())


@contextlib.contextmanager
def traced() -> Iterator[None]:
    """A command's whole run, with its timeline printed at the end when ``AUTOTUNE_TRACE_STARTUP`` is on."""
    start()
    try:
        yield
    finally:
        report()


def read(path: str) -> list[dict[str, Any]]:
    rows = []
    with open(path) as f:
        for line in f:
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """The timeline as text: one line per span, by start time, seconds from the first span's start."""
    if not rows:
        return "start-up timeline: nothing recorded"
    rows = sorted(rows, key=lambda r: (r["t0"], r["t1"] or r["t0"]))
    origin = rows[0]["t0"]
    width = max(len(f"{r['p']} [{r['pid']}]") for r in rows)
    out = [
        "start-up timeline (AUTOTUNE_TRACE_STARTUP): seconds from the command's start",
        f"{'start':>7} {'end':>7} {'took':>6}  {'process':<{width}}  what",
    ]
    for r in rows:
        t1 = r["t1"]
        end = f"{t1 - origin:7.2f}" if t1 is not None else " " * 7
        took = f"{t1 - r['t0']:6.2f}" if t1 is not None else " " * 6
        who = f"{r['p']} [{r['pid']}]"
        out.append(f"{r['t0'] - origin:7.2f} {end} {took}  {who:<{width}}  {r['w']}")
    return "\n".join(out)


def report(stream: IO[str] | None = None) -> str | None:
    """In the command that called ``start``: print the timeline (stderr by default), remove its file and
    stop tracing. Returns the text (None when not traced)."""
    global _path
    path = _file()
    if path is None or not _owner:
        return None
    span("command ends", time.time())
    try:
        text = format_rows(read(path))
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
        _path = None
    print(text, file=stream or sys.stderr, flush=True)
    return text
