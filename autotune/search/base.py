"""The strategy interface and what a strategy is given."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from autotune.space.space import Space
from autotune.trial import TrialResult

if TYPE_CHECKING:
    from autotune.store.protocols import HistorySource

#: features(shape, configs) -> one dict of the kernel's analytic features per config, or None when the
#: kernel file declares none (computed in a worker process: the orchestrator never imports kernel files)
FeatureFn = Callable[[Mapping[str, int], list[dict[str, Any]]], "list[dict[str, float]] | None"]


#: proposals in a row that bring nothing new (invalid, known, claimed elsewhere) before the search loop
#: (``tuning.shape_search``) feeds the strategy an unseen valid config itself
MAX_STALE = 25


@dataclass(frozen=True)
class HistoryPoint:
    """An ``ok`` measurement of the same kernel under another key (another shape, device, software version
    or search space): what the ``auto`` strategy learns from before this shape has any result."""

    dims: dict[str, int]
    config: dict[str, Any]
    time_s: float
    #: 1 for this device, software and space; lower for other versions, devices or spaces
    weight: float = 1.0
    #: the measurements whose times compare (one shape on one device and space: the store's key id);
    #: None groups by shape alone
    group: int | None = None
    #: the GPU it was measured on (its name: ``devices.device_features`` reads its facts); "" unknown
    device: str = ""


def load_history(
    history: HistorySource,
    kernel: str,
    space: Space,
    env: Mapping[str, Any],
    exclude_key_id: int | None = None,
) -> list[HistoryPoint]:
    """What the store's ``history`` holds of ``kernel`` under other keys than ``exclude_key_id`` for a search
    over ``space`` (``history.transfer``: this space's configs, and other spaces' that set only its
    parameters)."""
    rows = history.transfer(
        kernel, space.hash(), dict(env), exclude_key_id=exclude_key_id, params=[p.name for p in space.params]
    )
    return [HistoryPoint(dims, config, t, w, key_id, gpu) for key_id, dims, config, t, w, gpu in rows]


@dataclass
class StrategyContext:
    space: Space
    facts: Mapping[str, Any]
    seed: int | None
    #: every valid config when the space is small enough to enumerate, else None (sample instead)
    valid: list[dict[str, Any]] | None
    #: the shape searched, its parameter names, the kernel's default config
    shape: dict[str, int] = field(default_factory=dict)
    shape_params: tuple[str, ...] = ()
    default: dict[str, Any] | None = None
    #: other keys' ok trials of this kernel (other shapes, devices, versions, spaces: ``store.history.transfer``)
    history: Sequence[HistoryPoint] = ()
    features: FeatureFn | None = None
    #: the search's evaluation budget (--trials)
    budget: int = 0
    #: the GPU searched on (its name, as the environment reports it): the device the model predicts for
    device: str = ""


class Strategy(Protocol):
    """Proposes configs and learns from results. The search loop filters what it proposes (invalid,
    already known, claimed by another process) and tells every proposal back. What the loop needs to know
    of a strategy beyond this is declared in its ``StrategyInfo``. A strategy may also define
    ``change_course() -> bool``: the stopping rule asks it at a stall, before stopping, to leave what it
    followed (``auto`` drops its prior); True means it did, and the stall starts over."""

    def propose(self, n: int) -> list[dict[str, Any]]:
        """Up to ``n`` configs to evaluate next (fewer, or none when it has nothing left)."""

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        """The outcome of a config: a result (measured here, elsewhere, or invalid), or None when it was
        not evaluated (claimed by another process, a repeat, or over budget)."""

    @property
    def exhausted(self) -> bool:
        """True when it will propose nothing new."""


@dataclass(frozen=True)
class StrategyInfo:
    """A strategy as the registry knows it: its factory and what the search loop must do for it. The loop
    reads these capabilities and never a strategy's name, so a new strategy declares them here (its module
    defines one; ``autotune.search.register`` or the ``autotune.strategies`` entry point names it)."""

    name: str
    factory: Callable[[StrategyContext], Strategy]
    #: the loop reads the kernel's measurements under other keys (other shapes, devices, versions, spaces)
    #: from the store into ``StrategyContext.history``
    wants_history: bool = False
    #: when every valid config fits the budget, the exhaustive strategy searches instead (no model needed)
    exhaustive_when_small: bool = False
    #: proposes every valid config in turn (a search with it is reported as exhaustive)
    exhaustive: bool = False
    #: needs ``StrategyContext.valid``: refused on a space too large to list
    needs_valid_list: bool = False
    #: history points it needs before the history changes anything (the search says when fewer were read)
    min_history: int = 0
    #: one line for listings
    summary: str = ""
