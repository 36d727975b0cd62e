"""Exhaustive search: every valid config, budgeted by ``--trials`` like the others. In enumeration order,
or, when the store has other shapes' measurements and the budget is smaller than the space, in the order
the ``auto`` strategy's model ranks them. Only for spaces small enough to list (the tuner refuses it on
larger ones)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from autotune.search.base import Strategy, StrategyContext, StrategyInfo
from autotune.trial import TrialResult


class EnumerationStrategy:
    def __init__(self, ctx: StrategyContext, order: list[dict[str, Any]] | None = None):
        self._it: Iterator[dict[str, Any]] = iter(order if order is not None else ctx.valid or ())
        self._done = False

    def propose(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            try:
                out.append(next(self._it))
            except StopIteration:
                self._done = True
                break
        return out

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        pass

    @property
    def exhausted(self) -> bool:
        return self._done


def make(ctx: StrategyContext) -> Strategy:
    order = None
    if ctx.valid and ctx.history and 0 < ctx.budget < len(ctx.valid):
        # a budgeted exhaustive search takes the configs the model ranks best first
        from autotune.search.auto import model_order

        order = model_order(ctx)
    return EnumerationStrategy(ctx, order)


INFO = StrategyInfo(
    "exhaustive",
    make,
    wants_history=True,  # the order of a budgeted search
    exhaustive=True,
    needs_valid_list=True,
    summary="every valid config (model-ranked first when the store has other shapes and the budget is short)",
)
