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
  Param and constraint names are at most ``MAX_NAME_CHARS`` (200) characters.
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
:func:`load_space` (validated :class:`Space`), then ``size_unconstrained``/``size_info``/``enumerable`` for
the size, ``enumerate``/``count`` (small spaces) and ``sample``/``sample_unique``/``find_valid`` (any
size) over valid configs, ``check``/``is_valid``/``normalize`` for one config, ``to_dict``/``hash`` for
identity. ``facts`` is a
plain ``{name: int}`` mapping (``autotune.env.device_facts`` or ``DEVICE_PRESETS``); a fact an
expression needs but ``facts`` lacks is a :class:`SpaceError`.

Identity: :meth:`Space.hash` is the sha256 of the canonical JSON of the normalized definition (name,
params in order with their choices and ``when``, constraints with explicit names), expressions written
in canonical form (``ast.unparse``). YAML formatting, comments, spacing inside expressions, the
short/long spelling of a param and ``description`` do not change it; a choice, an order, a ``when`` or
a constraint does.

Size limits (so that no space file, however large or hostile, can hang or exhaust memory):

- ``MAX_ENUMERATE`` (1,000,000) combinations *before constraints* is the most that :meth:`Space.count`
  (and :meth:`Space.enumerate` given ``limit=``) will walk; past it they raise :class:`SpaceError` saying
  how big the space is. :meth:`Space.size_unconstrained` is computed without enumerating (a product over
  params; conditionals counted exactly by a memoized count, or bounded above by the plain product when
  that count would take more than ``SIZE_STEP_BUDGET`` steps). A search enumerates a space only when
  :meth:`Space.enumerable` (size at most ``MAX_ENUMERATE``) and samples a larger one
  (:meth:`Space.sample`, :meth:`Space.sample_unique`: rejection sampling, never the full product).
- :meth:`Space.find_valid` finds a valid config, or shows there is none, in bounded time (in order with
  pruning for ``FIND_NODE_BUDGET`` choices tried, then ``FIND_TRIES`` random tries, at most
  ``FIND_TIME_BUDGET_S`` seconds): an unsatisfiable huge space is an error, not a hang.
- At most ``MAX_PARAMS`` params. YAML files: at most ``MAX_FILE_BYTES``, nesting at most
  ``MAX_YAML_DEPTH`` deep, at most ``MAX_YAML_NODES`` nodes once aliases are expanded (an "alias bomb"
  is refused in milliseconds), no recursive aliases.
- Error messages quote user values shortened (:func:`_short`): one line, never a whole structure.
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
import reprlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import yaml

from autotune import settings
from autotune.env import FACT_NAMES
from autotune.errors import SpaceError

Value = int | float | str | bool
Env = Mapping[str, Any]

MAX_CHOICES = 100_000  # per param: a range this large is a typo, and would make enumeration hopeless
MAX_PARAMS = 256  # enumeration and counting recurse once per param
MAX_NAME_CHARS = 200  # param and constraint names (they appear in every message about them)
#: combinations (before constraints) that count() / enumerate(limit=...) walk; larger spaces are sampled
MAX_ENUMERATE = 1_000_000
SIZE_STEP_BUDGET = 100_000  # steps size_unconstrained spends counting conditionals exactly, then bounds
FIND_NODE_BUDGET = 200_000  # choices find_valid tries in order (depth first) before random tries
FIND_TRIES = 20_000  # random tries find_valid makes after that
FIND_TIME_BUDGET_S = 10.0  # find_valid's overall time limit
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_YAML_DEPTH = 64  # nesting of YAML collections, aliases expanded
MAX_YAML_NODES = 1_000_000  # YAML nodes once aliases are expanded (an alias bomb expands to billions)
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
# messages

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


# --------------------------------------------------------------------------------------------------
# expressions


class _Reject(Exception):
    """An expression uses something outside the whitelist (caught and re-raised as SpaceError)."""


class _OutOfBudget(Exception):
    """A bounded walk or count ran out of steps or time."""


