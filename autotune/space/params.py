"""Params and constraints: what they are, and how a definition mapping is parsed into them.

:func:`parse_definition` validates the mapping ``Space.from_dict`` takes (the rules are in the package
docstring) and returns its parts; every error is a :class:`SpaceError` that names the source and the
param or constraint.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Mapping, Sequence
from typing import Any

from autotune.env import FACT_NAMES
from autotune.errors import SpaceError
from autotune.space.expr import _EVAL_ERRORS, Env, _describe, _Expr
from autotune.space.messages import _clip, _names, _short, format_count

Value = int | float | str | bool

MAX_CHOICES = 100_000  # per param: a range this large is a typo, and would make enumeration hopeless
MAX_PARAMS = 256  # enumeration and counting recurse once per param
MAX_NAME_CHARS = 200  # param and constraint names (they appear in every message about them)

_NO = object()  # "no such choice"


def _choice_key(v: Any) -> tuple[str, Any] | None:
    # 64 and 64.0 share a key (they are the same number to every expression); True and 1 do not.
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int | float):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    return None


class Param:
    """One tunable parameter: a name, its finite ordered choices and an optional ``when``."""

    __slots__ = ("name", "choices", "when", "_when", "_lookup")

    def __init__(self, name: str, choices: Sequence[Value], when: _Expr | None = None):
        self.name = name
        self.choices: tuple[Value, ...] = tuple(choices)
        self._when = when
        self.when: str | None = when.text if when else None
        self._lookup = {_choice_key(c): c for c in self.choices}

    def __repr__(self) -> str:
        when = f", when={self.when!r}" if self.when else ""
        return f"Param({self.name!r}, {list(self.choices)!r}{when})"

    def active(self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> bool:
        """Whether this param exists given the params chosen so far (and device facts, if ``when`` uses any).

        False when ``when`` uses a param absent from ``config``. Raises SpaceError if ``when`` uses a
        fact ``facts`` lacks, or cannot be evaluated for ``config``."""
        if self._when is None:
            return True
        missing = sorted(self._when.facts - set(facts or ()))
        if missing:
            raise SpaceError(
                f"param {self.name}: when {_short(self.when, 200)} uses device fact {missing[0]!r}, not given"
            )
        try:
            return self._active(config, {**(facts or {}), **config})
        except _EVAL_ERRORS as exc:
            raise SpaceError(
                f"param {self.name}: when {_short(self.when, 200)} cannot be evaluated: {_describe(exc)}"
            ) from None

    def _active(self, cfg: Mapping[str, Any], env: Env) -> bool:
        w = self._when
        if w is None:
            return True
        if not all(p in cfg for p in w.params):
            return False
        return bool(w.fn(env))

    def _match(self, value: Any) -> Any:
        """The choice ``value`` stands for, or ``_NO``. Accepts 0/1 for bools, 64.0 for 64 and numpy-like
        scalars; never a string for a number."""
        if type(value) not in (int, float, bool, str) and callable(getattr(value, "item", None)):
            try:
                value = value.item()
            except Exception:
                return _NO
        key = _choice_key(value)
        if key is None:
            return _NO
        hit = self._lookup.get(key, _NO)
        if hit is _NO and type(value) is int and value in (0, 1):
            hit = self._lookup.get(("b", bool(value)), _NO)
        return hit


class Constraint:
    """A condition every valid config satisfies. ``name`` is the expression text unless one was given."""

    __slots__ = ("name", "expr", "when", "named", "_expr", "_when", "_params", "_cond")

    def __init__(self, expr: _Expr, name: str | None = None, when: _Expr | None = None):
        self._expr, self._when = expr, when
        self.expr: str = expr.text
        self.when: str | None = when.text if when else None
        self.named = name is not None
        self.name: str = name if name is not None else expr.text
        self._params = expr.params | (when.params if when else frozenset())
        self._cond: tuple[str, ...] = ()  # the conditional params it uses; set by Space

    def __repr__(self) -> str:
        return f"Constraint({self.expr!r}{f', name={self.name!r}' if self.named else ''})"

    @property
    def label(self) -> str:
        return f"{_short(self.name)} ({_clip(self.expr)})" if self.named else _short(self.expr, 200)

    def _ok(self, cfg: Mapping[str, Any], env: Env) -> bool:
        """Fast path for enumeration: does the config (all params this uses bound) satisfy it?"""
        for p in self._cond:
            if p not in cfg:
                return True
        try:
            if self._when is not None and not self._when.fn(env):
                return True
            return bool(self._expr.fn(env))
        except _EVAL_ERRORS:
            return False

    def _violation(self, cfg: Mapping[str, Any], env: Env) -> str | None:
        """Why the config violates this constraint, or None (also when it does not apply)."""
        if not all(p in cfg for p in self._params):
            return None
        try:
            if self._when is not None and not self._when.fn(env):
                return None
            if self._expr.fn(env):
                return None
        except _EVAL_ERRORS as exc:
            return f"constraint {self.label} cannot be evaluated: {_describe(exc)}"
        used = sorted(self._expr.params) + sorted(self._expr.facts)
        return f"constraint {self.label} is false with " + ", ".join(f"{n}={_short(env[n])}" for n in used)


# --------------------------------------------------------------------------------------------------
# parsing a definition


def parse_definition(d: Mapping[str, Any], src: str) -> tuple[str, list[Param], list[Constraint], str | None]:
    """The validated parts of a definition mapping: ``(name, params, constraints, description)``."""
    if not isinstance(d, Mapping):
        raise SpaceError(f"{src}: a search space must be a mapping (got {type(d).__name__})")
    name, description = _parse_header(d, src)
    raw_params = _params_mapping(d.get("params"), src)
    order = [k for k in raw_params if isinstance(k, str)]
    params = [_parse_param(k, v, order, src) for k, v in raw_params.items()]
    constraints = _parse_constraints(d.get("constraints"), order, src)
    return name.strip(), params, constraints, description


def _parse_header(d: Mapping[str, Any], src: str) -> tuple[str, str | None]:
    """The top-level keys, the name and the description."""
    extra = sorted(str(k) for k in d if k not in ("name", "description", "params", "constraints"))
    if extra:
        raise SpaceError(
            f"{src}: unknown key(s) {_names(extra)} (expected name, description, params, constraints)"
        )
    name = d.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpaceError(f"{src}: missing or empty 'name' (a string)")
    description = d.get("description")
    if description is not None and not isinstance(description, str):
        raise SpaceError(f"{src}: description must be a string")
    return name, description


def _params_mapping(raw_params: Any, src: str) -> Mapping[Any, Any]:
    if raw_params is None:
        raise SpaceError(f"{src}: missing 'params'")
    if not isinstance(raw_params, Mapping):
        raise SpaceError(
            f"{src}: params must be a mapping of name: choices (got {type(raw_params).__name__})"
        )
    if not raw_params:
        raise SpaceError(f"{src}: params is empty")
    if len(raw_params) > MAX_PARAMS:
        raise SpaceError(f"{src}: {len(raw_params)} params; at most {MAX_PARAMS}")
    return raw_params


def _parse_constraints(raw_cons: Any, order: list[str], src: str) -> list[Constraint]:
    if raw_cons is None:
        raw_cons = []
    if not isinstance(raw_cons, list | tuple):
        raise SpaceError(f"{src}: constraints must be a list (got {type(raw_cons).__name__})")
    constraints = [_parse_constraint(i, c, order, src) for i, c in enumerate(raw_cons)]
    names = [c.name for c in constraints if c.named]
    if dup := next((n for n in names if names.count(n) > 1), None):
        raise SpaceError(f"{src}: constraint {dup}: name used twice")
    return constraints


def _check_choices(values: Any, where: str) -> list[Value]:
    if not isinstance(values, list | tuple):
        raise SpaceError(f"{where}: values must be a list (got {_short(values)})")
    if not values:
        raise SpaceError(f"{where}: no choices (empty list)")
    if len(values) > MAX_CHOICES:
        raise SpaceError(f"{where}: {len(values)} choices; at most {MAX_CHOICES}")
    seen: set[Any] = set()
    for v in values:
        key = _choice_key(v)
        if key is None:
            raise SpaceError(f"{where}: choice {_short(v)} is not a number, string or bool")
        if isinstance(v, float) and not math.isfinite(v):
            raise SpaceError(f"{where}: choice {_short(v)} is not a finite number")
        if key in seen:
            raise SpaceError(f"{where}: duplicate choice {_short(v)}")
        seen.add(key)
    return list(values)


def _bounds(arg: Any, kind: str, where: str) -> tuple[int, int]:
    ok = isinstance(arg, list | tuple) and len(arg) == 2
    if not ok or any(isinstance(x, bool) or not isinstance(x, int) for x in arg):
        raise SpaceError(f"{where}: {kind} must be [low, high] with integer bounds (got {_short(arg)})")
    lo, hi = arg
    if kind == "pow2":
        for x in (lo, hi):
            if x < 1 or x & (x - 1):
                raise SpaceError(f"{where}: pow2 bounds must be powers of two (got {_short(x)})")
    if lo > hi:
        raise SpaceError(
            f"{where}: {kind} bounds are the wrong way round: low {_short(lo)} > high {_short(hi)}"
        )
    return lo, hi


_PARAM_KINDS = ("values", "pow2", "range", "bool")


def _parse_param(name: Any, spec: Any, order: list[str], src: str) -> Param:
    where = _param_where(name, src)
    values, when_text = _spec_values(spec, where)
    choices = _check_choices(values, where)
    when = _param_when(name, when_text, order, where) if when_text is not None else None
    return Param(name, choices, when)


def _param_where(name: Any, src: str) -> str:
    """Check a param's name; the prefix of every message about the param."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise SpaceError(
            f"{src}: param {_short(name)}: the name must be a Python identifier (expressions use it)"
        )
    if len(name) > MAX_NAME_CHARS:
        raise SpaceError(f"{src}: param {_short(name)}: name longer than {MAX_NAME_CHARS} characters")
    where = f"{src}: param {name}"
    if name in FACT_NAMES:
        raise SpaceError(f"{where}: the name clashes with the device fact {name} ({FACT_NAMES[name]})")
    return where


