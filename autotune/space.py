"""Search spaces: declarative, data-only definitions of the configs a kernel may be tuned over.

A space lives in ``search_spaces/<name>.yaml`` (or inline, as the same mapping, in a kernel file)::

    name: gemm_fp8            # required, non-empty string
    description: ...          # optional free text (not part of the hash)
    params:                   # required, non-empty ordered mapping; order = enumeration order
      BLOCK_M: [64, 128]                   # categorical: a list of ints, floats, strings or bools
      BLOCK_N: {values: [64, 128, 256]}    # the same, long form
      BLOCK_K: {pow2: [32, 256]}           # 32, 64, 128, 256 (both bounds powers of two, low <= high)
      GROUP_M: {range: [1, 16], step: 1}   # low, low+step, ... up to high inclusive (ints; step default 1)
      num_stages: [3, 4, 5]
      USE_TMA: bool                        # [false, true]; also {bool: true}
      TMA_MULTICAST: {values: [1, 2], when: "USE_TMA"}   # conditional parameter
    constraints:              # optional list: a string, or {expr: ..., name: ..., when: ...}
      - "num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K <= smem_per_block"
      - {name: split_k_fits, expr: "SPLIT_K == 1 or BLOCK_K * SPLIT_K <= 4096"}

Rules:

- Param names are Python identifiers (expressions refer to them) and may not be device-fact names.
- Choices are finite (at most ``MAX_CHOICES`` per param), non-empty, without duplicates (``1`` and
  ``1.0`` are duplicates, ``true`` and ``1`` are not); floats must be finite; null is not a choice.
- Every long form also takes ``when``. A ``when`` may use params declared *before* its param and device
  facts. A param whose ``when`` is false is *inactive*: it is absent from the config. So is a param whose
  ``when`` uses a param that is itself inactive.
- A config is valid when every constraint holds. A constraint that uses (in ``expr`` or ``when``) a param
  absent from the config is skipped for that config (counts as satisfied). A constraint's ``when``
  limits it to configs where the ``when`` is true. A constraint that raises while evaluated (division by
  zero, ``log2(0)``, comparing a string with a number, ...) makes the config invalid with that reason.

Expressions are parsed with :mod:`ast` and interpreted by closures built here from a whitelist; user
text is never passed to ``eval``/``exec``/``compile``. Allowed: int/float/bool literals and string
literals (to compare with string choices), names (the space's params and the device facts of
``autotune.env.FACT_NAMES``), ``+ - * / // % **`` (exponent at most 64 in magnitude, integer results at
most 4096 bits; arithmetic on strings is an evaluation error), unary ``- + not``, comparisons ``== != <
<= > >=`` (chained too), ``and``/``or``, ``x if c else y``, and calls to ``min max abs ceil floor log2``.
Booleans are Python's ``True``/``False``. Anything else (attributes, subscripts, lambdas,
comprehensions, other calls, ``in``/``is``, bit operators), unknown names and syntax errors are
rejected when the space is loaded, with a :class:`SpaceError` naming the source and the param or
constraint.

YAML reads unquoted ``on``/``off``/``yes``/``no`` as booleans: quote them to mean strings.

API: :func:`load_space_dict` (file -> raw mapping), :meth:`Space.from_dict` / :meth:`Space.from_yaml` /
:func:`load_space` (validated :class:`Space`), then ``enumerate``/``count``/``sample`` over valid configs,
``check``/``is_valid``/``normalize`` for one config, ``to_dict``/``hash`` for identity. ``facts`` is a
plain ``{name: int}`` mapping (``autotune.env.device_facts`` or ``DEVICE_PRESETS``); a fact an
expression needs but ``facts`` lacks is a :class:`SpaceError`.

Identity: :meth:`Space.hash` is the sha256 of the canonical JSON of the normalized definition (name,
params in order with their choices and ``when``, constraints with explicit names), expressions written
in canonical form (``ast.unparse``). YAML formatting, comments, spacing inside expressions, the
short/long spelling of a param and ``description`` do not change it; a choice, an order, a ``when`` or
a constraint does.
"""

from __future__ import annotations

import ast
import hashlib
import json
import keyword
import math
import operator
import os
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .env import FACT_NAMES
from .errors import SpaceError

Value = int | float | str | bool
Env = Mapping[str, Any]