class _Budget:
    """Steps (and optionally a deadline, checked every 1024 steps) for a bounded walk or count."""

    __slots__ = ("left", "used", "deadline")

    def __init__(self, steps: int, deadline: float | None = None):
        self.left, self.used, self.deadline = steps, 0, deadline

    def step(self) -> None:
        if self.left <= 0 or (
            self.deadline is not None and not self.used & 1023 and time.monotonic() > self.deadline
        ):
            raise _OutOfBudget
        self.left -= 1
        self.used += 1

    def each(self, items: Iterable[Any]) -> Iterator[Any]:
        """``items``, one step each."""
        for item in items:
            self.step()
            yield item


def _num(x: Any) -> Any:
    # Strings are allowed as literals only to compare with string choices; "x" * 10**9 must not run.
    if isinstance(x, str):
        raise TypeError(f"arithmetic on a string ({_short(x, 40)})")
    return x


def _pow(a: Any, b: Any) -> Any:
    a, b = _num(a), _num(b)
    if abs(b) > MAX_POW_EXPONENT:
        raise OverflowError(f"exponent {_short(b, 40)} too large (at most {MAX_POW_EXPONENT})")
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a).bit_length() * b > MAX_INT_BITS:
        raise OverflowError(f"{_short(a, 40)} ** {b} is too large")
    r = a**b
    if isinstance(r, complex):
        raise ValueError(f"{_short(a, 40)} ** {_short(b, 40)} is not a real number")
    return r