def _spec_values(spec: Any, where: str) -> tuple[Any, Any]:
    """The (unchecked) choices a param's spec lists, and its ``when`` text (None: none)."""
    if spec == "bool":
        return [False, True], None
    if isinstance(spec, list | tuple):
        return spec, None
    if isinstance(spec, Mapping):
        return _long_form_values(spec, where), spec.get("when")
    raise SpaceError(
        f"{where}: bad spec {_short(spec)}: expected a list of choices, a mapping with values/pow2/range/bool, "
        "or 'bool'"
    )


def _long_form_values(spec: Mapping[Any, Any], where: str) -> Any:
    """The choices of a long-form spec: exactly one of values, pow2, range (with step) or bool."""
    extra = sorted(str(k) for k in spec if k not in (*_PARAM_KINDS, "step", "when"))
    if extra:
        raise SpaceError(
            f"{where}: unknown key(s) {_names(extra)} (expected one of values, pow2, range, bool; "
            "plus when, and step with range)"
        )
    kinds = [k for k in _PARAM_KINDS if k in spec]
    if len(kinds) != 1:
        got = f" (got {', '.join(kinds)})" if kinds else ""
        raise SpaceError(f"{where}: give exactly one of values, pow2, range, bool{got}")
    kind, arg = kinds[0], spec[kinds[0]]
    if "step" in spec and kind != "range":
        raise SpaceError(f"{where}: step is only valid with range")
    if kind == "values":
        return arg
    if kind == "bool":
        if arg is not True:
            raise SpaceError(f"{where}: write bool: true (got bool: {_short(arg)})")
        return [False, True]
    if kind == "pow2":
        lo, hi = _bounds(arg, kind, where)
        return [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
    return _range_values(arg, spec.get("step", 1), where)


def _range_values(arg: Any, step: Any, where: str) -> list[int]:
    lo, hi = _bounds(arg, "range", where)
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise SpaceError(f"{where}: step must be a positive integer (got {_short(step)})")
    if (hi - lo) // step + 1 > MAX_CHOICES:
        raise SpaceError(
            f"{where}: range has {format_count((hi - lo) // step + 1)} values; at most {MAX_CHOICES}"
        )
    return list(range(lo, hi + 1, step))


def _param_when(name: str, when_text: Any, order: list[str], where: str) -> _Expr:
    """A param's ``when``: it may use the params declared before it, and device facts."""
    before = order[: order.index(name)]

    def allowed(n: str) -> str | None:
        if n in before:
            return None
        if n == name:
            return f"{n} is the param itself"
        if n in order:
            return f"{n} is declared after {name} (a when may only use params declared before it)"
        return f"unknown name {n!r} (known here: {_names(before) or 'no params'}; device facts)"

    return _Expr(when_text, f"{where}: when", allowed)


def _parse_constraint(i: int, raw: Any, order: list[str], src: str) -> Constraint:
    def allowed(n: str) -> str | None:
        if n in order:
            return None
        return f"unknown name {n!r} (known: params {_names(order)}; device facts {', '.join(FACT_NAMES)})"

    if isinstance(raw, str):
        return Constraint(_Expr(raw, f"{src}: constraint {_short(raw, 200)}", allowed))
    if not isinstance(raw, Mapping):
        raise SpaceError(
            f"{src}: constraint #{i + 1}: expected an expression string or a mapping (got {_short(raw)})"
        )
    extra = sorted(str(k) for k in raw if k not in ("expr", "name", "when"))
    name = raw.get("name")
    label = (
        f"constraint {_clip(name, 80)}" if isinstance(name, str) and name.strip() else f"constraint #{i + 1}"
    )
    if extra:
        raise SpaceError(f"{src}: {label}: unknown key(s) {_names(extra)} (expected expr, name, when)")
    if "expr" not in raw:
        raise SpaceError(f"{src}: {label}: missing expr")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise SpaceError(f"{src}: {label}: name must be a non-empty string (got {_short(name)})")
    if name is not None and len(name) > MAX_NAME_CHARS:
        raise SpaceError(f"{src}: {label}: name longer than {MAX_NAME_CHARS} characters")
    if name is None:
        label = f"constraint {_short(raw['expr'], 200)}"
    expr = _Expr(raw["expr"], f"{src}: {label}", allowed)
    when = _Expr(raw["when"], f"{src}: {label}: when", allowed) if raw.get("when") is not None else None
    return Constraint(expr, name, when)
