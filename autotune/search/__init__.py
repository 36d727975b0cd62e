"""Search strategies behind a registry (name -> factory), as Helion's ``search_algorithms`` and Kernel
Tuner's ``strategy_map``. A strategy proposes configs in batches and is told every result; it never
imports the user's kernel file or touches a device. Importing this package imports no optuna: each factory
imports what it needs when called."""

from __future__ import annotations

from collections.abc import Callable

from autotune.search.base import HistoryPoint, Strategy, StrategyContext

__all__ = [
    "DEFAULT_STRATEGY",
    "HistoryPoint",
    "Strategy",
    "StrategyContext",
    "canonical_name",
    "make_strategy",
    "register",
    "strategy_names",
]

_REGISTRY: dict[str, Callable[[StrategyContext], Strategy]] = {}
#: names that mean the same strategy
_ALIASES = {"grid": "exhaustive"}


def register(name: str, factory: Callable[[StrategyContext], Strategy]) -> None:
    _REGISTRY[name] = factory


def strategy_names() -> tuple[str, ...]:
    return tuple(sorted({*_REGISTRY, *_ALIASES}))


def canonical_name(name: str) -> str:
    return _ALIASES.get(name, name)


def make_strategy(name: str, ctx: StrategyContext) -> Strategy:
    return _REGISTRY[canonical_name(name)](ctx)


def _tpe(ctx: StrategyContext) -> Strategy:
    from autotune.search.optuna_strategy import OptunaStrategy, tpe_sampler

    return OptunaStrategy(ctx, tpe_sampler(ctx.seed))


def _random(ctx: StrategyContext) -> Strategy:
    import optuna

    from autotune.search.optuna_strategy import OptunaStrategy

    return OptunaStrategy(ctx, optuna.samplers.RandomSampler(seed=ctx.seed))


def _auto(ctx: StrategyContext) -> Strategy:
    from autotune.search.auto import AutoStrategy

    return AutoStrategy(ctx)


def _exhaustive(ctx: StrategyContext) -> Strategy:
    from autotune.search.enumeration import EnumerationStrategy

    order = None
    if ctx.valid and ctx.history and 0 < ctx.budget < len(ctx.valid):
        # a budgeted exhaustive search takes the configs the model ranks best first
        from autotune.search.auto import model_order

        order = model_order(ctx)
    return EnumerationStrategy(ctx, order)


#: the strategy used when none is named
DEFAULT_STRATEGY = "auto"

register("auto", _auto)
register("tpe", _tpe)
register("random", _random)
register("exhaustive", _exhaustive)
