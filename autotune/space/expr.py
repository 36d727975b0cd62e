"""The safe expression evaluator of ``when`` and constraint expressions.

Expressions are parsed with :mod:`ast` and interpreted by closures built here from a whitelist; user
text is never passed to ``eval``/``exec``/``compile``. Allowed: int/float/bool literals and string
literals (to compare with string choices), names (the space's params and the device facts of
``autotune.env.FACT_NAMES``), ``+ - * / // % **`` (exponent at most 64 in magnitude, integer results at
most 4096 bits; arithmetic on strings is an evaluation error), unary ``- + not``, comparisons ``== != <
<= > >=`` (chained too), ``and``/``or``, ``x if c else y``, and calls to ``min max abs ceil floor log2``.
Anything else is rejected when the space is loaded, with a :class:`SpaceError` naming the source and
the param or constraint (see the package docstring for the full rules).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from autotune.env import FACT_NAMES
from autotune.errors import SpaceError
from autotune.space.messages import _clip, _short

Env = Mapping[str, Any]
Closure = Callable[[Env], Any]

MAX_EXPR_CHARS = 4000
MAX_POW_EXPONENT = 64
MAX_INT_BITS = 4096  # caps what ** can build, so an expression cannot eat memory or time

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


class _Reject(Exception):
    """An expression uses something outside the whitelist (caught and re-raised as SpaceError)."""


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


# One builder per whitelisted node type: each turns the node into a closure ``env -> value`` and adds
# the names it reads to ``names``.


def _build_constant(node: ast.Constant, names: set[str]) -> Closure:
    v = node.value
    if type(v) not in (int, float, bool, str):
        raise _Reject(f"the literal {_short(v, 40)} is not allowed")
    return lambda env: v


def _build_name(node: ast.Name, names: set[str]) -> Closure:
    names.add(node.id)
    return operator.itemgetter(node.id)


def _build_binop(node: ast.BinOp, names: set[str]) -> Closure:
    left, right = _build(node.left, names), _build(node.right, names)
    if isinstance(node.op, ast.Pow):
        return lambda env: _pow(left(env), right(env))
    op = _BINOPS.get(type(node.op))
    if op is None:
        raise _Reject(f"the operator {type(node.op).__name__} is not allowed")
    if isinstance(node.op, ast.Mult | ast.Mod):  # the ones that build big strings ("x" * n, "%0999999d")
        return lambda env: op(_num(left(env)), _num(right(env)))
    return lambda env: op(left(env), right(env))  # on strings these stay small or raise TypeError


def _build_unaryop(node: ast.UnaryOp, names: set[str]) -> Closure:
    arg = _build(node.operand, names)
    if isinstance(node.op, ast.Not):
        return lambda env: not arg(env)
    if isinstance(node.op, ast.USub):
        return lambda env: -_num(arg(env))
    if isinstance(node.op, ast.UAdd):
        return lambda env: +_num(arg(env))
    raise _Reject(f"the operator {type(node.op).__name__} is not allowed")


def _build_boolop(node: ast.BoolOp, names: set[str]) -> Closure:
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


def _build_compare(node: ast.Compare, names: set[str]) -> Closure:
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


def _build_ifexp(node: ast.IfExp, names: set[str]) -> Closure:
    test, body, orelse = _build(node.test, names), _build(node.body, names), _build(node.orelse, names)
    return lambda env: body(env) if test(env) else orelse(env)


def _build_call(node: ast.Call, names: set[str]) -> Closure:
    fname = node.func.id if isinstance(node.func, ast.Name) else None
    if fname not in _FUNCTIONS or node.keywords:
        what = fname or _clip(ast.unparse(node.func), 40)
        raise _Reject(f"the call {what}(...) is not allowed (allowed: {', '.join(_FUNCTIONS)}, no keywords)")
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


_BUILDERS: dict[type, Callable[[Any, set[str]], Closure]] = {
    ast.Constant: _build_constant,
    ast.Name: _build_name,
    ast.BinOp: _build_binop,
    ast.UnaryOp: _build_unaryop,
    ast.BoolOp: _build_boolop,
    ast.Compare: _build_compare,
    ast.IfExp: _build_ifexp,
    ast.Call: _build_call,
}


def _build(node: ast.AST, names: set[str]) -> Closure:
    """Turn a whitelisted AST into a closure ``env -> value``; collect the names it reads."""
    builder = _BUILDERS.get(type(node))  # ast.parse makes exactly these classes, never subclasses
    if builder is None:
        what = _NODE_NAMES.get(type(node), type(node).__name__)
        raise _Reject(f"{what} not allowed")
    return builder(node, names)


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