MAX_CHOICES = 100_000  # per param: a range this large is a typo, and would make enumeration hopeless
MAX_EXPR_CHARS = 4000
MAX_POW_EXPONENT = 64
MAX_INT_BITS = 4096  # caps what ** can build, so an expression cannot eat memory or time
FORMAT_VERSION = 1  # part of the hash: bump if the meaning of a normalized definition changes

_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int | None]] = {
    # name: (function, min args, max args)
    "min": (min, 2, None),
    "max": (max, 2, None),
    "abs": (abs, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "floor": (math.floor, 1, 1),
    "log2": (math.log2, 1, 1),
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_NODE_NAMES = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.NamedExpr: "assignment expressions",
    ast.JoinedStr: "f-strings",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Set: "sets",
    ast.Dict: "dicts",
    ast.Starred: "starred arguments",
}
#: what an expression may raise for a particular config; anything else would be a bug here
_EVAL_ERRORS = (ArithmeticError, ValueError, TypeError, RecursionError)


# --------------------------------------------------------------------------------------------------
# expressions


class _Reject(Exception):
    """An expression uses something outside the whitelist (caught and re-raised as SpaceError)."""


def _num(x: Any) -> Any:
    # Strings are allowed as literals only to compare with string choices; "x" * 10**9 must not run.
    if isinstance(x, str):
        raise TypeError(f"arithmetic on a string ({x!r})")
    return x


def _pow(a: Any, b: Any) -> Any:
    a, b = _num(a), _num(b)
    if abs(b) > MAX_POW_EXPONENT:
        raise OverflowError(f"exponent {b} too large (at most {MAX_POW_EXPONENT})")
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a).bit_length() * b > MAX_INT_BITS:
        raise OverflowError(f"{a} ** {b} is too large")
    r = a**b
    if isinstance(r, complex):
        raise ValueError(f"{a} ** {b} is not a real number")
    return r


