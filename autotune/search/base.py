"""The strategy interface."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..space import Space
from ..trial import TrialResult


@dataclass
class StrategyContext:
    space: Space
    facts: Mapping[str, Any]
    seed: int | None
    #: every valid config when the space is small enough to enumerate, else None (sample instead)
    valid: list[dict[str, Any]] | None


class Strategy(Protocol):
    """Proposes configs and learns from results. The search loop filters what it proposes (invalid,
    already known, claimed by another process) and tells every proposal back."""

    def propose(self, n: int) -> list[dict[str, Any]]:
        """Up to ``n`` configs to evaluate next (fewer, or none when it has nothing left)."""

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        """The outcome of a config: a result (measured here, elsewhere, or invalid), or None when it was
        not evaluated (claimed by another process, a repeat, or over budget)."""

    @property
    def exhausted(self) -> bool:
        """True when it will propose nothing new."""
