"""When a search without ``--trials`` stops: the stopping rule, the default budget of every search loop.

A count is the wrong budget: 40 evaluations stop before the answer is trustworthy on an unseen kernel, and
waste time on an easy one. As Optuna's ``Terminator`` (a regret bound against the noise of the objective),
the rule stops when

- the **bound** on the improvement still possible among the unmeasured valid configs is below the measured
  **noise**: a Gaussian process on this shape's log times (``surrogate.LocalCorrection``, the ``auto``
  strategy's own model, so any strategy gets the same rule), bound = ``min UCB(measured) - min
  LCB(unmeasured)`` (GP-UCB's regret bound, as ``optuna.terminator.RegretBoundEvaluator``), relative;
- **and** the last ``patience`` evaluations brought nothing beyond the noise (the bound is a model's; the
  measured record is not);

and the best config is a local optimum: its one-move neighbours (``Space.neighbours``: one param at an
adjacent choice) are measured, asked of the loop (``take_wanted``) when they are not, and again for a new
best they find (live on the H200 the GP called a search converged 3.7 % off the best, whose config was
one pipeline stage from the one it stopped at; a model's bound cannot see a lone narrow optimum, a local
check can, for at most a few evaluations per best);

A stall is not taken as the answer while the strategy still follows the store's history: a strategy that
defines ``change_course()`` (``auto``: drop its prior) is asked first, once, and the stall starts over. Replayed
with another GPU's partial searches in the store (the H200's 40-evaluation searches for an H100 target), the
prior ranked the target's results fairly (Kendall's tau 0.2-0.3, trust 0.5-0.7) but put its best region low:
two of four seeds stalled 12.5-13.1 % off, where the empty store found the best by 80 evaluations
(docs/benchmarks.md).

never before a floor (``min`` evaluations of the key, or every valid config when fewer), never after a
ceiling (``max`` new evaluations) nor a wall-time ceiling (as Kernel Tuner's ``time_limit``), whichever comes
first. The noise is the larger of a floor (``noise``: run-to-run differences of a median on a GPU are about
1 %, more than a single measurement's spread shows) and the standard error of the best configs' medians
from their measured spreads.

Optuna's own ``Terminator`` is not used: it needs an Optuna study of every trial and refits a GP of its own
per check (BoTorch), while the loop keeps its results itself and strategies need not be Optuna's. Imports
stay light (numpy and scikit-learn when the bound is first computed): the search loop imports this module."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.trial import TrialResult, config_hash

#: width of the confidence bounds (sd units), as GP-UCB's sqrt(beta). Replayed, the largest expected
#: improvement of one config (EI) fell below 1 % at 24 % regret on the convolution landscape (the GP is
#: overconfident on a rough landscape) and their sum never did; this bound stayed above 30 % there and
#: reached 0 after ~130 evaluations of the H200 GEMM landscape, found at 46
BETA = 2.0
#: candidates sampled from a space too large to list, for the bound
POOL = 2048
#: the bound is computed at most every this many new results (a GP fit costs up to a second at 300 points)
CHECK_EVERY = 4
#: without a bound below the noise, the search still stops when this many times ``patience`` evaluations
#: brought nothing beyond the noise: replayed with a history, ``auto`` measured where its prior pointed, the
#: shape-only GP stayed unsure of the rest and the bound never fell (300 evaluations, the best found at 40)
STALL_FACTOR = 4
#: results after which a neighbour asked for (``_ask_neighbours``) and not yet seen is no longer waited for
NEIGHBOUR_WAIT = 64
#: the bound needs this many timed results
MIN_POINTS = 5

# why a search stopped (``ShapeReport.stop_reason``)
CONVERGED = "converged"  # the bound and the last `patience` evaluations are within the noise
STALLED = "stalled"  # STALL_FACTOR x `patience` evaluations brought nothing beyond the noise
CEILING = "ceiling"  # the rule's most evaluations
WALL = "wall"  # the rule's wall-time ceiling
TRIALS = "trials"  # the explicit --trials budget is spent
TIMEOUT = "timeout"  # --timeout
EXHAUSTED = "exhausted"  # nothing left to evaluate (every valid config measured or held elsewhere)


@dataclass(frozen=True)
class StopSettings:
    """The rule's parameters (``SearchSettings.stop``)."""

    min_evals: int = 30
    max_evals: int = 300
    wall_s: float = 300.0
    patience: int = 20
    noise: float = 0.01
    #: a best is final only once its one-move neighbours are measured
    neighbours: bool = True

    @classmethod
    def of(cls, settings: Any) -> StopSettings:
        """From a ``SearchSettings`` (its ``stop_*`` fields: settings never import the search package)."""
        s = settings
        return cls(s.stop_min, s.stop_max, s.stop_wall_s, s.stop_patience, s.stop_noise, s.stop_neighbours)


