"""Tests of autotune.space: the search-space format, its safe expressions, enumeration and identity."""

from __future__ import annotations

import ast
import copy
import itertools
import json
import random
import time
from pathlib import Path

import pytest

import autotune.space as space_pkg
from autotune.env import DEVICE_PRESETS, FACT_NAMES
from autotune.errors import SpaceError
from autotune.space import Space, load_space, load_space_dict
from autotune.space import walk as walk_mod

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "spaces"
EXAMPLE = DATA / "gemm_example.yaml"
H200 = DEVICE_PRESETS["h200"]
SRC = "search_spaces/x.yaml"


def sp(params, constraints=None, name="t", **extra) -> Space:
    d = {"name": name, "params": params, **extra}
    if constraints is not None:
        d["constraints"] = constraints
    return Space.from_dict(d, source=SRC)


def error(d, source=SRC) -> str:
    with pytest.raises(SpaceError) as info:
        Space.from_dict(d, source=source)
    return str(info.value)


@pytest.fixture(scope="module")
def example() -> Space:
    return Space.from_yaml(EXAMPLE)


# ---- parsing every form -------------------------------------------------------------------------


def test_example_parses_every_form(example):
    assert example.name == "gemm_fp8"
    assert example.source == str(EXAMPLE)
    assert example.description.startswith("FP8 GEMM")
    got = {p.name: p.choices for p in example.params}
    assert list(got) == [
        "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages", "USE_TMA", "TMA_MULTICAST", "SPLIT_K",
    ]  # fmt: skip
    assert got["BLOCK_M"] == (64, 128)
    assert got["BLOCK_N"] == (64, 128, 256)
    assert got["BLOCK_K"] == (32, 64, 128, 256)
    assert got["GROUP_M"] == tuple(range(1, 17))
    assert got["USE_TMA"] == (False, True) and all(type(v) is bool for v in got["USE_TMA"])
    assert isinstance(got["BLOCK_M"], tuple)
    tma = example.param("TMA_MULTICAST")
    assert tma.when == "USE_TMA" and example.param("SPLIT_K").when is None
    c0, c1 = example.constraints
    assert c0.expr == "num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K <= smem_per_block"
    assert c0.name == c0.expr and not c0.named and c0.when is None
    assert (c1.name, c1.expr) == ("split_k_fits", "SPLIT_K == 1 or BLOCK_K * SPLIT_K <= 1024")


@pytest.mark.parametrize(
    "spec, choices",
    [
        ([1, 2.5, "auto", True], (1, 2.5, "auto", True)),
        ({"values": ["a"]}, ("a",)),
        ("bool", (False, True)),
        ({"bool": True}, (False, True)),
        ({"pow2": [1, 1]}, (1,)),
        ({"pow2": [16, 512]}, (16, 32, 64, 128, 256, 512)),
        ({"range": [0, 10], "step": 3}, (0, 3, 6, 9)),
        ({"range": [-2, 2]}, (-2, -1, 0, 1, 2)),
        ({"range": [5, 5]}, (5,)),
        ([1, True], (1, True)),  # a bool is not the number 1
    ],
)
def test_param_forms(spec, choices):
    p = sp({"X": spec}).params[0]
    assert p.choices == choices
    assert [type(v) for v in p.choices] == [type(v) for v in choices]


def test_long_forms_take_when():
    s = sp(
        {
            "A": "bool",
            "B": {"pow2": [2, 4], "when": "A"},
            "C": {"range": [1, 2], "when": "A"},
            "D": {"bool": True, "when": "A"},
        }
    )
    assert [p.when for p in s.params] == [None, "A", "A", "A"]


def test_constraints_absent_or_null_mean_none():
    assert sp({"X": [1]}).constraints == []
    assert sp({"X": [1]}, constraints=None).constraints == []
    assert Space.from_dict({"name": "t", "params": {"X": [1]}, "constraints": None}).constraints == []


def test_constraint_when_and_name():
    s = sp({"X": [1, 2, 3], "Y": [1, 2]}, [{"expr": "X <= 2", "when": "Y == 2", "name": "small_x"}])
    c = s.constraints[0]
    assert (c.name, c.expr, c.when, c.named) == ("small_x", "X <= 2", "Y == 2", True)
    assert list(s.enumerate()) == [{"X": x, "Y": y} for x in (1, 2, 3) for y in (1, 2) if y == 1 or x <= 2]


# ---- errors: definitions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, where, problem",
    [
        ([1, 2], "", "must be a mapping"),
        ({"params": {"X": [1]}}, "", "'name'"),
        ({"name": "", "params": {"X": [1]}}, "", "'name'"),
        ({"name": 3, "params": {"X": [1]}}, "", "'name'"),
        ({"name": "t", "params": {"X": [1]}, "constrains": []}, "", "unknown key(s) constrains"),
        ({"name": "t", "description": 5, "params": {"X": [1]}}, "", "description"),
        ({"name": "t"}, "", "missing 'params'"),
        ({"name": "t", "params": None}, "", "missing 'params'"),
        ({"name": "t", "params": [{"X": [1]}]}, "", "params must be a mapping"),
        ({"name": "t", "params": {}}, "", "params is empty"),
        ({"name": "t", "params": {"X": [1]}, "constraints": "X > 0"}, "", "constraints must be a list"),
    ],
)
def test_top_level_errors(d, where, problem):
    msg = error(d)
    assert msg.startswith(SRC + ": "), msg
    assert problem in msg, msg