def _build(node: ast.AST, names: set[str]) -> Callable[[Env], Any]:
    """Turn a whitelisted AST into a closure ``env -> value``; collect the names it reads."""
    if isinstance(node, ast.Constant):
        v = node.value
        if type(v) not in (int, float, bool, str):
            raise _Reject(f"the literal {v!r} is not allowed")
        return lambda env: v
    if isinstance(node, ast.Name):
        names.add(node.id)
        return operator.itemgetter(node.id)
    if isinstance(node, ast.BinOp):
        left, right = _build(node.left, names), _build(node.right, names)
        if isinstance(node.op, ast.Pow):
            return lambda env: _pow(left(env), right(env))
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise _Reject(f"the operator {type(node.op).__name__} is not allowed")
        if isinstance(node.op, ast.Mult | ast.Mod):  # the ones that build big strings ("x" * n, "%0999999d")
            return lambda env: op(_num(left(env)), _num(right(env)))
        return lambda env: op(left(env), right(env))  # on strings these stay small or raise TypeError
    if isinstance(node, ast.UnaryOp):
        arg = _build(node.operand, names)
        if isinstance(node.op, ast.Not):
            return lambda env: not arg(env)
        if isinstance(node.op, ast.USub):
            return lambda env: -_num(arg(env))
        if isinstance(node.op, ast.UAdd):
            return lambda env: +_num(arg(env))
        raise _Reject(f"the operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.BoolOp):
        parts = [_build(v, names) for v in node.values]
        want = isinstance(node.op, ast.Or)  # `or` stops at the first truthy value, `and` at a falsy one

        def boolop(env: Env) -> Any:
            r: Any = None
            for part in parts:
                r = part(env)
                if bool(r) is want:
                    return r
            return r

        return boolop
    if isinstance(node, ast.Compare):
        first = _build(node.left, names)
        rest = []
        for op_node, comp in zip(node.ops, node.comparators, strict=True):
            op = _CMPOPS.get(type(op_node))
            if op is None:
                raise _Reject(f"the comparison {type(op_node).__name__} is not allowed")
            rest.append((op, _build(comp, names)))
        if len(rest) == 1:  # the common case, without the loop
            op1, second = rest[0]
            return lambda env: op1(first(env), second(env))

        def compare(env: Env) -> bool:
            a = first(env)
            for op, g in rest:
                b = g(env)
                if not op(a, b):
                    return False
                a = b
            return True

        return compare
    if isinstance(node, ast.IfExp):
        test, body, orelse = _build(node.test, names), _build(node.body, names), _build(node.orelse, names)
        return lambda env: body(env) if test(env) else orelse(env)
    if isinstance(node, ast.Call):
        fname = node.func.id if isinstance(node.func, ast.Name) else None
        if fname not in _FUNCTIONS or node.keywords:
            what = fname or ast.unparse(node.func)
            raise _Reject(
                f"the call {what}(...) is not allowed (allowed: {', '.join(_FUNCTIONS)}, no keywords)"
            )
        fn, lo, hi = _FUNCTIONS[fname]
        if len(node.args) < lo or (hi is not None and len(node.args) > hi):
            raise _Reject(
                f"{fname}() takes {lo if lo == hi else f'at least {lo}'} argument(s), got {len(node.args)}"
            )
        args = [_build(a, names) for a in node.args]
        if len(args) == 1:
            one = args[0]
            return lambda env: fn(_num(one(env)))
        return lambda env: fn(*[_num(a(env)) for a in args])
    what = _NODE_NAMES.get(type(node), type(node).__name__)
    raise _Reject(f"{what} not allowed")


class _Expr:
    """A parsed, whitelisted expression with the params and facts it reads."""

    __slots__ = ("text", "canon", "params", "facts", "fn")

    def __init__(self, text: str, where: str, allowed_params: Callable[[str], str | None]):
        """``allowed_params(name)`` returns None if the param may be used here, else why not."""
        if not isinstance(text, str) or not text.strip():
            raise SpaceError(f"{where}: expected a non-empty expression string (got {text!r})")
        if len(text) > MAX_EXPR_CHARS:
            raise SpaceError(f"{where}: expression longer than {MAX_EXPR_CHARS} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
            names: set[str] = set()
            self.fn = _build(tree.body, names)
            self.canon = ast.unparse(tree)
        except SyntaxError as exc:
            col = f" at column {exc.offset}" if exc.offset else ""
            raise SpaceError(f"{where}: syntax error in {text!r}{col}: {exc.msg}") from None
        except _Reject as exc:
            raise SpaceError(f"{where}: {exc} in {text!r}") from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise SpaceError(f"{where}: cannot parse {text!r}: {type(exc).__name__}: {exc}") from None
        for n in sorted(names):
            if n not in FACT_NAMES and (why := allowed_params(n)):
                raise SpaceError(f"{where}: {why} in {text!r}")
        self.text = text
        self.facts = frozenset(n for n in names if n in FACT_NAMES)
        self.params = frozenset(names - self.facts)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ZeroDivisionError):  # Python words it three ways
        return "division by zero"
    return str(exc) or type(exc).__name__


# --------------------------------------------------------------------------------------------------
# params and constraints

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
                f"param {self.name}: when {self.when!r} uses device fact {missing[0]!r}, not given"
            )
        try:
            return self._active(config, {**(facts or {}), **config})
        except _EVAL_ERRORS as exc:
            raise SpaceError(
                f"param {self.name}: when {self.when!r} cannot be evaluated: {_describe(exc)}"
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
        return f"{self.name!r} ({self.expr})" if self.named else repr(self.expr)

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
        return f"constraint {self.label} is false with " + ", ".join(f"{n}={env[n]!r}" for n in used)


# --------------------------------------------------------------------------------------------------
# parsing a definition


def _check_choices(values: Any, where: str) -> list[Value]:
    if not isinstance(values, list | tuple):
        raise SpaceError(f"{where}: values must be a list (got {values!r})")
    if not values:
        raise SpaceError(f"{where}: no choices (empty list)")
    if len(values) > MAX_CHOICES:
        raise SpaceError(f"{where}: {len(values)} choices; at most {MAX_CHOICES}")
    seen: set[Any] = set()
    for v in values:
        key = _choice_key(v)
        if key is None:
            raise SpaceError(f"{where}: choice {v!r} is not a number, string or bool")
        if isinstance(v, float) and not math.isfinite(v):
            raise SpaceError(f"{where}: choice {v!r} is not a finite number")
        if key in seen:
            raise SpaceError(f"{where}: duplicate choice {v!r}")
        seen.add(key)
    return list(values)


def _bounds(arg: Any, kind: str, where: str) -> tuple[int, int]:
    ok = isinstance(arg, list | tuple) and len(arg) == 2
    if not ok or any(isinstance(x, bool) or not isinstance(x, int) for x in arg):
        raise SpaceError(f"{where}: {kind} must be [low, high] with integer bounds (got {arg!r})")
    lo, hi = arg
    if kind == "pow2":
        for x in (lo, hi):
            if x < 1 or x & (x - 1):
                raise SpaceError(f"{where}: pow2 bounds must be powers of two (got {x})")
    if lo > hi:
        raise SpaceError(f"{where}: {kind} bounds are the wrong way round: low {lo} > high {hi}")
    return lo, hi


_PARAM_KINDS = ("values", "pow2", "range", "bool")


def _parse_param(name: Any, spec: Any, order: list[str], src: str) -> Param:
    where = f"{src}: param {name}"
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise SpaceError(f"{src}: param {name!r}: the name must be a Python identifier (expressions use it)")
    if name in FACT_NAMES:
        raise SpaceError(f"{where}: the name clashes with the device fact {name} ({FACT_NAMES[name]})")
    when_text = None
    if spec == "bool":
        values: Any = [False, True]
    elif isinstance(spec, list | tuple):
        values = spec
    elif isinstance(spec, Mapping):
        extra = sorted(str(k) for k in spec if k not in (*_PARAM_KINDS, "step", "when"))
        if extra:
            raise SpaceError(
                f"{where}: unknown key(s) {', '.join(extra)} (expected one of values, pow2, range, bool; "
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
            values = arg
        elif kind == "bool":
            if arg is not True:
                raise SpaceError(f"{where}: write bool: true (got bool: {arg!r})")
            values = [False, True]
        elif kind == "pow2":
            lo, hi = _bounds(arg, kind, where)
            values = [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
        else:
            lo, hi = _bounds(arg, kind, where)
            step = spec.get("step", 1)
            if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                raise SpaceError(f"{where}: step must be a positive integer (got {step!r})")
            if (hi - lo) // step + 1 > MAX_CHOICES:
                raise SpaceError(f"{where}: range has {(hi - lo) // step + 1} values; at most {MAX_CHOICES}")
            values = list(range(lo, hi + 1, step))
        when_text = spec.get("when")
    else:
        raise SpaceError(
            f"{where}: bad spec {spec!r}: expected a list of choices, a mapping with values/pow2/range/bool, "
            "or 'bool'"
        )
    choices = _check_choices(values, where)
    when = None
    if when_text is not None:
        before = order[: order.index(name)]

        def allowed(n: str) -> str | None:
            if n in before:
                return None
            if n == name:
                return f"{n} is the param itself"
            if n in order:
                return f"{n} is declared after {name} (a when may only use params declared before it)"
            return f"unknown name {n!r} (known here: {', '.join(before) or 'no params'}; device facts)"

        when = _Expr(when_text, f"{where}: when", allowed)
    return Param(name, choices, when)


def _parse_constraint(i: int, raw: Any, order: list[str], src: str) -> Constraint:
    def allowed(n: str) -> str | None:
        if n in order:
            return None
        return f"unknown name {n!r} (known: params {', '.join(order)}; device facts {', '.join(FACT_NAMES)})"

    if isinstance(raw, str):
        return Constraint(_Expr(raw, f"{src}: constraint {raw!r}", allowed))
    if not isinstance(raw, Mapping):
        raise SpaceError(
            f"{src}: constraint #{i + 1}: expected an expression string or a mapping (got {raw!r})"
        )
    extra = sorted(str(k) for k in raw if k not in ("expr", "name", "when"))
    name = raw.get("name")
    label = f"constraint {name}" if isinstance(name, str) and name.strip() else f"constraint #{i + 1}"
    if extra:
        raise SpaceError(f"{src}: {label}: unknown key(s) {', '.join(extra)} (expected expr, name, when)")
    if "expr" not in raw:
        raise SpaceError(f"{src}: {label}: missing expr")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise SpaceError(f"{src}: {label}: name must be a non-empty string (got {name!r})")
    if name is None:
        label = f"constraint {raw['expr']!r}"
    expr = _Expr(raw["expr"], f"{src}: {label}", allowed)
    when = _Expr(raw["when"], f"{src}: {label}: when", allowed) if raw.get("when") is not None else None
    return Constraint(expr, name, when)


# --------------------------------------------------------------------------------------------------
# the space


class Space:
    """A validated search space. Build with :meth:`from_dict`, :meth:`from_yaml` or :func:`load_space`."""

    def __init__(
        self,
        name: str,
        params: Sequence[Param],
        constraints: Sequence[Constraint] = (),
        source: str = "<inline>",
        description: str | None = None,
    ):
        self.name, self.source, self.description = name, source, description
        self.params: list[Param] = list(params)
        self.constraints: list[Constraint] = list(constraints)
        self._index = {p.name: i for i, p in enumerate(self.params)}
        conditional = {p.name for p in self.params if p.when is not None}
        # Each constraint is checked as soon as the last param it uses is bound (its "stage"), which
        # prunes enumeration early; constraints on facts alone are checked once, up front.
        self._stage: list[list[Constraint]] = [[] for _ in self.params]
        self._fact_only: list[Constraint] = []
        for c in self.constraints:
            c._cond = tuple(sorted(c._params & conditional))
            if c._params:
                self._stage[max(self._index[p] for p in c._params)].append(c)
            else:
                self._fact_only.append(c)
        # Which device facts are needed, and by what (for the "missing fact" error); True: by a `when`.
        self._fact_users: dict[str, tuple[str, bool]] = {}
        for p in self.params:
            for f in sorted(p._when.facts if p._when else ()):
                self._fact_users.setdefault(f, (f"param {p.name} (when {p.when!r})", True))
        for c in self.constraints:
            for f in sorted(c._expr.facts | (c._when.facts if c._when else frozenset())):
                self._fact_users.setdefault(f, (f"constraint {c.label}", False))

    # ---- construction

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<inline>") -> Space:
        src = str(source)
        if not isinstance(d, Mapping):
            raise SpaceError(f"{src}: a search space must be a mapping (got {type(d).__name__})")
        extra = sorted(str(k) for k in d if k not in ("name", "description", "params", "constraints"))
        if extra:
            raise SpaceError(
                f"{src}: unknown key(s) {', '.join(extra)} (expected name, description, params, constraints)"
            )
        name = d.get("name")
        if not isinstance(name, str) or not name.strip():
            raise SpaceError(f"{src}: missing or empty 'name' (a string)")
        description = d.get("description")
        if description is not None and not isinstance(description, str):
            raise SpaceError(f"{src}: description must be a string")
        raw_params = d.get("params")
        if raw_params is None:
            raise SpaceError(f"{src}: missing 'params'")
        if not isinstance(raw_params, Mapping):
            raise SpaceError(
                f"{src}: params must be a mapping of name: choices (got {type(raw_params).__name__})"
            )
        if not raw_params:
            raise SpaceError(f"{src}: params is empty")
        order = [k for k in raw_params if isinstance(k, str)]
        params = [_parse_param(k, v, order, src) for k, v in raw_params.items()]
        raw_cons = d.get("constraints")
        if raw_cons is None:
            raw_cons = []
        if not isinstance(raw_cons, list | tuple):
            raise SpaceError(f"{src}: constraints must be a list (got {type(raw_cons).__name__})")
        constraints = [_parse_constraint(i, c, order, src) for i, c in enumerate(raw_cons)]
        names = [c.name for c in constraints if c.named]
        if dup := next((n for n in names if names.count(n) > 1), None):
            raise SpaceError(f"{src}: constraint {dup}: name used twice")
        return cls(name.strip(), params, constraints, src, description)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> Space:
        return cls.from_dict(load_space_dict(path), source=str(path))

    # ---- identity

    def to_dict(self) -> dict[str, Any]:
        """The normalized definition (long forms only; JSON-serializable; ``from_dict`` accepts it)."""
        d: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            d["description"] = self.description
        params: dict[str, Any] = {}
        for p in self.params:
            params[p.name] = {"values": list(p.choices)}
            if p.when is not None:
                params[p.name]["when"] = p.when
        d["params"] = params
        cons = []
        for c in self.constraints:
            item: dict[str, Any] = {"expr": c.expr}
            if c.named:
                item["name"] = c.name
            if c.when is not None:
                item["when"] = c.when
            cons.append(item)
        d["constraints"] = cons
        return d

    def _canonical(self) -> dict[str, Any]:
        # Params are a list (JSON objects are sorted below, and param order matters).
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "params": [
                {"name": p.name, "values": list(p.choices), "when": p._when.canon if p._when else None}
                for p in self.params
            ],
            "constraints": [
                {
                    "expr": c._expr.canon,
                    "name": c.name if c.named else None,
                    "when": c._when.canon if c._when else None,
                }
                for c in self.constraints
            ],
        }

    def hash(self) -> str:
        text = json.dumps(self._canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        return f"Space({self.name!r}, params={[p.name for p in self.params]}, source={self.source!r})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        try:
            return self.params[self._index[name]]
        except KeyError:
            raise SpaceError(f"{self.source}: no param {name!r} (params: {', '.join(self.names)})") from None

    # ---- configs

    def _env(self, facts: Mapping[str, Any] | None, whens_only: bool = False) -> dict[str, Any]:
        """A fresh evaluation environment holding ``facts``; SpaceError if a needed fact is missing."""
        facts = facts or {}
        for f, (user, by_when) in self._fact_users.items():
            if f not in facts and (by_when or not whens_only):
                given = ", ".join(sorted(facts)) or "none"
                raise SpaceError(
                    f"{self.source}: {user} uses device fact {f!r}, which is missing (given: {given})"
                )
        return dict(facts)

    def normalize(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Coerce JSON-ish values to the choices they stand for (0/1 -> bool for a bool param, 64.0 -> 64,
        numpy scalars; never "64" -> 64) and order keys as declared. Does not check activity or
        constraints (see :meth:`check`)."""
        if not isinstance(config, Mapping):
            raise SpaceError(f"{self.source}: a config must be a mapping (got {type(config).__name__})")
        for k in config:
            if k not in self._index:
                raise SpaceError(f"{self.source}: unknown param {k!r} (params: {', '.join(self.names)})")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in config:
                v = p._match(config[p.name])
                if v is _NO:
                    raise SpaceError(
                        f"{self.source}: param {p.name}: {config[p.name]!r} is not one of {list(p.choices)!r}"
                    )
                out[p.name] = v
        return out

    def check(self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> list[str]:
        """Why ``config`` is not a valid point of this space (empty: valid). Values are judged as
        :meth:`normalize` would coerce them. Constraints are evaluated only when the config is
        structurally right (right keys, known choices), since they would fail noisily otherwise."""
        env = self._env(facts)
        if not isinstance(config, Mapping):
            return [f"a config must be a mapping (got {type(config).__name__})"]
        reasons = [f"unknown param {k!r}" for k in config if k not in self._index]
        cfg: dict[str, Any] = {}
        unknown: set[str] = set()  # params whose status cannot be judged (bad value upstream)
        for p in self.params:
            if p._when is not None and p._when.params & unknown:
                unknown.add(p.name)
                continue
            try:
                act = p._active(cfg, env)
            except _EVAL_ERRORS as exc:
                reasons.append(f"param {p.name}: when {p.when!r} cannot be evaluated: {_describe(exc)}")
                unknown.add(p.name)
                continue
            given = p.name in config
            if act and not given:
                reasons.append(f"missing param {p.name}")
            elif given and not act:
                reasons.append(f"param {p.name} is given but inactive (its when {p.when!r} is false)")
            elif given:
                v = p._match(config[p.name])
                if v is _NO:
                    reasons.append(f"param {p.name}: {config[p.name]!r} is not one of {list(p.choices)!r}")
                    unknown.add(p.name)
                else:
                    cfg[p.name] = env[p.name] = v
        if reasons:
            return reasons
        return [r for c in self.constraints if (r := c._violation(cfg, env))]

    def is_valid(self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> bool:
        return not self.check(config, facts)

    def _walk(self, env: dict[str, Any], build: bool) -> Iterator[dict[str, Any] | None]:
        """Depth-first product in declaration order, pruning with each constraint at its stage."""
        params, stage, n = self.params, self._stage, len(self.params)
        cfg: dict[str, Any] = {}
        if not all(c._ok(cfg, env) for c in self._fact_only):
            return

        def rec(i: int) -> Iterator[dict[str, Any] | None]:
            p, last = params[i], i == n - 1
            try:
                act = p._active(cfg, env)
            except _EVAL_ERRORS:
                return  # a when that cannot be evaluated makes every completion invalid
            if not act:
                # every constraint staged here uses p, which is absent: all skipped
                if last:
                    yield dict(cfg) if build else None
                else:
                    yield from rec(i + 1)
                return
            name, checks = p.name, stage[i]
            for v in p.choices:
                cfg[name] = env[name] = v
                for c in checks:
                    if not c._ok(cfg, env):
                        break
                else:
                    if last:
                        yield dict(cfg) if build else None
                    else:
                        yield from rec(i + 1)
            # Removing the key keeps later keys inserted after this one: dicts come out in declared order.
            del cfg[name], env[name]

        yield from rec(0)

    def enumerate(self, facts: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every valid config, in a deterministic order (the product in declaration order)."""
        return self._walk(self._env(facts), build=True)  # type: ignore[return-value]

    def count(self, facts: Mapping[str, Any] | None = None) -> int:
        return sum(1 for _ in self._walk(self._env(facts), build=False))

    def size_unconstrained(self, facts: Mapping[str, Any] | None = None) -> int:
        """Configs before constraints (inactive params do not multiply). ``facts`` are needed only if a
        ``when`` uses one. Branches only on params some ``when`` reads, so it is fast on large spaces."""
        env = self._env(facts, whens_only=True)
        read = set().union(*(p._when.params for p in self.params if p._when))
        params, n = self.params, len(self.params)
        cfg: dict[str, Any] = {}

        def rec(i: int) -> int:
            if i == n:
                return 1
            p = params[i]
            try:
                act = p._active(cfg, env)
            except _EVAL_ERRORS:
                return 0
            if not act:
                return rec(i + 1)
            if p.name not in read:
                return len(p.choices) * rec(i + 1)
            total = 0
            for v in p.choices:
                cfg[p.name] = env[p.name] = v
                total += rec(i + 1)
            del cfg[p.name], env[p.name]
            return total

        return rec(0)

    def sample(
        self, rng: random.Random, facts: Mapping[str, Any] | None = None, max_tries: int = 10000
    ) -> dict[str, Any]:
        """A random valid config: each active param drawn uniformly, rejected on the first violated
        constraint (uniform over valid configs when there are no conditionals)."""
        env0 = self._env(facts)
        if all(c._ok({}, env0) for c in self._fact_only):
            for _ in range(max_tries):
                env, cfg, ok = dict(env0), {}, True
                for i, p in enumerate(self.params):
                    try:
                        if not p._active(cfg, env):
                            continue
                    except _EVAL_ERRORS:
                        ok = False
                        break
                    cfg[p.name] = env[p.name] = rng.choice(p.choices)
                    if not all(c._ok(cfg, env) for c in self._stage[i]):
                        ok = False
                        break
                if ok:
                    return cfg
        raise SpaceError(
            f"{self.source}: no valid config found in {max_tries} random tries "
            f"(count() says how many valid configs there are under these facts)"
        )


# --------------------------------------------------------------------------------------------------
# files


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently: a param would vanish)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: SafeLoader reports it
                continue
            if dup:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicate key {key!r}",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def load_space_dict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and YAML-parse a space file; the raw mapping (validate it with :meth:`Space.from_dict`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpaceError(f"{p}: no such search-space file") from None
    except IsADirectoryError:
        raise SpaceError(f"{p}: is a directory, not a search-space file") from None
    except UnicodeDecodeError as exc:
        raise SpaceError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SpaceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise SpaceError(f"{p}{line}: YAML error: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SpaceError(f"{p}: YAML error: {exc}") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpaceError(f"{p}: a search space must be a YAML mapping (got {got})")
    return data


def default_space_dirs() -> list[Path]:
    """Where :func:`load_space` looks for ``<name>.yaml``: $AUTOTUNE_SPACES_DIR, ./search_spaces, and
    the search_spaces folder next to this package."""
    dirs = [Path(os.environ["AUTOTUNE_SPACES_DIR"])] if os.environ.get("AUTOTUNE_SPACES_DIR") else []
    return dirs + [Path.cwd() / "search_spaces", Path(__file__).resolve().parent.parent / "search_spaces"]


def load_space(
    path_or_name: str | os.PathLike[str], dirs: Sequence[str | os.PathLike[str]] | None = None
) -> Space:
    """A space from a YAML path, or by name from ``dirs`` (default :func:`default_space_dirs`)."""
    text = str(path_or_name)
    if (
        isinstance(path_or_name, os.PathLike)
        or text.endswith((".yaml", ".yml"))
        or "/" in text
        or os.sep in text
    ):
        return Space.from_yaml(text)
    candidates = [Path(d) / f"{text}.yaml" for d in (dirs if dirs is not None else default_space_dirs())]
    for c in candidates:
        if c.is_file():
            return Space.from_yaml(c)
    raise SpaceError(f"search space {text!r} not found (looked in {', '.join(str(c) for c in candidates)})")
