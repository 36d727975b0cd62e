"""The ``auto`` strategy (the default): learns from the store, then from this shape's results.

An Optuna sampler (``AutoSampler``, a ``BaseSampler``), so ask/tell, the database study and optuna-dashboard
work as with TPE. Per shape:

1. **Candidates**: the space's valid configs (every one when it can be listed, else a sample of
   ``POOL_SIZE``); it only ever proposes a valid config never measured, failed or pending under this key.
2. **Prior** (``surrogate.TransferPrior``): trained on every ``ok`` trial of the same kernel under other
   keys in the store (``store.history.transfer``: other shapes; other devices, software versions and
   search spaces weighted lower), on parameters, shape and the kernel file's analytic features.
3. **Correction** (``surrogate.LocalCorrection``): a GP on this shape's residuals; the next config
   minimizes ``prior + GP mean - KAPPA * GP sd`` (a lower confidence bound); a batch is built by
   "kriging believer" (a pending config counts as measured at its predicted time).
4. **With too little data**: first the default config (the search loop runs it), then the best configs
   of the nearest tuned shapes, then the prior's best; with no prior, a space-filling design (greedy
   max-min distance) until ``N_INIT`` results, then the GP alone.
5. **Coverage**: with a prior, one choice in ``COVER_EVERY`` is the best-scored candidate holding a
   parameter value that no config of this shape has tried yet. A prior trained on other shapes cannot rank
   what none of them favoured: replayed leave-one-shape-out, split-K (slow on every large shape) stayed
   untried for 36 of 40 evaluations at M=64, K=7168 without it (47 % regret at 40; 0.15 % with it).

It proposes as many configs as keep the pipeline full (the search loop asks for them: a compile worker that
waits for a model costs more than a proposal chosen without the newest results)."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.search.base import HistoryPoint, StrategyContext, StrategyInfo
from autotune.search.encoding import Encoder, ordinal
from autotune.search.optuna_strategy import OptunaStrategy, distributions
from autotune.search.surrogate import LocalCorrection, TransferPrior, standardize
from autotune.shapes import shape_distance
from autotune.trial import config_hash

log = logging.getLogger("autotune.search")

#: candidates sampled from a space too large to list
POOL_SIZE = 4096
#: exploration weight of the lower confidence bound
KAPPA = 1.0
#: the GP's inputs: "params" (the parameters only) or "all" (parameters and the kernel's features)
GP_INPUTS = "all"
#: with a prior: results on this shape before the GP corrects it (until then, the prior's best, diverse)
PRIOR_ONLY = 8
#: penalty (in log time) on a config next to one already chosen, in the prior-only phase
DIVERSITY = 0.5
#: results on this shape before the GP drives (without a prior: a space-filling design until then)
N_INIT = 3
#: with a prior, one choice in COVER_EVERY (after the nearest shapes' bests) is the best candidate with a
#: parameter value not yet tried on this shape: the prior cannot rank what its shapes never favoured (e.g.
#: split-K, bad on every large shape it learned from, best at small M and large K)
COVER_EVERY = 3
#: best configs of this many nearest tuned shapes are tried first
NEAREST_SHAPES = 3
#: a prior needs this many history points
MIN_HISTORY = 30
#: a history shape's weight decays as exp(-distance / SHAPE_SCALE) (log2 units: ``shapes.shape_distance``),
#: so the prior follows the nearest shapes where they disagree with far ones
SHAPE_SCALE = 2.0


class AutoSampler(BaseSampler):
    def __init__(self, ctx: StrategyContext):
        self.ctx = ctx
        self.seed = ctx.seed
        self._rng = random.Random(ctx.seed)
        self._fallback = RandomSampler(seed=ctx.seed)
        self._dists = distributions(ctx.space)
        self._ordinals = {p.name: o for p in ctx.space.params if (o := ordinal(p)) is not None}
        t0 = time.perf_counter()
        self.pool = self._pool()
        self._index = {config_hash(c): i for i, c in enumerate(self.pool)}
        feats = ctx.features(ctx.shape, self.pool) if ctx.features and self.pool else None
        names = sorted({k for f in feats or () for k in f})
        self.encoder = Encoder(ctx.space.params, ctx.shape_params, names)
        x_pool = np.array(
            [
                self.encoder.row(c, ctx.shape, f)
                for c, f in zip(self.pool, feats or [None] * len(self.pool), strict=True)
            ]
        ).reshape(len(self.pool), self.encoder.width)
        # the GP sees parameters (and features, GP_INPUTS="all"), not the shape: constant within a search
        n_par, n_dims = self.encoder.n_param_cols, len(ctx.shape_params)
        gp_cols = list(range(n_par))
        if GP_INPUTS == "all":
            gp_cols += list(range(n_par + n_dims, self.encoder.width))
        self.x_gp = standardize(x_pool[:, gp_cols]) if len(self.pool) else x_pool
        self.prior = np.zeros(len(self.pool))
        self.has_prior = False
        self.seeds: list[int] = []  # pool indices to try first: best configs of the nearest shapes
        if ctx.history and len(ctx.history) >= MIN_HISTORY and self.pool:
            self._fit_prior(ctx.history, names, x_pool)
        self.local = LocalCorrection(ctx.seed)
        #: pool indices holding each (parameter, value): the coverage choices
        self._by_value: dict[tuple[str, Any], np.ndarray] = {}
        for p in ctx.space.params:
            for v in {c.get(p.name) for c in self.pool} - {None}:
                self._by_value[(p.name, v)] = np.array([c.get(p.name) == v for c in self.pool])
        self._choices = 0
        self.setup_s = time.perf_counter() - t0
        log.info(
            "auto: %d candidates, %d history points, prior=%s, %.2f s",
            len(self.pool),
            len(ctx.history),
            self.has_prior,
            self.setup_s,
        )

    # ------------------------------------------------------------------ set-up

    def _pool(self) -> list[dict[str, Any]]:
        if self.ctx.valid is not None:
            return list(self.ctx.valid)
        return self.ctx.space.sample_unique(self._rng, POOL_SIZE, self.ctx.facts)

    def _fit_prior(self, history: Sequence[HistoryPoint], names: list[str], x_pool: np.ndarray) -> None:
        # times compare within a group (one shape on one device and space), never across: each point's
        # target is its time over the best of its group
        groups: dict[Any, list[HistoryPoint]] = {}
        for h in history:
            if h.time_s > 0 and math.isfinite(h.time_s):
                key = h.group if h.group is not None else tuple(sorted(h.dims.items()))
                groups.setdefault(key, []).append(h)
        rows, ys, ws = [], [], []
        nearest: list[tuple[float, float, tuple[tuple[str, int], ...], dict[str, Any]]] = []
        for points in groups.values():
            dims = points[0].dims
            configs = [p.config for p in points]
            feats = self.ctx.features(dims, configs) if self.ctx.features and names else None
            best = min(p.time_s for p in points)
            distance = shape_distance(dims, self.ctx.shape)
            near = math.exp(-distance / SHAPE_SCALE) if math.isfinite(distance) else 0.0
            for i, p in enumerate(points):
                rows.append(self.encoder.row(p.config, dims, feats[i] if feats else None))
                ys.append(math.log(p.time_s / best))
                ws.append(p.weight * near)
            top = min(points, key=lambda p: p.time_s)
            nearest.append((distance, -top.weight, tuple(sorted(dims.items())), top.config))
        # one seed per shape (a shape tuned on several devices or spaces: the closest environment's best)
        nearest.sort(key=lambda t: t[:2])
        shapes: set[tuple[tuple[str, int], ...]] = set()
        for _, _, shape, config in nearest:
            if len(shapes) >= NEAREST_SHAPES:
                break
            if shape in shapes:
                continue
            shapes.add(shape)
            i = self._index.get(config_hash(config))
            if i is not None and i not in self.seeds:
                self.seeds.append(i)
        prior = TransferPrior(self.seed).fit(np.array(rows), np.array(ys), np.array(ws))
        self.prior = prior.predict(x_pool)
        self.has_prior = True

    # ------------------------------------------------------------------ Optuna's sampler interface

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return dict(self._dists)

    def sample_independent(self, study, trial, param_name, param_distribution):  # noqa: ANN001
        # only reached for a param sample_relative left out (inactive in the chosen config, or an empty
        # pool): any value, the search loop checks the config
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]
    ) -> dict[str, Any]:
        if not self.pool:
            return {}
        observed: dict[int, float] = {}
        blocked: set[int] = set()
        for t in study.get_trials(deepcopy=False):
            if t.number == trial.number:
                continue
            i = self._index.get(config_hash(self._config(t.params)))
            if i is None:
                continue
            if t.state == TrialState.COMPLETE and t.value is not None and t.value > 0:
                observed[i] = min(observed.get(i, math.inf), float(t.value))
            blocked.add(i)  # measured, failed, pending or a repeat: never proposed again
        free = np.ones(len(self.pool), dtype=bool)
        free[list(blocked)] = False
        if not free.any():
            return {}
        choice = self._choose(observed, blocked, free)
        return dict(self.pool[choice])

    # ------------------------------------------------------------------ the choice

    def _choose(self, observed: dict[int, float], blocked: set[int], free: np.ndarray) -> int:
        for i in self.seeds:
            if free[i]:
                return i
        pending = [i for i in blocked if i not in observed]
        self._choices += 1
        cover = self.has_prior and self._choices % COVER_EVERY == 0
        if len(observed) < (PRIOR_ONLY if self.has_prior else N_INIT):
            if self.has_prior:
                c = self._cover(blocked, np.where(free, self.prior, np.inf)) if cover else None
                return c if c is not None else self._diverse_prior(blocked, free)
            return self._spread(blocked, free)
        idx = np.array(list(observed))
        y = np.log(np.array([observed[i] for i in idx])) - self.prior[idx]
        self.local.fit(self.x_gp[idx], y)
        if pending:
            pend = np.array(pending)
            believed, _ = self.local.predict(self.x_gp[pend])
            self.local.believe(self.x_gp[np.concatenate([idx, pend])], np.concatenate([y, believed]))
        mean, sd = self.local.predict(self.x_gp)
        score = np.where(free, self.prior + mean - KAPPA * sd, np.inf)
        c = self._cover(blocked, score) if cover else None
        return c if c is not None else int(score.argmin())

    def _cover(self, blocked: set[int], score: np.ndarray) -> int | None:
        """The best-scored free candidate holding a parameter value no chosen config holds yet."""
        tried = np.zeros(len(self.pool), dtype=bool)
        tried[list(blocked)] = True
        best: tuple[float, int] | None = None
        for has in self._by_value.values():
            if (has & tried).any():
                continue
            i = int(np.where(has, score, np.inf).argmin())
            if math.isfinite(score[i]) and (best is None or score[i] < best[0]):
                best = (float(score[i]), i)
        return best[1] if best else None

    def _diverse_prior(self, blocked: set[int], free: np.ndarray) -> int:
        """The prior's best, discounted near configs already chosen: the first batches cover several good
        regions of the prior instead of the neighbours of its single best."""
        score = self.prior
        if blocked and DIVERSITY > 0:
            chosen = self.x_gp[list(blocked)]
            d = np.sqrt(((self.x_gp[:, None, :] - chosen[None, :, :]) ** 2).sum(axis=2).min(axis=1))
            score = score + DIVERSITY * np.exp(-d)
        return int(np.where(free, score, np.inf).argmin())

    def _spread(self, blocked: set[int], free: np.ndarray) -> int:
        """The free candidate farthest from every config already chosen (a random one first)."""
        if not blocked:
            return int(self._rng.choice(np.flatnonzero(free)))
        chosen = self.x_gp[list(blocked)]
        d = ((self.x_gp[:, None, :] - chosen[None, :, :]) ** 2).sum(axis=2).min(axis=1)
        return int(np.where(free, d, -np.inf).argmax())

    def _config(self, params: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in params.items():
            o = self._ordinals.get(k)
            out[k] = o.snap(v) if o is not None else v
        return out


class AutoStrategy(OptunaStrategy):
    def __init__(self, ctx: StrategyContext):
        super().__init__(ctx, AutoSampler(ctx))


INFO = StrategyInfo(
    "auto",
    AutoStrategy,
    wants_history=True,
    exhaustive_when_small=True,
    min_history=MIN_HISTORY,
    summary="a transfer prior from the store's other shapes, corrected by a GP on this shape",
)


def model_order(ctx: StrategyContext) -> list[dict[str, Any]] | None:
    """The valid configs, best first by the nearest shapes' bests and then the prior (None without one)."""
    sampler = AutoSampler(ctx)
    if not sampler.has_prior:
        return None
    rank = [
        *sampler.seeds,
        *(int(i) for i in np.argsort(sampler.prior, kind="stable") if int(i) not in sampler.seeds),
    ]
    return [sampler.pool[i] for i in rank]