def _build(node: ast.AST, names: set[str]) -> Callable[[Env], Any]:
    """Turn a whitelisted AST into a closure ``env -> value``; collect the names it reads."""
    if isinstance(node, ast.Constant):
        v = node.value
        if type(v) not in (int, float, bool, str):
            raise _Reject(f"the literal {_short(v, 40)} is not allowed")
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
            what = fname or _clip(ast.unparse(node.func), 40)
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
            raise SpaceError(f"{where}: expected a non-empty expression string (got {_short(text)})")
        if len(text) > MAX_EXPR_CHARS:
            raise SpaceError(f"{where}: expression longer than {MAX_EXPR_CHARS} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
            names: set[str] = set()
            self.fn = _build(tree.body, names)
            self.canon = ast.unparse(tree)
        except SyntaxError as exc:
            col = f" at column {exc.offset}" if exc.offset else ""
            raise SpaceError(f"{where}: syntax error in {_short(text, 200)}{col}: {_clip(exc.msg)}") from None
        except _Reject as exc:
            raise SpaceError(f"{where}: {_clip(str(exc))} in {_short(text, 200)}") from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise SpaceError(
                f"{where}: cannot parse {_short(text, 200)}: {type(exc).__name__}: {_clip(str(exc))}"
            ) from None
        for n in sorted(names):
            if n not in FACT_NAMES and (why := allowed_params(n)):
                raise SpaceError(f"{where}: {why} in {_short(text, 200)}")
        self.text = text
        self.facts = frozenset(n for n in names if n in FACT_NAMES)
        self.params = frozenset(names - self.facts)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ZeroDivisionError):  # Python words it three ways
        return "division by zero"
    return _clip(str(exc)) or type(exc).__name__


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
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise SpaceError(
            f"{src}: param {_short(name)}: the name must be a Python identifier (expressions use it)"
        )
    if len(name) > MAX_NAME_CHARS:
        raise SpaceError(f"{src}: param {_short(name)}: name longer than {MAX_NAME_CHARS} characters")
    where = f"{src}: param {name}"
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
            values = arg
        elif kind == "bool":
            if arg is not True:
                raise SpaceError(f"{where}: write bool: true (got bool: {_short(arg)})")
            values = [False, True]
        elif kind == "pow2":
            lo, hi = _bounds(arg, kind, where)
            values = [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
        else:
            lo, hi = _bounds(arg, kind, where)
            step = spec.get("step", 1)
            if isinstance(step, bool) or not isinstance(step, int) or step < 1:
                raise SpaceError(f"{where}: step must be a positive integer (got {_short(step)})")
            if (hi - lo) // step + 1 > MAX_CHOICES:
                raise SpaceError(
                    f"{where}: range has {format_count((hi - lo) // step + 1)} values; at most {MAX_CHOICES}"
                )
            values = list(range(lo, hi + 1, step))
        when_text = spec.get("when")
    else:
        raise SpaceError(
            f"{where}: bad spec {_short(spec)}: expected a list of choices, a mapping with values/pow2/range/bool, "
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
            return f"unknown name {n!r} (known here: {_names(before) or 'no params'}; device facts)"

        when = _Expr(when_text, f"{where}: when", allowed)
    return Param(name, choices, when)


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
                self._fact_users.setdefault(f, (f"param {p.name} (when {_short(p.when, 200)})", True))
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
                f"{src}: unknown key(s) {_names(extra)} (expected name, description, params, constraints)"
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
        if len(raw_params) > MAX_PARAMS:
            raise SpaceError(f"{src}: {len(raw_params)} params; at most {MAX_PARAMS}")
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
            raise SpaceError(
                f"{self.source}: no param {_short(name)} (params: {_names(self.names)})"
            ) from None

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
                raise SpaceError(f"{self.source}: unknown param {_short(k)} (params: {_names(self.names)})")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in config:
                v = p._match(config[p.name])
                if v is _NO:
                    raise SpaceError(
                        f"{self.source}: param {p.name}: {_short(config[p.name])} is not one of {_short(list(p.choices), 120)}"
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
        reasons = [f"unknown param {_short(k)}" for k in config if k not in self._index]
        cfg: dict[str, Any] = {}
        unknown: set[str] = set()  # params whose status cannot be judged (bad value upstream)
        for p in self.params:
            if p._when is not None and p._when.params & unknown:
                unknown.add(p.name)
                continue
            try:
                act = p._active(cfg, env)
            except _EVAL_ERRORS as exc:
                reasons.append(
                    f"param {p.name}: when {_short(p.when, 200)} cannot be evaluated: {_describe(exc)}"
                )
                unknown.add(p.name)
                continue
            given = p.name in config
            if act and not given:
                reasons.append(f"missing param {p.name}")
            elif given and not act:
                reasons.append(
                    f"param {p.name} is given but inactive (its when {_short(p.when, 200)} is false)"
                )
            elif given:
                v = p._match(config[p.name])
                if v is _NO:
                    reasons.append(
                        f"param {p.name}: {_short(config[p.name])} is not one of {_short(list(p.choices), 120)}"
                    )
                    unknown.add(p.name)
                else:
                    cfg[p.name] = env[p.name] = v
        if reasons:
            return reasons
        return [r for c in self.constraints if (r := c._violation(cfg, env))]

    def is_valid(self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> bool:
        return not self.check(config, facts)

    def _walk(
        self, env: dict[str, Any], build: bool, budget: _Budget | None = None
    ) -> Iterator[dict[str, Any] | None]:
        """Depth-first product in declaration order, pruning with each constraint at its stage. With a
        ``budget``, each choice tried is one step and ``_OutOfBudget`` ends the walk."""
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
            for v in p.choices if budget is None else budget.each(p.choices):
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

    def _refuse_if_large(self, facts: Mapping[str, Any] | None, limit: int | None, what: str) -> None:
        if limit is None:
            return
        size, exact = self.size_info(facts)
        if size > limit:
            raise SpaceError(
                f"{self.source}: {what}: the space has {'' if exact else 'up to '}{format_count(size)} "
                f"combinations before constraints, more than the limit of {format_count(limit)} "
                "(autotune.space.MAX_ENUMERATE); sample it instead"
            )

    def enumerate(
        self, facts: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every valid config, in a deterministic order (the product in declaration order), lazily.

        With ``limit`` (e.g. ``MAX_ENUMERATE``), raises SpaceError up front when the space has more than
        ``limit`` combinations before constraints (so ``list(space.enumerate(facts, limit=...))`` is
        bounded); without it, iterating a huge space may take forever (take a prefix with islice)."""
        env = self._env(facts)
        self._refuse_if_large(facts, limit, "cannot enumerate")
        return self._walk(env, build=True)  # type: ignore[return-value]

    def count(self, facts: Mapping[str, Any] | None = None, limit: int | None = MAX_ENUMERATE) -> int:
        """How many valid configs there are (by enumerating them). Raises SpaceError, at once, when the
        space has more than ``limit`` combinations before constraints (``None``: no limit)."""
        env = self._env(facts)
        self._refuse_if_large(facts, limit, "too large to count exactly")
        return sum(1 for _ in self._walk(env, build=False))

    def enumerable(self, facts: Mapping[str, Any] | None = None, limit: int = MAX_ENUMERATE) -> bool:
        """Whether the space is small enough (at most ``limit`` combinations before constraints) to
        enumerate: what :meth:`count` and ``enumerate(limit=...)`` accept. Larger spaces: sample them."""
        return self.size_unconstrained(facts) <= limit

    def size_unconstrained(self, facts: Mapping[str, Any] | None = None) -> int:
        """Configs before constraints (inactive params do not multiply): exact, or, for conditionals too
        entangled to count in ``SIZE_STEP_BUDGET`` steps, an upper bound (see :meth:`size_info`).
        ``facts`` are needed only if a ``when`` uses one. Never enumerates."""
        return self.size_info(facts)[0]

    def size_info(self, facts: Mapping[str, Any] | None = None) -> tuple[int, bool]:
        """``(size, exact)``: the number of configs before constraints and whether it is exact.

        A product over params; where a ``when`` reads earlier params, the count branches on those params
        only and is memoized on the values the remaining ``when``\\s can still read, so a chain or a
        tree of conditionals costs time linear in the params. If that state space is too big (more than
        ``SIZE_STEP_BUDGET`` steps), the result is the product of all choice counts, an upper bound
        (``exact`` False). Time is bounded either way."""
        env = self._env(facts, whens_only=True)
        params, n = self.params, len(self.params)
        bound = math.prod(len(p.choices) for p in params)
        if all(p._when is None for p in params):
            return bound, True
        # live[i]: the params declared before i that a when at i or later reads (the state at step i)
        live: list[tuple[str, ...]] = [()] * (n + 1)
        reads: set[str] = set()
        for i in range(n - 1, -1, -1):
            if params[i]._when is not None:
                reads |= params[i]._when.params
            live[i] = tuple(sorted(x for x in reads if self._index[x] < i))
        memo: list[dict[tuple[Any, ...], int]] = [{} for _ in range(n)]
        budget = _Budget(SIZE_STEP_BUDGET)
        cfg: dict[str, Any] = {}

        def rec(i: int) -> int:
            if i == n:
                return 1
            budget.step()
            vals = tuple(map(cfg.get, live[i], repeat(_NO)))
            key = (vals, tuple(map(type, vals)))  # types: 1 and True are equal keys, not the same choice
            hit = memo[i].get(key)
            if hit is not None:
                return hit
            p = params[i]
            try:
                act = p._active(cfg, env)
            except _EVAL_ERRORS:
                total = 0
            else:
                if not act:
                    total = rec(i + 1)
                elif p.name not in live[i + 1]:
                    total = len(p.choices) * rec(i + 1)
                else:
                    total = 0
                    for v in p.choices:
                        cfg[p.name] = env[p.name] = v
                        total += rec(i + 1)
                    del cfg[p.name], env[p.name]
            memo[i][key] = total
            return total

        try:
            return rec(0), True
        except _OutOfBudget:
            return bound, False

    def _draw(self, rng: random.Random, env0: Mapping[str, Any]) -> dict[str, Any] | None:
        """One rejection-sampling try: each active param drawn uniformly; None on a violated constraint."""
        env: dict[str, Any] = dict(env0)
        cfg: dict[str, Any] = {}
        for i, p in enumerate(self.params):
            try:
                if not p._active(cfg, env):
                    continue
            except _EVAL_ERRORS:
                return None
            cfg[p.name] = env[p.name] = rng.choice(p.choices)
            for c in self._stage[i]:
                if not c._ok(cfg, env):
                    return None
        return cfg

    def sample(
        self, rng: random.Random, facts: Mapping[str, Any] | None = None, max_tries: int = 10000
    ) -> dict[str, Any]:
        """A random valid config: each active param drawn uniformly, rejected on the first violated
        constraint (uniform over valid configs when there are no conditionals). Never builds the product:
        each try costs one pass over the params. SpaceError after ``max_tries`` failed tries."""
        env0 = self._env(facts)
        if all(c._ok({}, env0) for c in self._fact_only):
            for _ in range(max_tries):
                cfg = self._draw(rng, env0)
                if cfg is not None:
                    return cfg
        raise SpaceError(
            f"{self.source}: no valid config found in {max_tries} random tries "
            "(find_valid() looks harder, in bounded time; count() says how many valid configs a small "
            "space has)"
        )

    def sample_unique(
        self,
        rng: random.Random,
        n: int,
        facts: Mapping[str, Any] | None = None,
        exclude: Iterable[str] = (),
        max_tries: int | None = None,
    ) -> list[dict[str, Any]]:
        """Up to ``n`` distinct random valid configs whose ``autotune.trial.config_hash`` is not in
        ``exclude`` (e.g. the configs already evaluated), by rejection sampling. Makes at most
        ``max_tries`` tries (default ``100 * n + 10000``) and returns fewer configs when they run out
        (a small or nearly exhausted space); never raises for that, and never builds the product."""
        from autotune.trial import config_hash

        env0 = self._env(facts)
        seen = set(exclude)
        out: list[dict[str, Any]] = []
        if n <= 0 or not all(c._ok({}, env0) for c in self._fact_only):
            return out
        for _ in range(100 * n + 10000 if max_tries is None else max_tries):
            cfg = self._draw(rng, env0)
            if cfg is None:
                continue
            h = config_hash(cfg)
            if h not in seen:
                seen.add(h)
                out.append(cfg)
                if len(out) >= n:
                    break
        return out

    def find_valid(
        self,
        facts: Mapping[str, Any] | None = None,
        *,
        node_budget: int = FIND_NODE_BUDGET,
        tries: int = FIND_TRIES,
        time_budget_s: float = FIND_TIME_BUDGET_S,
        rng: random.Random | None = None,
    ) -> dict[str, Any]:
        """A valid config, found in bounded time, or SpaceError saying there is none (or none was found).

        Whatever the size of the space: (1) a constraint on facts alone that is false, or a param (not
        conditional) none of whose choices passes the constraints on it alone, proves there is none;
        (2) a depth-first walk in declaration order with pruning, for up to ``node_budget`` choices
        tried, finds the first valid config in :meth:`enumerate` order, or proves there is none if it
        completes; (3) then up to ``tries`` random tries (``rng``: default seeded, deterministic).
        All within about ``time_budget_s`` seconds; the error says which of these ran."""
        env = self._env(facts)
        for c in self._fact_only:
            if not c._ok({}, env):
                raise SpaceError(f"{self.source}: no valid config: {c._violation({}, env)}")
        started = time.monotonic()
        deadline = started + time_budget_s
        try:  # a proof that is cheap when params have few choices; skipped (not failed) past the budget
            proof = _Budget(node_budget, deadline)
            for i, p in enumerate(self.params):
                alone = [c for c in self._stage[i] if c._params == {p.name}]
                if p._when is not None or not alone:
                    continue
                for v in p.choices:
                    proof.step()
                    if all(c._ok({p.name: v}, {**env, p.name: v}) for c in alone):
                        break
                else:
                    names = _clip("; ".join(c.label for c in alone))
                    raise SpaceError(
                        f"{self.source}: no valid config: no choice of param {p.name} satisfies {names}"
                    )
        except _OutOfBudget:
            pass
        budget = _Budget(node_budget, deadline)
        try:
            for cfg in self._walk(dict(env), build=True, budget=budget):
                return cfg  # type: ignore[return-value]
        except _OutOfBudget:
            pass
        else:
            size, exact = self.size_info(facts)
            every = (
                f"all {format_count(size)} combinations violate" if exact else "every combination violates"
            )
            raise SpaceError(f"{self.source}: no valid config: {every} a constraint")
        visited = budget.used
        rng = rng if rng is not None else random.Random(0)
        done = 0
        while done < tries and time.monotonic() - started < time_budget_s:
            for _ in range(min(256, tries - done)):
                done += 1
                cfg = self._draw(rng, env)
                if cfg is not None:
                    return cfg
        raise SpaceError(
            f"{self.source}: no valid config found in {time.monotonic() - started:.1f} s "
            f"({format_count(visited)} choices tried in order, {format_count(done)} random tries); "
            "the constraints are probably unsatisfiable on these facts"
        )


# --------------------------------------------------------------------------------------------------
# files


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently: a param would vanish),
    nesting deeper than ``MAX_YAML_DEPTH``, recursive aliases, and documents of more than
    ``MAX_YAML_NODES`` nodes once aliases are expanded (an alias bomb), all before constructing."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        # PyYAML composes recursively: a 5,000-deep list would be a RecursionError without this.
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        _check_expansion(node)
        return node

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
                    f"duplicate key {_short(key)}",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a composed document whose aliases expand to more than ``MAX_YAML_NODES`` nodes or
    ``MAX_YAML_DEPTH`` levels, or loop. Iterative and memoized: linear in the composed nodes."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            kids = _children(node)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            depth[nid] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_.discard(nid)
            problem = None
            if size[nid] > MAX_YAML_NODES:
                problem = f"more than {MAX_YAML_NODES:,} nodes once aliases are expanded (an alias bomb?)"
            elif depth[nid] > MAX_YAML_DEPTH:
                problem = f"nested more than {MAX_YAML_DEPTH} levels deep once aliases are expanded"
            if problem:
                raise yaml.composer.ComposerError(None, None, problem, node.start_mark)
            continue
        if nid in size:
            continue
        if nid in open_:
            raise yaml.composer.ComposerError(None, None, "an alias refers to itself", node.start_mark)
        open_.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def load_space_dict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and YAML-parse a space file; the raw mapping (validate it with :meth:`Space.from_dict`)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise SpaceError(f"{p}: larger than {MAX_FILE_BYTES:,} bytes; not a search-space file")
        text = raw.decode("utf-8")
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
        raise SpaceError(f"{p}{line}: YAML error: {_clip(str(exc.problem or exc.context))}") from None
    except yaml.YAMLError as exc:
        raise SpaceError(f"{p}: YAML error: {_clip(str(exc))}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. an integer of over 4300 digits
        raise SpaceError(f"{p}: YAML error: {type(exc).__name__}: {_clip(str(exc))}") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpaceError(f"{p}: a search space must be a YAML mapping (got {got})")
    return data


def default_space_dirs(near: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where a space named ``<name>`` is looked for, in order (the one resolver, for kernel files and
    :func:`load_space` alike): $AUTOTUNE_SPACES_DIR; with ``near`` (a kernel file), the search_spaces folder
    beside it and beside its folder; ./search_spaces; the search_spaces folder next to this package."""
    extra = settings.spaces_dir()
    dirs = [Path(extra)] if extra else []
    if near is not None:
        folder = Path(near).parent
        dirs += [folder / "search_spaces", folder.parent / "search_spaces"]
    dirs += [Path.cwd() / "search_spaces", Path(__file__).resolve().parent.parent / "search_spaces"]
    return list(dict.fromkeys(dirs))


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
    raise SpaceError(
        f"search space {_short(text)} not found (looked in {', '.join(str(c) for c in candidates)})"
    )
