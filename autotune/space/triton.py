"""A ``triton.Config`` list as a search space, and back.

``space_from_configs(configs, name)`` makes a space definition (the mapping ``Space.from_dict`` takes,
and what ``search_spaces/*.yaml`` holds): one categorical param per ``Config.kwargs`` key, plus
``num_warps`` and ``num_stages`` (always: every ``Config`` has them), ``num_ctas`` when a config sets
it to other than 1 and ``maxnreg`` when the configs set it. The choices are the values the list uses,
sorted. When the listed combinations are not the full product of those choices, constraints make
exactly the listed combinations valid (``product=True`` drops them: the whole product, to search more
than the list). Widen the space by adding choices in the YAML (and deleting the ``listed_*``
constraints).

The constraints are a factored disjunction of the listed combinations, written in the space's own
expression language (no ``in``, no tuples): a trie over the params in order, values with the same
subtree grouped, one constraint per subtree small enough for one expression, with ``when`` naming the
subtree. So any list, however long, becomes a valid space.

``configs_from_space(space, facts)`` goes back: every valid config as a ``triton.Config``;
``to_triton_config`` / ``config_dict`` convert one config. A ``pre_hook`` or ``ir_override`` is code or a
file, not a tunable value: it is not part of the space.

Importing this module imports no triton (``to_triton_config`` imports it when called)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autotune.errors import SpaceError

#: ``triton.Config`` fields that are params of the space (besides its kwargs), in the space's order
CONFIG_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
#: Triton's defaults for those fields: a stored config without them means these
FIELD_DEFAULTS: dict[str, Any] = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
#: longest constraint expression written (the space's limit is autotune.space.MAX_EXPR_CHARS)
MAX_EXPR = 3000
_SCALARS = (bool, int, float, str)


def config_dict(config: Any) -> dict[str, Any]:
    """A ``triton.Config`` (or a mapping of the same meaning) as a flat config dict: its kwargs, then
    num_warps and num_stages, then num_ctas / maxnreg when they are not Triton's defaults."""
    if isinstance(config, Mapping):
        return dict(config)
    kwargs = getattr(config, "kwargs", None)
    if not isinstance(kwargs, Mapping):
        raise SpaceError(f"{config!r:.80} is not a triton.Config (no kwargs mapping)")
    clash = sorted(set(kwargs) & set(CONFIG_FIELDS))
    if clash:
        raise SpaceError(f"triton.Config kwargs may not be named {', '.join(clash)} (they are Config fields)")
    out = dict(kwargs)
    for name in CONFIG_FIELDS:
        value = getattr(config, name, FIELD_DEFAULTS[name])
        if name in ("num_warps", "num_stages") or value != FIELD_DEFAULTS[name]:
            out[name] = value
    return out


def config_key(config: Any) -> tuple[tuple[str, Any], ...]:
    """A config's identity, whether written with or without the fields at Triton's defaults (a stored config
    of a space that lists ``num_ctas`` carries ``num_ctas: 1``; the listed ``triton.Config`` does not)."""
    d = config_dict(config)
    return tuple(
        sorted((k, v) for k, v in d.items() if not (k in ("num_ctas", "maxnreg") and v == FIELD_DEFAULTS[k]))
    )


def listed_configs(configs: Iterable[Any]) -> dict[tuple[tuple[str, Any], ...], Any]:
    """``config_key`` -> the listed ``triton.Config`` (the first of equal ones): a stored config equal to a
    listed one launches that object, with its ``pre_hook``. Configs a space cannot hold are left out."""
    out: dict[tuple[tuple[str, Any], ...], Any] = {}
    for c in configs:
        try:
            out.setdefault(config_key(c), c)
        except Exception:  # a kwarg Triton accepts but a space cannot hold (e.g. a list value)
            pass
    return out


