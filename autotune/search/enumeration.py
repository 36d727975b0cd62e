"""Exhaustive search: every valid config, budgeted by ``--trials`` like the others. In enumeration order,
or, when the store has other shapes' measurements and the budget is smaller than the space, in the order
the ``auto`` strategy's model ranks them. Only for spaces small enough to list (the tuner refuses it on
larger ones)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from autotune.search.base import StrategyContext
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