class StoppingRule:
    """Told every result of a shape (stored ones first), asked after each whether to stop.

    ``valid``: the space's valid configs when it can list them (the bound's candidates), else None (a
    sample of the space). ``bound`` and ``noise`` are the last values computed (None before the first)."""

    def __init__(
        self,
        settings: StopSettings,
        space: Any,
        facts: dict[str, int],
        valid: Sequence[dict[str, Any]] | None,
        seed: int | None = None,
    ):
        self.s, self.space, self.facts = settings, space, facts
        self.valid = valid
        self.seed = seed
        self.floor = min(settings.min_evals, len(valid)) if valid is not None else settings.min_evals
        #: config hash -> (config, time) of the timed results; hashes of every result (failed too)
        self.timed: dict[str, tuple[dict[str, Any], float, float | None]] = {}
        self.seen: set[str] = set()
        #: the best time after each result, in the order they came
        self.best_after: list[float] = []
        self.bound: float | None = None
        self.noise: float = settings.noise
        self.reason: str | None = None
        self._checked_at = -math.inf
        self._pool: list[dict[str, Any]] | None = None
        #: configs the rule wants measured before it stops (the best's neighbours), and every one asked
        self._wanted: list[dict[str, Any]] = []
        self._asked: dict[str, int] = {}  # config hash -> results when asked
        self.polished = 0
        #: called at a stall: True when the strategy changed course (it dropped the history it followed),
        #: and the stall starts over (``check``); None or False: the stall stops the search
        self.change_course: Callable[[], bool] | None = None
        self._since = 0  # the result from which a stall counts

    # -- what it is told

    def observe(self, res: TrialResult) -> None:
        """A result of this shape (any status but invalid; a repeat of a known config is ignored)."""
        h = config_hash(res.config)
        if h in self.seen:
            return
        self.seen.add(h)
        best = self.best_after[-1] if self.best_after else math.inf
        if res.timed and res.time_s and res.time_s > 0:
            self.timed[h] = (res.config, res.time_s, res.spread)
            best = min(best, res.time_s)
        self.best_after.append(best)

    @property
    def results(self) -> int:
        return len(self.best_after)

    # -- the verdict

    def stalled(self, factor: int = 1) -> bool:
        """The last ``factor`` x ``patience`` results improved the best by no more than the noise."""
        k = self.s.patience * factor
        if len(self.best_after) - self._since <= k or not math.isfinite(self.best_after[-1]):
            return False
        before = self.best_after[-k - 1]
        return not math.isfinite(before) or before <= self.best_after[-1] * (1.0 + self.noise)

    def check(self) -> bool:
        """Whether the search may stop now (sets ``reason``); cheap unless the bound is due."""
        if self.reason is not None:
            return True
        if self.results < self.floor:
            return False
        self.noise = self._noise()
        if not self.stalled() or self.results - self._checked_at < CHECK_EVERY:
            return False
        self._checked_at = self.results
        self.bound = self._bound()
        if self.bound is not None and self.bound <= self.noise:
            verdict = CONVERGED
        elif self.stalled(STALL_FACTOR):
            if self.change_course is not None and self.change_course():
                self._since = self.results
                return False
            verdict = STALLED
        else:
            return False
        if self.s.neighbours and self._ask_neighbours():
            return False
        self.reason = verdict
        return True

    def take_wanted(self) -> list[dict[str, Any]]:
        """The configs to evaluate next, before any proposal (each handed out once)."""
        wanted, self._wanted = self._wanted, []
        return wanted

    def _ask_neighbours(self) -> bool:
        """Whether the best's neighbours are still to be measured: those nobody measured nor was asked
        for are asked now; those asked are waited for (up to ``NEIGHBOUR_WAIT`` results: one held by
        another process that died, or otherwise lost, must not hold the search forever)."""
        if not self.timed:
            return False
        best = min(self.timed.values(), key=lambda t: t[1])[0]
        try:
            around = self.space.neighbours(best, self.facts)
        except Exception:  # a config the space no longer reads, a fact missing: nothing to check
            return False
        unseen = [(c, h) for c in around if (h := config_hash(c)) not in self.seen]
        for c, h in unseen:
            if h not in self._asked:
                self._asked[h] = self.results
                self._wanted.append(c)
                self.polished += 1
        return any(self.results - self._asked[h] < NEIGHBOUR_WAIT for _, h in unseen)

    def _noise(self) -> float:
        """The floor, or the standard error of the top configs' medians from their per-launch spreads
        ((p90 - p10) / median ~ 2.56 sd; a median of n samples has sd ~ 1.25 sd / sqrt(n); n unknown
        here, at least 10)."""
        top = sorted(self.timed.values(), key=lambda t: t[1])[:5]
        spreads = sorted(t[2] for t in top if t[2] is not None and math.isfinite(t[2]))
        measured = spreads[len(spreads) // 2] * 1.25 / 2.56 / math.sqrt(10) if spreads else 0.0
        return max(self.s.noise, measured)

    def _candidates(self) -> list[dict[str, Any]]:
        if self.valid is not None:
            return [c for c in self.valid if config_hash(c) not in self.seen]
        if self._pool is None:
            self._pool = self.space.sample_unique(random.Random(self.seed), POOL, self.facts)
        return [c for c in self._pool if config_hash(c) not in self.seen]

    def _bound(self) -> float | None:
        """``min UCB(measured) - min LCB(unmeasured)`` of a GP on log times, as a relative time; 0 when
        nothing is left unmeasured; None with too few timed results."""
        if len(self.timed) < MIN_POINTS:
            return None
        cands = self._candidates()
        if not cands:
            return 0.0
        import numpy as np

        from autotune.search.encoding import Encoder
        from autotune.search.surrogate import LocalCorrection, standardize

        enc = Encoder(self.space.params)
        measured = list(self.timed.values())
        x = standardize(np.array([enc.row(c) for c, _, _ in measured] + [enc.row(c) for c in cands]))
        xm, xc = x[: len(measured)], x[len(measured) :]
        y = np.log(np.array([t for _, t, _ in measured]))
        gp = LocalCorrection(self.seed)  # fresh: the encoded columns may differ from the last check's
        gp.fit(xm, y)
        mu_m, sd_m = gp.predict(xm)
        mu_c, sd_c = gp.predict(xc)
        gap = float(np.min(mu_m + BETA * sd_m) - np.min(mu_c - BETA * sd_c))
        return math.expm1(max(0.0, gap))