def to_triton_config(config: Mapping[str, Any], like: Any = None) -> Any:
    """The ``triton.Config`` of a flat config dict; ``like`` (a ``triton.Config``) lends its ``pre_hook``
    and ``ir_override``, which a stored config cannot hold."""
    import triton

    kwargs = {k: v for k, v in config.items() if k not in CONFIG_FIELDS}
    fields = {k: config.get(k, FIELD_DEFAULTS[k]) for k in CONFIG_FIELDS}
    return triton.Config(
        kwargs,
        **fields,
        pre_hook=getattr(like, "pre_hook", None),
        ir_override=getattr(like, "ir_override", None),
    )


def space_from_configs(
    configs: Iterable[Any], name: str, *, product: bool = False, description: str | None = None
) -> dict[str, Any]:
    """The search-space definition of a ``triton.Config`` list (see the module docstring)."""
    dicts = [config_dict(c) for c in configs]
    if not dicts:
        raise SpaceError(f"{name}: the triton.Config list is empty")
    params = _param_order(dicts)
    for i, d in enumerate(dicts):
        for f in CONFIG_FIELDS:
            if f in params and f not in d:
                if FIELD_DEFAULTS[f] is None:  # None is not a choice of a space
                    raise SpaceError(
                        f"{name}: config #{i} does not set {f}; set it on all configs or on none"
                    )
                d[f] = FIELD_DEFAULTS[f]
        if set(d) != set(params):
            missing = sorted(set(params) - set(d))
            raise SpaceError(
                f"{name}: config #{i} does not set {', '.join(missing)}; every triton.Config of the list "
                "must set the same kwargs"
            )
        for k, v in d.items():
            if not isinstance(v, _SCALARS) or (isinstance(v, float) and v != v):
                raise SpaceError(f"{name}: config #{i}: {k}={v!r:.40} is not an int, float, str or bool")
    choices = {p: sorted({_key(d[p]): d[p] for d in dicts}.values(), key=_order) for p in params}
    defn: dict[str, Any] = {"name": name}
    if description:
        defn["description"] = description
    defn["params"] = {p: list(v) for p, v in choices.items()}
    combos = sorted({tuple(_key(d[p]) for p in params): tuple(d[p] for p in params) for d in dicts}.items())
    full = 1
    for v in choices.values():
        full *= len(v)
    if not product and len(combos) < full:
        defn["constraints"] = _listed_constraints(params, [c for _, c in combos], choices)
    return defn


def configs_from_space(space: Any, facts: Mapping[str, Any] | None = None) -> list[Any]:
    """Every valid config of ``space`` (a ``Space`` or a definition mapping) as a ``triton.Config``."""
    from autotune.space import MAX_ENUMERATE, Space

    sp = space if isinstance(space, Space) else Space.from_dict(space)
    return [to_triton_config(c) for c in sp.enumerate(facts or {}, limit=MAX_ENUMERATE)]


