"""How user values appear in the space's error messages: shortened, on one line, in bounded time."""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdict = 6


def _clip(text: str, limit: int = 200) -> str:
    """``text`` on one line, at most ``limit`` characters (for user text put in a message unquoted)."""
    text = str(text)
    if len(text) > 4 * limit:  # only a bounded prefix is ever looked at
        text = text[: 4 * limit]
    if any(ch in text for ch in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        text = " ".join(part.strip() for part in text.splitlines())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = 80) -> str:
    """A repr of a user value for an error message: one line, at most ``limit`` characters, in time
    bounded whatever the value (a deep or alias-shared structure, a huge string)."""
    try:
        text = repr(value[: limit + 1]) if isinstance(value, str) else _REPR.repr(value)
    except Exception:  # e.g. an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _names(names: Sequence[str] | set[str], limit: int = 200) -> str:
    return _clip(", ".join(names), limit)


def format_count(n: int) -> str:
    """1,234,567 or, past 10**15, 1.23e27."""
    if n < 10**15:
        return f"{n:,}"
    digits = str(n)  # at most MAX_PARAMS * 6 digits: under int-to-str's limit
    return f"{digits[0]}.{digits[1:3]}e{len(digits) - 1}"
