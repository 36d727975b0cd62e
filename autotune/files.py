"""Files the commands write (exports, reports, --json summaries, spaces): whole or not at all.

Written to a temporary file beside the target and renamed over it, so a reader never sees half a file;
a target that cannot be written (a missing folder, no permission, a directory) is the user's to fix: one
``SettingsError`` line naming the option, and no temporary file left behind."""

from __future__ import annotations

import os
from pathlib import Path

from autotune.errors import SettingsError

__all__ = ["check_writable", "write_text"]


def _cannot(what: str, path: Path, why: str) -> SettingsError:
    return SettingsError(f"{what} {path}: cannot write there ({why})")


def check_writable(path: str | os.PathLike[str], what: str = "--out") -> Path:
    """Refuse a target that cannot be written before a command spends time on what goes in it."""
    p = Path(path)
    if p.is_dir():
        raise _cannot(what, p, "it is a directory")
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise _cannot(what, p, f"no such folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _cannot(what, p, f"no permission to write in {folder}")
    return p


def write_text(path: str | os.PathLike[str], text: str, what: str = "--out") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; an OSError becomes one line for ``what`` (the option
    that named the path)."""
    p = check_writable(path, what)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as e:
        raise _cannot(what, p, e.strerror or str(e)) from None
    finally:
        tmp.unlink(missing_ok=True)
    return p
