"""Search strategies behind a registry (name -> ``StrategyInfo``), as Helion's ``search_algorithms`` and
Kernel Tuner's ``strategy_map``. A strategy proposes configs in batches and is told every result; it never
imports the user's kernel file or touches a device. What the search loop must do for a strategy (read the
store's history, switch to exhaustive on a small space, bound the proposals in flight...) is declared in
its ``StrategyInfo``: nothing outside this package looks at a strategy's name.

A strategy is its module (the strategy and its ``StrategyInfo``) and one registration line below; another
package registers one through the ``autotune.strategies`` entry-point group (``name = "module:attribute"``,
the attribute a ``StrategyInfo`` or a factory ``ctx -> Strategy``), loaded when the name is first asked
for. Importing this package imports no optuna: a strategy's module is imported when it is first used."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points

from autotune.errors import SettingsError
from autotune.search.base import HistoryPoint, Strategy, StrategyContext, StrategyInfo

__all__ = [
    "DEFAULT_STRATEGY",
    "ENTRY_POINT_GROUP",
    "HistoryPoint",
    "Strategy",
    "StrategyContext",
    "StrategyInfo",
    "canonical_name",
    "choose_strategy",
    "make_strategy",
    "register",
    "strategy_info",
    "strategy_names",
]

#: the entry-point group other packages register strategies in
ENTRY_POINT_GROUP = "autotune.strategies"
#: the strategy used when none is named
DEFAULT_STRATEGY = "auto"
#: the strategy that searches configs the user listed (--configs), and a small space for a strategy whose
#: info says ``exhaustive_when_small``
_EXHAUSTIVE = "exhaustive"

#: name -> its info, or where to import it from (a strategy's module is imported when first used)
_REGISTRY: dict[str, StrategyInfo | EntryPoint] = {}
#: names that mean the same strategy
_ALIASES: dict[str, str] = {}

Target = StrategyInfo | Callable[[StrategyContext], Strategy] | str


def register(name: str, target: Target, *, aliases: tuple[str, ...] = ()) -> None:
    """Register a strategy under ``name``: its ``StrategyInfo``, a factory ``ctx -> Strategy`` (no special
    needs), or ``"module:attribute"`` naming either (imported when the strategy is first used)."""
    name = name.lower()
    if isinstance(target, str):
        _REGISTRY[name] = EntryPoint(name, target, ENTRY_POINT_GROUP)
    elif isinstance(target, StrategyInfo):
        _REGISTRY[name] = target if target.name == name else replace(target, name=name)
    else:
        _REGISTRY[name] = StrategyInfo(name, target)
    for alias in aliases:
        _ALIASES[alias.lower()] = name


@lru_cache(maxsize=8)
def _entry_points(path: tuple[str, ...]) -> dict[str, EntryPoint]:
    """The group's entry points of the distributions on ``path`` (cached per ``sys.path``: scanning
    every installed distribution costs milliseconds, and settings validate a name per search)."""
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def strategy_names() -> tuple[str, ...]:
    """Every name a strategy can be asked for: registered, aliases and installed entry points."""
    return tuple(sorted({*_REGISTRY, *_ALIASES, *_entry_points(tuple(sys.path))}))


def canonical_name(name: str) -> str:
    """The registered name ``name`` stands for (an alias resolved; an entry point registered on first
    use); an unknown name is a ``SettingsError`` listing the known ones."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        ep = _entry_points(tuple(sys.path)).get(key)
        if ep is None:
            raise SettingsError(f"unknown strategy {name!r}: choose one of {', '.join(strategy_names())}")
        _REGISTRY[key] = ep
    return key


def strategy_info(name: str) -> StrategyInfo:
    """The ``StrategyInfo`` of ``name`` (an alias, an entry point), importing its module if needed."""
    key = canonical_name(name)
    target = _REGISTRY[key]
    if isinstance(target, StrategyInfo):
        return target
    try:
        loaded = target.load()
    except Exception as e:  # a broken third-party package: one line naming it
        raise SettingsError(f"strategy {key!r} ({target.value}) could not be loaded: {e}") from None
    if not isinstance(loaded, StrategyInfo) and not callable(loaded):
        raise SettingsError(f"strategy {key!r} ({target.value}): not a StrategyInfo nor a factory")
    register(key, loaded)
    return _REGISTRY[key]  # type: ignore[return-value]


def choose_strategy(name: str, *, valid: int | None, budget: int, listed: bool = False) -> StrategyInfo:
    """The strategy that searches a shape: ``name``'s, or the exhaustive one over configs the user listed
    (``listed``), or when all ``valid`` configs (None: too many to list) fit the budget and ``name``'s
    info says a model is then pointless (``exhaustive_when_small``)."""
    info = strategy_info(name)
    if listed or (info.exhaustive_when_small and valid is not None and valid <= budget):
        return strategy_info(_EXHAUSTIVE)
    return info


def make_strategy(name: str, ctx: StrategyContext) -> Strategy:
    return strategy_info(name).factory(ctx)


register("auto", "autotune.search.auto:INFO")
register("tpe", "autotune.search.optuna_strategy:TPE")
register("random", "autotune.search.optuna_strategy:RANDOM")
register("exhaustive", "autotune.search.enumeration:INFO", aliases=("grid",))