@pytest.mark.parametrize(
    "name, spec, problem",
    [
        ("BLOCK_K", {"pow2": [48, 256]}, "pow2 bounds must be powers of two (got 48)"),
        ("BLOCK_K", {"pow2": [32, 100]}, "pow2 bounds must be powers of two (got 100)"),
        ("BLOCK_K", {"pow2": [0, 4]}, "pow2 bounds must be powers of two (got 0)"),
        ("BLOCK_K", {"pow2": [256, 32]}, "wrong way round: low 256 > high 32"),
        ("BLOCK_K", {"pow2": [32]}, "pow2 must be [low, high]"),
        ("BLOCK_K", {"pow2": 32}, "pow2 must be [low, high]"),
        ("BLOCK_K", {"pow2": [32.0, 64]}, "pow2 must be [low, high]"),
        ("BLOCK_K", {"pow2": [True, 2]}, "pow2 must be [low, high]"),
        ("GROUP_M", {"range": [16, 1]}, "wrong way round: low 16 > high 1"),
        ("GROUP_M", {"range": [1.5, 4]}, "range must be [low, high] with integer bounds"),
        ("GROUP_M", {"range": [1, 16], "step": 0}, "step must be a positive integer (got 0)"),
        ("GROUP_M", {"range": [1, 16], "step": -1}, "step must be a positive integer"),
        ("GROUP_M", {"range": [1, 16], "step": 1.5}, "step must be a positive integer"),
        ("GROUP_M", {"range": [0, 10**7]}, "at most"),
        ("GROUP_M", {"values": [1, 2], "step": 2}, "step is only valid with range"),
        ("X", [], "no choices"),
        ("X", {"values": []}, "no choices"),
        ("X", {"values": 4}, "values must be a list"),
        ("X", [64, 64], "duplicate choice 64"),
        ("X", [1, 1.0], "duplicate choice 1.0"),
        ("X", ["a", "b", "a"], "duplicate choice 'a'"),
        ("X", [1, None], "choice None is not a number, string or bool"),
        ("X", [[1, 2]], "is not a number, string or bool"),
        ("X", [float("nan")], "not a finite number"),
        ("X", [1.0, float("inf")], "not a finite number"),
        ("X", 64, "bad spec 64"),
        ("X", "int", "bad spec 'int'"),
        ("X", None, "bad spec None"),
        ("X", {"values": [1], "pow2": [1, 2]}, "exactly one of values, pow2, range, bool (got values, pow2)"),
        ("X", {"when": "True"}, "exactly one of values, pow2, range, bool"),
        ("X", {"values": [1], "wen": "True"}, "unknown key(s) wen"),
        ("X", {"bool": False}, "bool: true"),
        ("sm_count", [1, 2], "clashes with the device fact sm_count"),
    ],
)
def test_param_errors_name_file_and_param(name, spec, problem):
    msg = error({"name": "t", "params": {"A": [1], name: spec}})
    assert msg.startswith(f"{SRC}: param {name}: "), msg
    assert problem in msg, msg


def test_pow2_message_is_exact():
    msg = error({"name": "t", "params": {"BLOCK_K": {"pow2": [48, 256]}}})
    assert msg == "search_spaces/x.yaml: param BLOCK_K: pow2 bounds must be powers of two (got 48)"


@pytest.mark.parametrize("name", ["num-warps", "if", "2x", ""])
def test_param_names_must_be_identifiers(name):
    msg = error({"name": "t", "params": {name: [1]}})
    assert f"param {name!r}" in msg and "identifier" in msg


def test_inline_source_default():
    with pytest.raises(SpaceError, match=r"^<inline>: param X: no choices"):
        Space.from_dict({"name": "t", "params": {"X": []}})


@pytest.mark.parametrize(
    "when, problem",
    [
        ("FOO", "unknown name 'FOO'"),
        ("B > 1", "B is declared after X (a when may only use params declared before it)"),
        ("X > 1", "X is the param itself"),
        ("A >", "syntax error"),
        ("A ==", "syntax error"),
        ("", "non-empty expression"),
        (True, "non-empty expression string"),
        ("A.real", "attribute access"),
    ],
)
def test_when_errors(when, problem):
    msg = error({"name": "t", "params": {"A": [1, 2], "X": {"values": [1], "when": when}, "B": [1, 2]}})
    assert msg.startswith(f"{SRC}: param X: when"), msg
    assert problem in msg, msg


def test_when_may_use_facts_and_earlier_params():
    s = sp({"A": [1, 2], "X": {"values": [1], "when": "A == 2 and cc >= 90"}})
    assert s.param("X").when == "A == 2 and cc >= 90"


@pytest.mark.parametrize(
    "raw, where, problem",
    [
        ("BLOCK_M * FOO <= 4", "constraint 'BLOCK_M * FOO <= 4'", "unknown name 'FOO'"),
        ("BLOCK_M <=", "constraint 'BLOCK_M <='", "syntax error"),
        ("BLOCK_M < < 3", "constraint 'BLOCK_M < < 3'", "syntax error"),
        ("", "constraint ''", "non-empty expression"),
        (5, "constraint #1", "expected an expression string or a mapping"),
        ({"name": "fits"}, "constraint fits", "missing expr"),
        ({"name": "fits", "expr": "BLOCK_M > 1", "if": "x"}, "constraint fits", "unknown key(s) if"),
        ({"name": "", "expr": "BLOCK_M > 1"}, "constraint #1", "name must be a non-empty string"),
        ({"name": "fits", "expr": "BLOCK_M / 0 > nope"}, "constraint fits", "unknown name 'nope'"),
        (
            {"name": "fits", "expr": "BLOCK_M > 1", "when": "later_param"},
            "constraint fits: when",
            "unknown name",
        ),
        ({"expr": "BLOCK_M > 1", "when": "BLOCK_M +"}, "constraint 'BLOCK_M > 1': when", "syntax error"),
        ({"expr": 7}, "constraint 7", "non-empty expression string"),
    ],
)
def test_constraint_errors(raw, where, problem):
    msg = error({"name": "t", "params": {"BLOCK_M": [64]}, "constraints": [raw]})
    assert msg.startswith(f"{SRC}: {where}"), msg
    assert problem in msg, msg


def test_duplicate_constraint_names():
    msg = error(
        {
            "name": "t",
            "params": {"X": [1]},
            "constraints": [{"name": "a", "expr": "X > 0"}, {"name": "a", "expr": "X < 2"}],
        }
    )
    assert "constraint a: name used twice" in msg


# ---- safety ------------------------------------------------------------------------------------

UNSAFE = [
    "__import__('os').system('x')",
    "().__class__.__bases__[0].__subclasses__()",
    "X.real",
    "(1, 2)[0] == X",
    "[1, 2][0] == X",
    "{'a': 1}['a'] == X",
    "(lambda: 1)() == X",
    "[y for y in (1, 2)] == X",
    "any(y for y in (1, 2))",
    "{y for y in (1, 2)} == X",
    "{y: 1 for y in (1, 2)} == X",
    "open('/etc/passwd')",
    "eval('1')",
    "exec('x = 1')",
    "compile('1', 'f', 'eval')",
    "getattr(X, 'real')",
    "X in (1, 2)",
    "X is None",
    "X is not 1",
    "X << 2 > 1",
    "X & 1",
    "~X",
    "(y := 1) == X",
    "f'{X}' == '1'",
    "b'x' == X",
    "1j == X",
    "None == X",
    "min(*[1, 2]) == X",
    "max(X, 1, key=abs) == X",
    "log2() == X",
    "abs(X, 2) == X",
    "min(X) == X",
    "X; X",
    "import os",
    "lambda: 0",
]


@pytest.mark.parametrize("expr", UNSAFE)
def test_unsafe_expressions_rejected_at_load(expr, monkeypatch):
    calls = []
    monkeypatch.setattr("os.system", lambda *a: calls.append(a))
    with pytest.raises(SpaceError) as info:
        Space.from_dict({"name": "t", "params": {"X": [1]}, "constraints": [expr]}, source=SRC)
    assert str(info.value).startswith(f"{SRC}: constraint {expr!r}")
    with pytest.raises(SpaceError):  # the same in a when
        Space.from_dict({"name": "t", "params": {"X": [1], "Y": {"values": [1], "when": expr}}}, source=SRC)
    assert calls == []


