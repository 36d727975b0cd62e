"""Exhaustive search: every valid config in enumeration order, budgeted by ``--trials`` like the others.
Only for spaces small enough to list (the tuner refuses it on larger ones)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..trial import TrialResult
from .base import StrategyContext


class EnumerationStrategy:
    def __init__(self, ctx: StrategyContext):
        self._it: Iterator[dict[str, Any]] = iter(ctx.valid or ())
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
