"""A request is data someone wrote into the database (a recorded miss, ``autotune request``, or anyone
with write access): its kernel must be one the service was started with, its shape is checked like a
``--shape`` (``shapes.check_shape``: positive integers up to 2**62, exactly the kernel's parameters), its
dtypes must be the kernel file's; a handed-over search's budget holds only known keys of sane values.
Anything else is refused with one line, never raised."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.errors import AutotuneError
from autotune.shapes import Shape, check_shape

#: more dimensions than any kernel has: refused before the shape is even looked at key by key
MAX_KEYS = 64


@dataclass(frozen=True)
class Refusal(Exception):
    reason: str

    def __str__(self) -> str:
        return self.reason


def checked_shape(dims: object, params: Sequence[str]) -> Shape:
    """The request's shape in the kernel's parameter order, or ``Refusal``."""
    if not isinstance(dims, Mapping):
        raise Refusal(f"the shape is a {type(dims).__name__}, not a mapping of dimension names to sizes")
    if len(dims) > MAX_KEYS:
        raise Refusal(f"the shape has {len(dims)} keys (at most {MAX_KEYS}; this kernel has {len(params)})")
    try:
        return check_shape(dims, params)
    except AutotuneError as e:
        raise Refusal(str(e)) from None


def check_dtypes(dtypes_key: str, declared_key: str) -> None:
    """Only the kernel file's declared dtypes can be tuned ("" = the caller named none: those)."""
    if dtypes_key not in ("", declared_key):
        raise Refusal(f"dtypes {dtypes_key[:100]} are not the kernel file's ({declared_key})")


#: the most evaluations a handed-over search may ask for (a hostile row must not occupy a GPU for days)
MAX_TRIALS = 100_000


def checked_options(options: object) -> dict[str, Any] | None:
    """A handed-over search's budget (``autotune search``: trials, timeout_s, strategy, seed) as
    ``SearchSettings`` fields, or ``Refusal``. None: the service's own stopping rule."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise Refusal(f"the search options are a {type(options).__name__}, not a mapping")
    unknown = sorted(str(k)[:40] for k in options if k not in ("trials", "timeout_s", "strategy", "seed"))
    if unknown:
        raise Refusal(f"unknown search options {', '.join(unknown[:5])}")
    out: dict[str, Any] = {}
    trials = options.get("trials")
    if trials is not None and not (type(trials) is int and 1 <= trials <= MAX_TRIALS):
        raise Refusal(f"trials must be an integer from 1 to {MAX_TRIALS}")
    out["trials"] = trials
    timeout = options.get("timeout_s", 0.0)
    if not (type(timeout) in (int, float) and math.isfinite(timeout) and 0 <= timeout <= 7 * 86400):
        raise Refusal("timeout_s must be a number of seconds from 0 to a week")
    out["timeout_s"] = float(timeout)
    seed = options.get("seed")
    if seed is not None and not (type(seed) is int and 0 <= seed < 2**63):
        raise Refusal("seed must be a non-negative integer")
    out["seed"] = seed
    strategy = options.get("strategy")
    if strategy is not None:
        from autotune.search import strategy_names

        if not isinstance(strategy, str) or strategy not in strategy_names():
            raise Refusal(f"unknown strategy {str(strategy)[:40]!r}")
        out["strategy"] = strategy
    return out