def test_module_never_evals_user_text():
    modules = sorted(Path(space_pkg.__file__).parent.glob("*.py"))
    assert {"expr.py", "params.py", "space.py", "load.py"} <= {m.name for m in modules}
    for module in modules:
        tree = ast.parse(module.read_text())
        called = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert not called & {"eval", "exec", "compile", "__import__"}, module


@pytest.mark.parametrize(
    "expr, reason",
    [
        ("X ** 1000 > 0", "too large"),
        ("2 ** 64 ** 2 > 0", "too large"),
        ("(X + 1) ** 64 ** 1 ** 1 > 0 and (2 ** 64) ** 64 > 0", "too large"),
        ("'x' * 10 ** 9 == 'y'", "arithmetic on a string"),
        ("'%0999999999d' % X == 'y'", "arithmetic on a string"),
        ("(-8) ** 0.5 > 0", "not a real number"),
        ("ceil(1e308 * 10) > X", "infinity"),
    ],
)
def test_expensive_or_odd_arithmetic_is_an_invalid_config_not_a_hang(expr, reason):
    s = sp({"X": [2]}, [expr])
    (msg,) = s.check({"X": 2})  # refused before computing: the reason says which guard refused it
    assert "cannot be evaluated" in msg and reason in msg and expr in msg
    assert s.count() == 0


# ---- expression semantics ------------------------------------------------------------------------

TRUE_EXPRS = [
    "X // 4 == 1",
    "X % 4 == 2",
    "X / 4 == 1.5",
    "X ** 2 == 36",
    "2 ** -1 == 0.5",
    "-X == -6",
    "+X == 6",
    "not X == 5",
    "1 < X < 7",
    "1 < X <= 6 != 5",
    "not (1 < X < 6)",
    "min(X, 3) == 3",
    "max(X, 3, 10) == 10",
    "abs(-X) == 6",
    "ceil(X / 4) == 2",
    "floor(X / 4) == 1",
    "log2(X * 2 + 4) == 4",
    "(X if X > 5 else 0) == 6",
    "X > 100 or X == 6",
    "X > 1 and X < 7",
    "X == 6 and True",
    "(X > 100 or 0) == 0",
    "(X and 7) == 7",
    "X",
    "X * 1.5 == 9.0",
    "S == 'mn'",
    "S != 'nm'",
    "S + 'x' == 'mnx'",
    "B",
    "B + 1 == 2",
    "X >= smem_per_block // 100000",
]
FALSE_EXPRS = [
    "X // 4 == 2",
    "X % 4 == 1",
    "1 < X < 6",
    "6 < X <= 7",
    "min(X, 3) == 6",
    "ceil(X / 4) == 1",
    "(X if X < 5 else 0) == 6",
    "X > 100 or X == 5",
    "not B",
    "S == 'nm'",
    "X > smem_per_block",
    "0",
]


@pytest.mark.parametrize(
    "expr, expected", [(e, True) for e in TRUE_EXPRS] + [(e, False) for e in FALSE_EXPRS]
)
def test_expression_semantics(expr, expected):
    s = sp({"X": [6], "S": ["mn"], "B": [True]}, [expr])
    assert s.count(H200) == int(expected)
    assert s.is_valid({"X": 6, "S": "mn", "B": True}, H200) is expected


def test_division_by_zero_makes_config_invalid_with_reason():
    s = sp({"X": [0, 1, 2, 3]}, [{"name": "div", "expr": "4 // X >= 2"}])
    assert list(s.enumerate()) == [{"X": 1}, {"X": 2}]
    (msg,) = s.check({"X": 0})
    assert "'div' (4 // X >= 2)" in msg and "division by zero" in msg
    (msg,) = s.check({"X": 3})
    assert "'div' (4 // X >= 2) is false with X=3" in msg
    assert s.check({"X": 1}) == []


@pytest.mark.parametrize("expr", ["log2(X) >= 0", "X / X > 0", "X % X == 0", "S < X"])
def test_other_evaluation_errors_are_reasons(expr):
    s = sp({"X": [0], "S": ["a"]}, [expr])
    (msg,) = s.check({"X": 0, "S": "a"})
    assert "cannot be evaluated" in msg and repr(expr) in msg
    assert s.count() == 0


# ---- conditionals -------------------------------------------------------------------------------


def test_inactive_param_absent_from_configs(example):
    configs = list(example.enumerate(H200))
    off = [c for c in configs if not c["USE_TMA"]]
    on = [c for c in configs if c["USE_TMA"]]
    assert off and on
    assert all("TMA_MULTICAST" not in c for c in off)
    assert all(c["TMA_MULTICAST"] in (1, 2) for c in on)
    assert len(on) == 2 * len(off)  # nothing constrains TMA_MULTICAST
    assert all(list(c) == [p.name for p in example.params if p.name in c] for c in configs)


def test_chained_conditionals():
    s = sp(
        {
            "A": "bool",
            "B": {"values": [1, 2], "when": "A"},
            "C": {"values": ["x", "y"], "when": "B == 2"},
            "D": [0],
        }
    )
    assert list(s.enumerate()) == [
        {"A": False, "D": 0},
        {"A": True, "B": 1, "D": 0},
        {"A": True, "B": 2, "C": "x", "D": 0},
        {"A": True, "B": 2, "C": "y", "D": 0},
    ]
    assert s.size_unconstrained() == 4 and s.count() == 4
    assert s.check({"A": False, "D": 0, "C": "x"}) == [
        "param C is given but inactive (its when 'B == 2' is false)"
    ]
    assert s.check({"A": True, "B": 2, "D": 0}) == ["missing param C"]
    # a bad value upstream does not produce noise about what depends on it
    assert s.check({"A": True, "B": 3, "C": "x", "D": 0}) == ["param B: 3 is not one of [1, 2]"]


def test_param_active():
    s = sp(
        {
            "A": "bool",
            "B": {"values": [1, 2], "when": "A"},
            "C": {"values": [1], "when": "cc >= 90 and B == 2"},
        }
    )
    b, c = s.param("B"), s.param("C")
    assert s.param("A").active({}) is True
    assert b.active({"A": True}) is True
    assert b.active({"A": False}) is False
    assert b.active({}) is False  # A absent
    assert c.active({"A": True, "B": 2}, H200) is True
    assert c.active({"A": True, "B": 2}, {**H200, "cc": 80}) is False
    assert c.active({"A": True, "B": 1}, H200) is False
    with pytest.raises(SpaceError, match="'cc'"):
        c.active({"A": True, "B": 2})


