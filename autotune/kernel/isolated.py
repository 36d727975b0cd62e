"""A user's kernel file imported in a spawn-ed child process, not in the command's own: a file that exits,
crashes or hangs at import (or later) gives one clear ``KernelFileError`` line instead of taking the command
down with it or hanging it. ``autotune check`` and ``autotune space --from-triton`` run through it; the
search's workers do the same on their own pipe (``engine.worker``)."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from typing import Any

from autotune.errors import AutotuneError, KernelFileError
from autotune.procs import EXEC_FAILED, ExecFailed, die_with_parent, started_again

__all__ = ["run_isolated"]


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    die_with_parent()
    try:
        conn.send(("ok", fn(*args)))
    except AutotuneError as exc:  # the user's to fix: raised again as it is in the parent
        conn.send(("raise", exc))
    except BaseException as exc:  # a bug of ours: still one line for the user
        conn.send(("error", f"{type(exc).__name__}: {exc}"[:500]))


def run_isolated(
    fn: Callable[..., Any],
    *args: Any,
    path: str | os.PathLike[str],
    doing: str,
    timeout_s: float,
    timeout_hint: str,
) -> Any:
    """``fn(*args)`` (a module-level function: it is pickled) in a spawn-ed child; its result, or its
    ``AutotuneError`` raised here. ``doing`` names the work in messages ("checking the kernel file");
    ``timeout_hint`` says which settings make up ``timeout_s``."""
    from autotune.engine.worker import _signal_name

    try:
        kind, payload = started_again(lambda: _run_child(fn, args, timeout_s), "the isolated process")
    except ExecFailed:
        kind, payload = "died", EXEC_FAILED
    if kind == "timeout":
        raise KernelFileError(
            f"{path}: {doing} did not finish within {timeout_s:.0f} s ({timeout_hint}); "
            "does the kernel file hang at import or in a launch?"
        )
    if kind == "died":
        raise KernelFileError(
            f"{path}: the process {doing} {_signal_name(payload)} (does the file exit or crash at import?)"
        )
    if kind == "raise":
        raise payload
    if kind == "error":
        raise KernelFileError(f"{path}: {doing} failed: {payload}")
    return payload


def _run_child(fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> tuple[str, Any]:
    """(kind, payload): the child's own answer, ("timeout", None) or ("died", its exit code); ``ExecFailed``
    when it never ran Python."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            return "timeout", None
        try:
            return parent.recv()
        except (EOFError, OSError):
            proc.join(timeout=5)
            if proc.exitcode == EXEC_FAILED:
                raise ExecFailed from None
            return "died", proc.exitcode
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
        parent.close()