def _param_order(dicts: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for d in dicts:
        for k in d:
            if k not in CONFIG_FIELDS:
                seen.setdefault(k, None)
    fields = [f for f in CONFIG_FIELDS if any(f in d for d in dicts)]
    return [*seen, *fields]


def _key(v: Any) -> tuple[str, Any]:
    # 64 and 64.0 are one choice (as in autotune.space); True and 1 are two
    return ("b", v) if isinstance(v, bool) else ("n", v) if isinstance(v, int | float) else ("s", v)


def _order(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, bool) else (1, v) if isinstance(v, int | float) else (2, v)


def _lit(v: Any) -> str:
    return repr(v)  # True/False, ints, floats (repr round-trips) and quoted strings are all literals


def _either(param: str, values: Sequence[Any]) -> str:
    return " or ".join(f"{param} == {_lit(v)}" for v in values)


def _and(*terms: str) -> str:
    # `and` binds tighter than `or`: only an `or` inside a term needs parentheses
    return " and ".join(f"({t})" if " or " in t else t for t in terms if t)


def _subtree(params: Sequence[str], combos: Sequence[tuple[Any, ...]], depth: int, choices: Mapping) -> str:
    """An expression true exactly for the completions (from ``depth`` on) of ``combos``; '' = always."""
    if depth == len(params):
        return ""
    param = params[depth]
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for c in combos:
        groups.setdefault(_key(c[depth]), []).append(c)
    by_sub: dict[str, list[Any]] = {}
    for members in groups.values():
        by_sub.setdefault(_subtree(params, members, depth + 1, choices), []).append(members[0][depth])
    parts = []
    for sub, values in by_sub.items():
        cond = "" if len(values) == len(choices[param]) else _either(param, values)
        parts.append(_and(cond, sub) if cond and sub else cond or sub)
    if any(not p for p in parts):
        return ""
    return " or ".join(parts)


def _listed_constraints(
    params: Sequence[str], combos: Sequence[tuple[Any, ...]], choices: Mapping[str, Sequence[Any]]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def emit(expr: str, when: list[str]) -> None:
        item: dict[str, Any] = {"name": "listed_configs" + (f"_{len(out)}" if out else ""), "expr": expr}
        if when:
            item["when"] = " and ".join(when)
        out.append(item)

    def node(combos: Sequence[tuple[Any, ...]], depth: int, when: list[str]) -> None:
        expr = _subtree(params, combos, depth, choices)
        if not expr:
            return
        if len(expr) <= MAX_EXPR:
            emit(expr, when)
            return
        # too long for one expression: the values allowed here, then one constraint per value's subtree
        param = params[depth]
        groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for c in combos:
            groups.setdefault(_key(c[depth]), []).append(c)
        if len(groups) < len(choices[param]):
            emit(_either(param, [m[0][depth] for m in groups.values()]), when)
        for members in groups.values():
            node(members, depth + 1, [*when, f"{param} == {_lit(members[0][depth])}"])

    node(combos, 0, [])
    return out


def dump_yaml(defn: Mapping[str, Any]) -> str:
    """A space definition as YAML, in the order of ``search_spaces/*.yaml`` (name, params, constraints)."""
    import yaml

    head = "# Generated from a triton.Config list (autotune space --from-triton): the listed configs are\n"
    head += (
        "# the valid set (constraints listed_configs*); add choices and drop those constraints to widen.\n"
    )
    top = {k: v for k, v in defn.items() if k != "constraints"}
    text = yaml.safe_dump(top, sort_keys=False, default_flow_style=None, width=110)
    if defn.get("constraints"):
        cons = {"constraints": list(defn["constraints"])}
        text += yaml.safe_dump(cons, sort_keys=False, default_flow_style=False, width=110)
    return head + text


def space_from_file(spec: str, *, product: bool = False) -> dict[str, Any]:
    """The space of the ``triton.Config`` list behind ``FILE.py:NAME``: ``NAME`` is a module-level
    ``@autotune`` / ``@triton.autotune`` kernel, a ``TritonKernel``, or a list of ``triton.Config``.
    The space is named after the stored kernel name when there is one, else after ``NAME``. Imports the
    file (as ``autotune check`` does, a kernel file may import triton and torch)."""
    from pathlib import Path

    from autotune.errors import KernelFileError
    from autotune.kernel.contract import _import_file

    file, sep, attr = spec.rpartition(":")
    if not sep or not file or not attr.isidentifier():
        raise SpaceError(f"--from-triton {spec!r}: expected FILE.py:NAME (a module-level name in the file)")
    path = Path(file).expanduser()
    if not path.is_file():
        raise KernelFileError(f"{path}: no such file")
    module = _import_file(path.resolve())
    if not hasattr(module, attr):
        raise SpaceError(f"{path}: defines no {attr!r}")
    obj = getattr(module, attr)
    configs = obj if isinstance(obj, list | tuple) else getattr(obj, "configs", None)
    if not isinstance(configs, list | tuple) or not configs:
        raise SpaceError(
            f"{path}:{attr} is a {type(obj).__name__}, not a triton.Config list, an @autotune / "
            "@triton.autotune kernel or a TritonKernel"
        )
    name = getattr(obj, "kernel", None) if not isinstance(obj, list | tuple) else None
    if not isinstance(name, str):
        name = getattr(obj, "name", None) if not isinstance(obj, list | tuple) else None
    name = name if isinstance(name, str) and name else attr
    return space_from_configs(configs, name, product=product, description=f"from {path.name}:{attr}")