def test_when_on_device_facts():
    s = sp({"USE_TMA": {"bool": True, "when": "cc >= 90"}, "X": [1, 2]})
    assert s.count(H200) == 4
    assert s.count({**H200, "cc": 80}) == 2
    assert list(s.enumerate({**H200, "cc": 80})) == [{"X": 1}, {"X": 2}]
    with pytest.raises(SpaceError, match=r"param USE_TMA \(when 'cc >= 90'\) uses device fact 'cc'"):
        s.count({})
    with pytest.raises(SpaceError, match="'cc'"):
        s.size_unconstrained()
    assert s.size_unconstrained(H200) == 4


def test_constraint_on_absent_param_is_skipped():
    s = sp(
        {"USE_TMA": "bool", "MC": {"values": [1, 2, 4], "when": "USE_TMA"}, "BM": [64, 128]},
        ["MC * BM <= 128"],
    )
    got = list(s.enumerate())
    assert got == [
        {"USE_TMA": False, "BM": 64},
        {"USE_TMA": False, "BM": 128},
        {"USE_TMA": True, "MC": 1, "BM": 64},
        {"USE_TMA": True, "MC": 1, "BM": 128},
        {"USE_TMA": True, "MC": 2, "BM": 64},
    ]
    assert s.is_valid({"USE_TMA": False, "BM": 128})


def test_constraint_when():
    s = sp({"USE_TMA": "bool", "BM": [64, 128]}, [{"expr": "BM >= 128", "when": "USE_TMA"}])
    assert list(s.enumerate()) == [
        {"USE_TMA": False, "BM": 64},
        {"USE_TMA": False, "BM": 128},
        {"USE_TMA": True, "BM": 128},
    ]
    (msg,) = s.check({"USE_TMA": True, "BM": 64})
    assert "'BM >= 128' is false with BM=64" in msg


def test_when_that_raises_prunes_and_reports():
    s = sp({"X": [0, 2], "Y": {"values": [1], "when": "4 // X > 1"}})
    assert list(s.enumerate()) == [{"X": 2, "Y": 1}]
    (msg,) = s.check({"X": 0})
    assert "param Y" in msg and "division by zero" in msg
    with pytest.raises(SpaceError, match="division by zero"):
        s.param("Y").active({"X": 0})


# ---- device facts ------------------------------------------------------------------------------


def test_h200_shared_memory(example):
    base = {
        "BLOCK_M": 128,
        "BLOCK_N": 256,
        "BLOCK_K": 128,
        "GROUP_M": 8,
        "num_warps": 8,
        "USE_TMA": False,
        "SPLIT_K": 1,
    }
    assert 5 * (128 + 256) * 128 == 245_760 > H200["smem_per_block"] == 232_448 >= 4 * (128 + 256) * 128
    reasons = example.check({**base, "num_stages": 5}, H200)
    assert len(reasons) == 1
    assert "num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K <= smem_per_block" in reasons[0]
    assert "num_stages=5" in reasons[0] and "smem_per_block=232448" in reasons[0]
    assert not example.is_valid({**base, "num_stages": 5}, H200)
    assert example.check({**base, "num_stages": 4}, H200) == []
    assert example.is_valid({**base, "num_stages": 5}, {**H200, "smem_per_block": 245_760})


def test_named_constraint_message(example):
    cfg = {
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "BLOCK_K": 256,
        "GROUP_M": 1,
        "num_warps": 4,
        "num_stages": 2,
        "USE_TMA": False,
        "SPLIT_K": 8,
    }
    (msg,) = example.check(cfg, H200)
    assert msg.startswith("constraint 'split_k_fits' (SPLIT_K == 1 or BLOCK_K * SPLIT_K <= 1024) is false")


def test_missing_fact_is_an_error(example):
    facts = {k: v for k, v in H200.items() if k != "smem_per_block"}
    calls = [
        lambda: example.count(facts),
        lambda: example.enumerate(facts),  # raised on the call, not on the first next()
        lambda: example.check({}, facts),
        lambda: example.is_valid({}, facts),
        lambda: example.sample(random.Random(0), facts),
    ]
    for call in calls:
        with pytest.raises(
            SpaceError, match=r"^.*gemm_example.yaml: constraint .* uses device fact 'smem_per_block'"
        ):
            call()
    assert example.size_unconstrained() > 0  # constraints' facts are not needed for that
    assert example.count({**facts, "smem_per_block": 1}) == 0


def test_fact_only_constraint():
    s = sp({"X": [1, 2]}, ["sm_count >= 100"])
    assert s.count(H200) == 2
    assert s.count({**H200, "sm_count": 8}) == 0
    assert s.check({"X": 1}, {**H200, "sm_count": 8}) == [
        "constraint 'sm_count >= 100' is false with sm_count=8"
    ]
    with pytest.raises(SpaceError, match="no valid config"):
        s.sample(random.Random(0), {**H200, "sm_count": 8})


def test_fact_names_match_env():
    s = sp({"X": [1]}, [" and ".join(f"{f} >= 0" for f in FACT_NAMES)])
    assert s.count(H200) == 1


# ---- enumeration against brute force --------------------------------------------------------------


def brute_example(facts):
    """The example space enumerated by hand, in declaration order."""
    out = []
    for bm, bn, bk, g, w, st, tma in itertools.product(
        [64, 128], [64, 128, 256], [32, 64, 128, 256], range(1, 17), [4, 8], [2, 3, 4, 5], [False, True]
    ):
        for mc in [1, 2] if tma else [None]:
            for sk in [1, 2, 4, 8]:
                if st * (bm + bn) * bk <= facts["smem_per_block"] and (sk == 1 or bk * sk <= 1024):
                    c = {
                        "BLOCK_M": bm,
                        "BLOCK_N": bn,
                        "BLOCK_K": bk,
                        "GROUP_M": g,
                        "num_warps": w,
                        "num_stages": st,
                        "USE_TMA": tma,
                    }
                    if mc is not None:
                        c["TMA_MULTICAST"] = mc
                    c["SPLIT_K"] = sk
                    out.append(c)
    return out


