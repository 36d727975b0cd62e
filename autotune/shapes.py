"""Shapes: named integer problem sizes such as ``M=4096,N=7168,K=2048``.

Kept free of torch so that the runtime lookup path and the orchestrator can use it cheaply."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from autotune.errors import ShapeError

Shape = dict[str, int]

#: the largest dimension accepted: sizes are int64 in torch/CUDA, and a product of two must still be sane
MAX_DIM = 2**62

_ITEM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([0-9]+)\s*$")


def parse_shape(text: str, params: Sequence[str] | None = None) -> Shape:
    """Parse ``"M=64,N=2112,K=7168"`` (also ``x``-free, whitespace-tolerant) into a dict.

    With ``params`` the names must be exactly the kernel's shape parameters, and the result is in
    that order."""
    if not isinstance(text, str) or not text.strip():
        raise ShapeError(f"empty shape {text!r}: expected e.g. M=4096,N=7168,K=2048")
    shape: Shape = {}
    for item in text.split(","):
        m = _ITEM.match(item)
        if not m:
            raise ShapeError(f"bad shape {text!r}: {item.strip()!r} is not NAME=POSITIVE_INT")
        name, digits = m.group(1), m.group(2).lstrip("0") or "0"
        if len(digits) > len(str(MAX_DIM)):  # before int(): a 5000-digit string must not raise ValueError
            raise ShapeError(
                f"bad shape {_short(repr(text))}: {name}={_short(digits)} is too large (max 2**62)"
            )
        value = int(digits)
        if name in shape:
            raise ShapeError(f"bad shape {text!r}: {name} given twice")
        shape[name] = value
    return check_shape(shape, params, what=repr(text))


def check_shape(shape: Mapping[str, object], params: Sequence[str] | None = None, what: str = "") -> Shape:
    """Validate a shape mapping: positive ints, and exactly ``params`` when given (returned in that order)."""
    label = _short(what or ",".join(f"{k}={_value_text(v)}" for k, v in shape.items()), 120)
    out: Shape = {}
    for name, value in shape.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShapeError(f"bad shape {label}: {name}={value!r} is not an integer")
        if value <= 0:
            raise ShapeError(f"bad shape {label}: {name}={_value_text(value)} must be positive")
        if value > MAX_DIM:  # torch, numpy and C++ extensions take int64: refuse here, in one line
            raise ShapeError(f"bad shape {label}: {name}={_value_text(value)} is too large (max 2**62)")
        out[str(name)] = int(value)
    if params is not None:
        missing = [p for p in params if p not in out]
        extra = [n for n in out if n not in params]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if extra:
                parts.append("unknown " + ", ".join(_with_hint(n, missing) for n in extra))
            raise ShapeError(
                f"bad shape {label}: {'; '.join(parts)} (this kernel's shape is {','.join(params)})"
            )
        out = {p: out[p] for p in params}
    return out


def closest(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``name`` most likely misspells (a case slip first), or None: the
    "did you mean" of unknown kernel and dimension names."""
    names = list(names)
    for n in names:
        if n.lower() == name.lower():
            return n
    import difflib  # only on a miss: the lookup path stays light

    match = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    return match[0] if match else None


def _with_hint(name: str, names: Sequence[str]) -> str:
    hint = closest(name, names)
    return f"{name} (did you mean {hint}?)" if hint else name


def _short(text: str, limit: int = 60) -> str:
    """``text``, cut in the middle when longer than ``limit`` (an error message stays one short line)."""
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-limit // 4 :]}"


def _value_text(value: object) -> str:
    """A dimension for a message; never raises (``str`` of an int of over 4300 digits does)."""
    if isinstance(value, int) and value.bit_length() > 256:
        return f"<a {value.bit_length()}-bit integer>"
    try:
        return _short(repr(value) if not isinstance(value, int) else str(value))
    except Exception:
        return f"<{type(value).__name__}>"


def format_shape(shape: Mapping[str, int]) -> str:
    """Canonical key as stored in the database: the kernel's parameter order, ``M=64,N=2112,K=7168``."""
    return ",".join(f"{k}={int(v)}" for k, v in shape.items())


def shape_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """Distance between two shapes in log2 space (a shape twice as large in one dim is 1 away).

    Shapes with different parameter names are infinitely far apart, and so is a shape with a dimension
    that is not a positive number (a key with M=0 in the database made log2 raise, and the lookup give
    the default for every shape not tuned exactly)."""
    if set(a) != set(b) or not (_positive(a) and _positive(b)):
        return math.inf
    return math.sqrt(sum((math.log2(a[k]) - math.log2(b[k])) ** 2 for k in a))


def _positive(shape: Mapping[str, object]) -> bool:
    """Every dimension a positive int, or a positive finite float (log2 takes ints of any size)."""
    return all(
        (isinstance(v, int) and not isinstance(v, bool) and v > 0)
        or (isinstance(v, float) and math.isfinite(v) and v > 0)
        for v in shape.values()
    )


def parse_shapes(texts: list[str] | None) -> list[dict[str, int]]:
    """Syntax-check ``--shape`` strings before anything starts (names are checked against the kernel later)."""
    return [parse_shape(t) for t in texts or []]
