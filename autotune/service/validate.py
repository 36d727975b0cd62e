"""A request is data someone wrote into the database (a recorded miss, ``autotune request``, or anyone
with write access): its kernel must be one the service was started with, its shape is checked like a
``--shape`` (``shapes.check_shape``: positive integers up to 2**62, exactly the kernel's parameters), its
dtypes must be the kernel file's. Anything else is refused with one line, never raised."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