@pytest.mark.parametrize("smem", [232_448, 100_000, 49_152, 10])
def test_enumerate_matches_brute_force(example, smem):
    facts = {**H200, "smem_per_block": smem}
    want = brute_example(facts)
    got = list(example.enumerate(facts))
    assert got == want  # same configs in the same order
    assert [list(c) for c in got] == [list(c) for c in want]  # keys in declaration order
    assert example.count(facts) == len(want)
    assert all(example.is_valid(c, facts) for c in got[:: max(1, len(got) // 200)])


def test_enumerate_is_deterministic_and_valid(example):
    a, b = list(example.enumerate(H200)), list(example.enumerate(H200))
    assert a == b and 0 < len(a) < example.size_unconstrained()
    assert len({json.dumps(c, sort_keys=True) for c in a}) == len(a)


def test_rejected_configs_are_exactly_the_invalid_ones(example):
    valid = {json.dumps(c, sort_keys=True) for c in example.enumerate(H200)}
    unconstrained = Space.from_dict({**example.to_dict(), "constraints": []})
    seen = 0
    for c in unconstrained.enumerate():
        seen += 1
        assert (json.dumps(c, sort_keys=True) in valid) is example.is_valid(c, H200)
    assert seen == example.size_unconstrained()


def test_size_unconstrained(example):
    assert example.size_unconstrained() == 2 * 3 * 4 * 16 * 2 * 4 * (1 + 2) * 4
    assert sp({"A": [1, 2, 3], "B": [1, 2]}, ["A > 100"]).size_unconstrained() == 6


def test_enumeration_prunes_early():
    s = sp({f"P{i}": list(range(10)) for i in range(6)}, ["P0 + P1 < 0", "P0 + P5 >= 0"])
    calls = []
    c0, c1 = s.constraints
    fn0 = c0._expr.fn
    c0._expr.fn = lambda env: calls.append(1) or fn0(env)
    assert s.count() == 0
    assert len(calls) == 100  # evaluated once per (P0, P1), never for the 10**6 completions


def test_large_space_is_fast_enough():
    s = sp({f"P{i}": list(range(10)) for i in range(6)}, ["P0 + P1 + P2 + P3 + P4 + P5 <= 27"])
    want = sum(1 for c in itertools.product(range(10), repeat=6) if sum(c) <= 27)
    t = time.monotonic()
    assert s.count() == want
    assert time.monotonic() - t < 30  # ~1.5 s for 10**6 raw combinations on a laptop core


def test_enumerate_stops_early_without_error(example):
    first = list(itertools.islice(example.enumerate(H200), 3))
    assert len(first) == 3 and first[0]["BLOCK_M"] == 64


# ---- size without enumerating, limits, bounded search -------------------------------------------


def brute_size(space: Space, facts=None) -> int:
    """Configs before constraints, by the definition: each param in order, absent where it is inactive; a
    ``when`` that cannot be evaluated ends the branch."""

    def rec(i: int, cfg: dict) -> int:
        if i == len(space.params):
            return 1
        p = space.params[i]
        try:
            active = p.active(cfg, facts)
        except SpaceError:
            return 0
        if not active:
            return rec(i + 1, cfg)
        return sum(rec(i + 1, {**cfg, p.name: v}) for v in p.choices)

    return rec(0, {})


WHENS = [
    "{a} > 1",
    "{a} == {b}",
    "not {a}",
    "{a} + {b} < 4",
    "{a} // ({b} - 1) >= 1",  # division by zero when b == 1: that branch has no configs
    "sm_count > 100 and {a}",
    "{a} or {b}",
]


def random_space(rng: random.Random) -> Space:
    params: dict = {}
    for i in range(rng.randint(1, 7)):
        choices = rng.choice([[False, True], list(range(rng.randint(1, 4))), [1, 2, 3]])
        spec: dict = {"values": choices}
        if i and rng.random() < 0.6:
            a, b = rng.choice(list(params)), rng.choice(list(params))
            spec["when"] = rng.choice(WHENS).format(a=a, b=b)
        params[f"P{i}"] = spec
    return sp(params, ["P0 == 0"])


def test_size_unconstrained_with_conditionals_matches_brute_force():
    rng = random.Random(2024)
    conditional = 0
    for _ in range(300):
        s = random_space(rng)
        conditional += any(p.when for p in s.params)
        want = brute_size(s, H200)
        assert s.size_info(H200) == (want, True), s.to_dict()
        assert s.size_unconstrained(H200) == want
        free = Space.from_dict({**s.to_dict(), "constraints": []})
        assert sum(1 for _ in free.enumerate(H200)) == want, s.to_dict()
    assert conditional > 150


def test_size_of_the_example_and_of_chains_is_exact_and_fast(example):
    assert example.size_info(H200) == (2 * 3 * 4 * 16 * 2 * 4 * (1 + 2) * 4, True)
    # a chain: each param exists only if the one before is true -> n + 1 configs, not 2**n
    chain = sp({f"P{i}": {"bool": True, **({"when": f"P{i - 1}"} if i else {})} for i in range(200)})
    assert chain.size_info() == (201, True) and chain.count() == 201
    # interleaved conditionals: 3**40 configs, counted exactly in linear time
    params: dict = {}
    for i in range(40):
        params[f"B{i}"] = "bool"
        params[f"C{i}"] = {"values": [1, 2], "when": f"B{i}"}
    assert sp(params).size_info() == (3**40, True)


def test_size_falls_back_to_an_upper_bound_in_bounded_time(monkeypatch):
    # every B first, then every C: the state to remember is all 40 Bs (2**40 states); the count stops
    # after SIZE_STEP_BUDGET steps and answers the product of the choice counts, an upper bound
    params: dict = {f"B{i}": "bool" for i in range(40)}
    params.update({f"C{i}": {"values": [1, 2], "when": f"B{i}"} for i in range(40)})
    s = sp(params)
    t = time.monotonic()
    assert s.size_info() == (2**80, False) and s.size_unconstrained() == 2**80 >= 3**40
    assert time.monotonic() - t < 30  # ~0.5 s
    assert not s.enumerable()
    small = sp(
        {"A": [1, 2, 3], "B": {"values": [1, 2], "when": "A > 1"}, "C": {"values": [1, 2], "when": "B"}}
    )
    assert small.size_info() == (brute_size(small), True) == (1 + 2 * 2 * 2, True)
    monkeypatch.setattr(walk_mod, "SIZE_STEP_BUDGET", 2)
    assert small.size_info() == (3 * 2 * 2, False)


def test_count_and_enumerate_refuse_past_the_limit():
    assert space_pkg.MAX_ENUMERATE == 1_000_000
    huge = sp({f"P{i}": list(range(10)) for i in range(7)}, ["P0 + P1 <= 17"])
    assert huge.size_unconstrained() == 10**7 and not huge.enumerable()
    t = time.monotonic()
    with pytest.raises(SpaceError) as info:
        huge.count()
    assert str(info.value) == (
        f"{SRC}: too large to count exactly: the space has 10,000,000 combinations before constraints, "
        "more than the limit of 1,000,000 (autotune.space.MAX_ENUMERATE); sample it instead"
    )
    with pytest.raises(SpaceError, match="cannot enumerate: the space has 10,000,000 combinations"):
        huge.enumerate(limit=space_pkg.MAX_ENUMERATE)
    assert time.monotonic() - t < 30  # at once, not after walking 10**7 combinations
    assert next(huge.enumerate()) == {f"P{i}": 0 for i in range(7)}  # unlimited and lazy, as before
    small = sp({"A": [1, 2, 3], "B": [1, 2]}, ["A > 1"])
    assert small.enumerable() and small.enumerable(limit=6) and not small.enumerable(limit=5)
    assert small.count() == small.count(limit=6) == small.count(limit=None) == 4
    with pytest.raises(SpaceError, match=r"has 6 combinations .* limit of 5 "):
        small.count(limit=5)
    assert list(small.enumerate(limit=6)) == list(small.enumerate())
    with pytest.raises(SpaceError, match="has 2.00e27 combinations"):
        sp({f"P{i}": list(range(10)) for i in range(27)} | {"Q": [1, 2]}).count()
    assert space_pkg.format_count(12 * 10**26) == "1.20e27" and space_pkg.format_count(10**6) == "1,000,000"


def test_count_refuses_an_upper_bound_past_the_limit(monkeypatch):
    s = sp(
        {
            "A": list(range(100)),
            "B": list(range(100)),
            "C": {"values": list(range(200)), "when": "A + B == 0"},
        }
    )
    assert s.size_info() == (100 * 100 - 1 + 200, True)
    monkeypatch.setattr(walk_mod, "SIZE_STEP_BUDGET", 10)
    assert s.size_info() == (100 * 100 * 200, False)
    with pytest.raises(SpaceError, match="the space has up to 2,000,000 combinations"):
        s.count()


def test_find_valid_is_the_first_config_in_order(example):
    assert example.find_valid(H200) == next(example.enumerate(H200))
    s = sp({"A": list(range(100)), "B": list(range(100))}, ["A == 42 and B == 7"])
    assert s.find_valid() == {"A": 42, "B": 7}


def test_find_valid_proofs():
    with pytest.raises(SpaceError) as info:
        sp({"A": [1, 2, 3], "B": [1, 2]}, ["A + B > 100"]).find_valid()
    assert str(info.value) == f"{SRC}: no valid config: all 6 combinations violate a constraint"
    with pytest.raises(SpaceError) as info:
        sp({"A": [1, 2], "B": list(range(10**5))}, [{"name": "big", "expr": "B > 10**6"}]).find_valid()
    assert str(info.value) == f"{SRC}: no valid config: no choice of param B satisfies 'big' (B > 10**6)"
    with pytest.raises(
        SpaceError, match=r"no valid config: constraint 'sm_count >= 1000' is false with sm_count=132"
    ):
        sp({"A": [1]}, ["sm_count >= 1000"]).find_valid(H200)
    # a constraint on an inactive param is skipped, one whose when is false does not apply: both valid
    cond = sp({"USE": "bool", "M": {"values": [1, 2], "when": "USE"}}, ["M > 5"])
    assert cond.find_valid() == {"USE": False}
    guarded = sp({"X": [3, 2, 1]}, [{"expr": "X > 5", "when": "X > 1"}])
    assert guarded.find_valid() == {"X": 1}


def test_find_valid_gives_up_within_its_budgets():
    s = sp({f"P{i}": list(range(10)) for i in range(9)}, ["P0 + P8 < 0"])  # only P8 refutes it
    t = time.monotonic()
    with pytest.raises(SpaceError) as info:
        s.find_valid(node_budget=5_000, tries=500)
    assert time.monotonic() - t < 30
    msg = str(info.value)
    assert (
        msg.startswith(f"{SRC}: no valid config found in ")
        and "(5,000 choices tried in order, 500 random" in msg
    )
    with pytest.raises(SpaceError, match=r"\(0 choices tried in order, 0 random tries\)"):
        s.find_valid(node_budget=10**9, tries=10**9, time_budget_s=0)
    # a random try can succeed where the in-order walk ran out
    rare = sp({f"P{i}": list(range(10)) for i in range(6)}, ["P0 >= 5"])
    assert rare.find_valid(node_budget=3)["P0"] >= 5


def test_sample_unique():
    s = sp({"A": [1, 2, 3, 4], "B": [1, 2, 3, 4]}, ["A <= B"])
    from autotune.trial import config_hash

    got = s.sample_unique(random.Random(0), 6)
    assert len(got) == 6 and len({config_hash(c) for c in got}) == 6 and all(s.is_valid(c) for c in got)
    everything = s.sample_unique(random.Random(0), 100)  # only 10 exist: fewer, no error
    assert sorted((c["A"], c["B"]) for c in everything) == [(a, b) for a in range(1, 5) for b in range(a, 5)]
    rest = s.sample_unique(random.Random(1), 100, exclude={config_hash(c) for c in got})
    assert len(rest) == 4 and not {config_hash(c) for c in rest} & {config_hash(c) for c in got}
    assert s.sample_unique(random.Random(0), 0) == []
    assert sp({"A": [1]}, ["A > 1"]).sample_unique(random.Random(0), 3, max_tries=100) == []
    assert s.sample_unique(random.Random(5), 4) == s.sample_unique(random.Random(5), 4)  # deterministic


# ---- identity -----------------------------------------------------------------------------------


def test_hash_ignores_formatting(example):
    other = Space.from_yaml(DATA / "gemm_example_reformatted.yaml")
    assert other.hash() == example.hash()
    assert len(example.hash()) == 64 and int(example.hash(), 16) >= 0


def test_to_dict_round_trips(example):
    d = example.to_dict()
    again = Space.from_dict(json.loads(json.dumps(d)), source="pipe")
    assert again.hash() == example.hash()
    assert again.to_dict() == d
    assert list(again.enumerate(H200)) == list(example.enumerate(H200))
    assert d["params"]["TMA_MULTICAST"] == {"values": [1, 2], "when": "USE_TMA"}
    assert d["constraints"][1] == {
        "expr": "SPLIT_K == 1 or BLOCK_K * SPLIT_K <= 1024",
        "name": "split_k_fits",
    }


def _edit(d, fn):
    d = copy.deepcopy(d)
    fn(d)
    return d


CHANGES = {
    "choice value": lambda d: d["params"]["BLOCK_M"].__setitem__("values", [64, 256]),
    "extra choice": lambda d: d["params"]["BLOCK_M"]["values"].append(256),
    "choice order": lambda d: d["params"]["BLOCK_M"].__setitem__("values", [128, 64]),
    "choice type": lambda d: d["params"]["BLOCK_M"].__setitem__("values", [64.0, 128]),
    "param order": lambda d: d.__setitem__("params", {k: d["params"][k] for k in ["BLOCK_N", *d["params"]]}),
    "when": lambda d: d["params"]["TMA_MULTICAST"].__setitem__("when", "not USE_TMA"),
    "no when": lambda d: d["params"]["TMA_MULTICAST"].pop("when"),
    "constraint text": lambda d: d["constraints"][1].__setitem__(
        "expr", "SPLIT_K == 1 or BLOCK_K * SPLIT_K <= 512"
    ),
    "constraint name": lambda d: d["constraints"][1].__setitem__("name", "other"),
    "constraint when": lambda d: d["constraints"][1].__setitem__("when", "USE_TMA"),
    "constraint added": lambda d: d["constraints"].append("GROUP_M <= 8"),
    "constraint removed": lambda d: d["constraints"].pop(0),
    "name": lambda d: d.__setitem__("name", "gemm_bf16"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_hash_changes_with_definition(example, change):
    changed = Space.from_dict(_edit(example.to_dict(), CHANGES[change]))
    assert changed.hash() != example.hash()


def test_hash_ignores_description_and_expression_spacing(example):
    d = example.to_dict()
    assert Space.from_dict(_edit(d, lambda d: d.__setitem__("description", "other"))).hash() == example.hash()
    assert Space.from_dict(_edit(d, lambda d: d.pop("description"))).hash() == example.hash()
    spaced = _edit(
        d,
        lambda d: d["constraints"].__setitem__(0, "(num_stages*(BLOCK_M+BLOCK_N)*BLOCK_K) <=smem_per_block"),
    )
    assert Space.from_dict(spaced).hash() == example.hash()
    assert Space.from_dict(d, source="elsewhere.yaml").hash() == example.hash()


# ---- configs: normalize / check ----------------------------------------------------------------


class _Scalar:
    """Stands for a numpy/torch scalar: has .item()."""

    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


def test_normalize(example):
    raw = {"SPLIT_K": 1.0, "USE_TMA": 1, "BLOCK_M": _Scalar(128), "TMA_MULTICAST": 2, "num_stages": 4,
           "num_warps": 8, "GROUP_M": 3, "BLOCK_K": 64, "BLOCK_N": 256}  # fmt: skip
    out = example.normalize(raw)
    assert list(out) == [p.name for p in example.params]
    assert out["USE_TMA"] is True and type(out["SPLIT_K"]) is int and out["BLOCK_M"] == 128
    assert example.normalize({"USE_TMA": 0})["USE_TMA"] is False
    assert example.is_valid(out, H200) and example.is_valid(raw, H200)
    s = sp({"F": [0.5, 2.0], "S": ["a"]})
    assert type(s.normalize({"F": 2})["F"]) is float


@pytest.mark.parametrize(
    "config, param",
    [
        ({"BLOCK_M": "64"}, "BLOCK_M"),
        ({"BLOCK_M": 96}, "BLOCK_M"),
        ({"BLOCK_M": True}, "BLOCK_M"),
        ({"BLOCK_M": 64.5}, "BLOCK_M"),
        ({"BLOCK_M": None}, "BLOCK_M"),
        ({"USE_TMA": 2}, "USE_TMA"),
        ({"USE_TMA": "true"}, "USE_TMA"),
        ({"USE_TMA": 1.0}, "USE_TMA"),
    ],
)
def test_normalize_rejects_non_choices(example, config, param):
    with pytest.raises(SpaceError, match=rf"^{EXAMPLE}: param {param}: .* is not one of"):
        example.normalize(config)
    assert any(f"param {param}:" in r for r in example.check(config, H200))


def test_normalize_rejects_unknown_keys_and_non_mappings(example):
    with pytest.raises(SpaceError, match="unknown param 'BLOCK_Q'"):
        example.normalize({"BLOCK_Q": 1})
    with pytest.raises(SpaceError, match="must be a mapping"):
        example.normalize([("BLOCK_M", 64)])


def test_check_reasons(example):
    good = {
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "BLOCK_K": 32,
        "GROUP_M": 1,
        "num_warps": 4,
        "num_stages": 2,
        "USE_TMA": True,
        "TMA_MULTICAST": 2,
        "SPLIT_K": 1,
    }
    assert example.check(good, H200) == [] and example.is_valid(good, H200)
    assert example.check({**good, "EXTRA": 1}, H200) == ["unknown param 'EXTRA'"]
    missing = {k: v for k, v in good.items() if k != "GROUP_M"}
    assert example.check(missing, H200) == ["missing param GROUP_M"]
    assert example.check({**good, "TMA_MULTICAST": 3}, H200) == [
        "param TMA_MULTICAST: 3 is not one of [1, 2]"
    ]
    assert example.check({**good, "USE_TMA": False}, H200) == [
        "param TMA_MULTICAST is given but inactive (its when 'USE_TMA' is false)"
    ]
    assert example.check({}, H200)[:2] == ["missing param BLOCK_M", "missing param BLOCK_N"]
    assert example.check("BLOCK_M=64", H200) == ["a config must be a mapping (got str)"]
    both = example.check(
        {**good, "num_stages": 5, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 256, "SPLIT_K": 32 // 2}, H200
    )
    assert (
        len(both) == 1 and "SPLIT_K: 16 is not one of" in both[0]
    )  # constraints wait for a well-formed config
    two = example.check(
        {**good, "num_stages": 5, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 256, "SPLIT_K": 8}, H200
    )
    assert len(two) == 2 and "smem_per_block" in two[0] and "split_k_fits" in two[1]


# ---- sampling ----------------------------------------------------------------------------------


def test_sample_valid_and_deterministic(example):
    rng = random.Random(1)
    samples = [example.sample(rng, H200) for _ in range(300)]
    assert all(example.is_valid(c, H200) for c in samples)
    assert {c["USE_TMA"] for c in samples} == {False, True}
    assert len({json.dumps(c, sort_keys=True) for c in samples}) > 250
    again = random.Random(1)
    assert [example.sample(again, H200) for _ in range(300)] == samples
    assert all(list(c) == [p.name for p in example.params if p.name in c] for c in samples)


def test_sample_roughly_uniform():
    s = sp({"A": [1, 2, 3, 4], "B": [1, 2, 3, 4]}, ["A <= B"])
    rng = random.Random(7)
    counts: dict[tuple, int] = {}
    for _ in range(5000):
        c = s.sample(rng)
        counts[(c["A"], c["B"])] = counts.get((c["A"], c["B"]), 0) + 1
    assert set(counts) == {(a, b) for a in range(1, 5) for b in range(1, 5) if a <= b}
    assert min(counts.values()) > 5000 / 10 * 0.7 and max(counts.values()) < 5000 / 10 * 1.3


def test_sample_empty_space_raises():
    s = sp({"BLOCK_M": [64, 128]}, ["BLOCK_M > 1000"])
    with pytest.raises(SpaceError, match=rf"^{SRC}: no valid config found in 50 random tries"):
        s.sample(random.Random(0), max_tries=50)


def test_sample_finds_rare_config():
    s = sp({"A": list(range(100)), "B": list(range(100))}, ["A == 42 and B == 7"])
    assert s.sample(random.Random(3), max_tries=100_000) == {"A": 42, "B": 7}


# ---- files ------------------------------------------------------------------------------------


def test_load_space_dict_returns_raw_mapping():
    d = load_space_dict(EXAMPLE)
    assert d["params"]["USE_TMA"] == "bool" and d["params"]["BLOCK_K"] == {"pow2": [32, 256]}


def test_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    with pytest.raises(SpaceError, match=rf"^{p}: no such search-space file$"):
        load_space_dict(p)
    with pytest.raises(SpaceError, match=str(p)):
        Space.from_yaml(p)


def test_directory(tmp_path):
    with pytest.raises(SpaceError, match=rf"^{tmp_path}: .*directory"):
        load_space_dict(tmp_path)


def write(tmp_path, text, name="x.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, line, problem",
    [
        ("name: t\nparams:\n  X: [1, 2\n  Y: [3]\n", None, "YAML error"),
        ("name: t\nparams:\n  X: [1]\n   Y: 2\n", 4, "YAML error"),
        ("name: t\nparams:\n  X: [1]\n  X: [2]\n", 4, "duplicate key 'X'"),
        ("name: t\nname: u\nparams: {X: [1]}\n", 2, "duplicate key 'name'"),
        ("name: t\nparams: {X: [1], X: [2]}\n", 2, "duplicate key 'X'"),
        ("name: t\nparams: {X: !!python/object:os.system [1]}\n", 2, "YAML error"),
    ],
)
def test_yaml_errors_name_file_and_line(tmp_path, text, line, problem):
    p = write(tmp_path, text)
    with pytest.raises(SpaceError) as info:
        load_space_dict(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}:{line}: " if line else f"{p}:"), msg
    assert problem in msg, msg
    if line is None:
        assert msg.split(":")[1].isdigit()


@pytest.mark.parametrize(
    "text, got", [("", "an empty file"), ("- 1\n- 2\n", "a list"), ("just text\n", "a str")]
)
def test_not_a_mapping(tmp_path, text, got):
    p = write(tmp_path, text)
    with pytest.raises(SpaceError, match=rf"^{p}: a search space must be a YAML mapping \(got {got}\)"):
        load_space_dict(p)


def test_not_utf8(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(SpaceError, match=rf"^{p}: not UTF-8"):
        load_space_dict(p)


def test_from_yaml_errors_name_the_file(tmp_path):
    p = write(tmp_path, "name: t\nparams:\n  BLOCK_K: {pow2: [48, 256]}\n")
    with pytest.raises(SpaceError) as info:
        Space.from_yaml(p)
    assert str(info.value) == f"{p}: param BLOCK_K: pow2 bounds must be powers of two (got 48)"


def test_load_space_by_name_and_path(tmp_path, monkeypatch):
    write(tmp_path, EXAMPLE.read_text(), "mine.yaml")
    assert load_space("mine", dirs=[tmp_path]).name == "gemm_fp8"
    assert load_space(tmp_path / "mine.yaml").source == str(tmp_path / "mine.yaml")
    monkeypatch.setenv("AUTOTUNE_SPACES_DIR", str(tmp_path))
    assert load_space("mine").hash() == Space.from_yaml(EXAMPLE).hash()
    with pytest.raises(SpaceError, match=r"search space 'nope' not found \(looked in .*nope.yaml"):
        load_space("nope", dirs=[tmp_path])


# ---- the shipped spaces -----------------------------------------------------------------------


def test_matmul_cpu_space():
    from autotune.env import device_facts

    s = Space.from_yaml(ROOT / "search_spaces" / "matmul_cpu.yaml")
    assert s.name == "matmul_cpu"
    assert [p.name for p in s.params] == ["BLOCK_M", "BLOCK_N", "BLOCK_K", "ORDER"]
    pow2 = [16, 32, 64, 128, 256, 512]
    assert all(s.param(n).choices == tuple(pow2) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    assert s.param("ORDER").choices == ("mn", "nm")
    want = [
        {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "ORDER": o}
        for m, n, k, o in itertools.product(pow2, pow2, pow2, ["mn", "nm"])
        if m * n <= 65536
    ]
    for facts in ({}, device_facts("cpu"), H200):
        assert list(s.enumerate(facts)) == want
    assert 100 <= len(want) <= 1000 and s.count() == len(want) == 396
    assert s.size_unconstrained() == 6**3 * 2
    assert not s.is_valid({"BLOCK_M": 512, "BLOCK_N": 256, "BLOCK_K": 16, "ORDER": "mn"}, {})
    assert s.is_valid(s.sample(random.Random(0), {}), {})
    assert load_space("matmul_cpu", dirs=[ROOT / "search_spaces"]).hash() == s.hash()


def test_every_shipped_space_loads():
    files = sorted((ROOT / "search_spaces").glob("*.yaml")) + sorted(DATA.glob("*.yaml"))
    assert files
    for f in files:
        s = Space.from_yaml(f)
        assert Space.from_dict(s.to_dict()).hash() == s.hash()
        assert s.count(H200) > 0


def test_neighbours_move_one_param_to_an_adjacent_choice():
    """Ordered choices move one step each way; a string param (no order) to every other choice; a move
    that makes a param active gives it its first choice, one that makes it inactive drops it; configs a
    constraint rejects are left out."""
    s = sp(
        {
            "BLOCK": {"pow2": [16, 128]},
            "STAGES": {"range": [1, 3]},
            "IMPL": ["a", "b", "c"],
            "TMA": {"bool": True},
            "BOX": {"pow2": [32, 64], "when": "TMA"},
        },
        ["BLOCK * STAGES <= 256"],
    )
    c = {"BLOCK": 64, "STAGES": 2, "IMPL": "b", "TMA": False}
    got = {tuple(sorted(n.items())) for n in s.neighbours(c, {})}
    want = [
        {**c, "BLOCK": 32},
        {**c, "BLOCK": 128},  # 128 * 2 = 256: allowed
        {**c, "STAGES": 1},
        {**c, "STAGES": 3},  # 64 * 3 = 192
        {**c, "IMPL": "a"},
        {**c, "IMPL": "c"},
        {**c, "TMA": True, "BOX": 32},
    ]
    assert got == {tuple(sorted(w.items())) for w in want}
    assert all(s.is_valid(n, {}) for n in s.neighbours(c, {}))
    # the constraint: BLOCK 128 with 3 stages is out; TMA off drops BOX
    c2 = {"BLOCK": 128, "STAGES": 2, "IMPL": "a", "TMA": True, "BOX": 64}
    got2 = s.neighbours(c2, {})
    assert {"BLOCK": 128, "STAGES": 3, "IMPL": "a", "TMA": True, "BOX": 64} not in got2
    assert {"BLOCK": 128, "STAGES": 2, "IMPL": "a", "TMA": False} in got2
    assert {"BLOCK": 128, "STAGES": 2, "IMPL": "a", "TMA": True, "BOX": 32} in got2
    assert c2 not in got2 and len(got2) == len({tuple(sorted(n.items())) for n in got2})
