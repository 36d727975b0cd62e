"""The ``auto`` strategy (the default): learns from the store, then from this shape's results.

An Optuna sampler (``AutoSampler``, a ``BaseSampler``), so ask/tell, the database study and optuna-dashboard
work as with TPE. Per shape:

1. **Candidates**: the space's valid configs (every one when it can be listed, else a sample of
   ``POOL_SIZE``); it only ever proposes a valid config never measured, failed or pending under this key.
2. **Prior** (``surrogate.TransferPrior``): trained on every ``ok`` trial of the same kernel under other
   keys in the store (``store.history.transfer``: other shapes; other devices, software versions and
   search spaces weighted lower), on parameters, shape, the GPU's facts (``devices.device_features``) and
   the kernel file's analytic features. A history group (one shape on one device) weighs by how near its
   shape and GPU are and by its coverage (``sqrt(measured / candidates)``: a 40-evaluation search is not a
   sweep). The prior has an uncertainty (``surrogate.PriorSpread``: wide where few, far or light history
   points lie) and a trust (``surrogate.prior_trust``): what the history earned (coverage, GPU likeness),
   then how well the prior ranks this shape's own results (Kendall's tau), down to 0 (ignored).
3. **Correction** (``surrogate.LocalCorrection``): a GP on this shape's residuals ``log t - trust * prior``;
   the next config minimizes ``trust * prior + GP mean - KAPPA * sd`` (a lower confidence bound; ``sd``
   joins the GP's and the trusted prior's uncertainty); a batch is built by "kriging believer" (a pending
   config counts as measured at its predicted time).
4. **With too little data**: first the default config (the search loop runs it), then the best configs
   of the nearest tuned (shape, GPU) groups, then the prior's best where it is sure (``prior - KAPPA *
   prior sd``) until ``PRIOR_ONLY`` results or a prior that ranks them wrong; with no prior, a
   space-filling design (greedy max-min distance) until ``N_INIT`` results, then the GP alone.
5. **Coverage**: with a prior, one choice in ``COVER_EVERY`` holds a parameter value that no config of
   this shape has tried yet: alternately the best-scored such candidate and a random one (exploration
   that does not lean on the prior's favourites). A prior trained on other shapes cannot rank what none
   of them favoured: replayed leave-one-shape-out, split-K (slow on every large shape) stayed untried for
   36 of 40 evaluations at M=64, K=7168 without it (47 % regret at 40; 0.15 % with it).
6. **At a stall** (``stopping``: the search stalled, the model's bound still wide): a prior still followed is
   dropped for the rest of the search (``change_course``), once. A prior can rank a shape's results fairly and
   still put its best region low (an H100 searched with the H200's partial searches in the store: 12.5 % off
   at the stall; docs/benchmarks.md).

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

from autotune.devices import DEVICE_FEATURES, device_distance, device_features
from autotune.search.base import HistoryPoint, StrategyContext, StrategyInfo
from autotune.search.encoding import Encoder, ordinal
from autotune.search.optuna_strategy import OptunaStrategy, distributions
from autotune.search.surrogate import LocalCorrection, PriorSpread, TransferPrior, prior_trust, standardize
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
#: best configs of this many nearest tuned (shape, GPU) groups are tried first
NEAREST_SHAPES = 3
#: another GPU's measurements weigh exp(-device_distance / DEVICE_SCALE) (``devices.device_distance``:
#: 1 ~ a factor 2 in every size), on top of the store's other-GPU weight; the seeds rank groups by shape
#: distance + device distance
DEVICE_SCALE = 1.0
#: the trust a history earns before any result: max over groups of coverage^(1/4) x GPU likeness, at least
#: this (a 40-of-4,000 search earns ~0.3, a sweep on the same GPU 1)
MIN_TRUST = 0.2

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
        self._devices: dict[str, dict[str, float] | None] = {"": None}
        self.device = device_features(ctx.device, dict(ctx.facts)) if ctx.device else None
        known = self.device is not None or any(self._device(h.device) for h in ctx.history)
        self.encoder = Encoder(ctx.space.params, ctx.shape_params, names, DEVICE_FEATURES if known else ())
        x_pool = np.array(
            [
                self.encoder.row(c, ctx.shape, f, self.device)
                for c, f in zip(self.pool, feats or [None] * len(self.pool), strict=True)
            ]
        ).reshape(len(self.pool), self.encoder.width)
        # the GP sees parameters (and features, GP_INPUTS="all"), not the shape nor the device: constant
        # within a search
        context = set(self.encoder.context_cols)
        n_par = self.encoder.n_param_cols
        gp_cols = [i for i in range(self.encoder.width if GP_INPUTS == "all" else n_par) if i not in context]
        self.x_gp = standardize(x_pool[:, gp_cols]) if len(self.pool) else x_pool
        self.prior = np.zeros(len(self.pool))
        self.prior_sd = np.zeros(len(self.pool))
        self.has_prior = False
        #: the prior's weight: what the history earned, then how it ranks this shape's results
        self.trust0 = self.trust = 0.0
        self.dropped = False  # the prior led the search into a stall and is ignored from then on
        self.tau: float | None = None
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
        self._covers = 0
        self._trial_pool: dict[int, int | None] = {}
        #: the results the model was last fitted on, and its mean over the pool (None: not fitted)
        self._fit_key: tuple[tuple[int, float], ...] | None = None
        self._mean: np.ndarray | None = None
        self.setup_s = time.perf_counter() - t0
        log.info(
            "auto: %d candidates, %d history points, prior=%s (trust %.2f), %.2f s",
            len(self.pool),
            len(ctx.history),
            self.has_prior,
            self.trust0,
            self.setup_s,
        )

    def _device(self, name: str) -> dict[str, float] | None:
        if name not in self._devices:
            self._devices[name] = device_features(name)
        return self._devices[name]

    def _likeness(self, name: str) -> float:
        """How much another GPU's results stand for this one's (1: the same model or unknown either way)."""
        if name == (self.ctx.device or "") or not name:
            return 1.0
        d = device_distance(self._device(name), self.device)
        return math.exp(-d / DEVICE_SCALE) if math.isfinite(d) else 1.0

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
                key = h.group if h.group is not None else (tuple(sorted(h.dims.items())), h.device)
                groups.setdefault(key, []).append(h)
        rows, ys, ws = [], [], []
        ranked: list[tuple[float, float, tuple[Any, ...], dict[str, Any]]] = []
        candidates = max(len(self.pool), 1)
        for points in groups.values():
            dims, gpu = points[0].dims, points[0].device
            configs = [p.config for p in points]
            feats = self.ctx.features(dims, configs) if self.ctx.features and names else None
            best = min(p.time_s for p in points)
            distance = shape_distance(dims, self.ctx.shape)
            near = math.exp(-distance / SHAPE_SCALE) if math.isfinite(distance) else 0.0
            like = self._likeness(gpu)
            # a partial search's points stand for less of the space than a sweep's (and cluster where
            # that search went): weight by the square root of its coverage
            coverage = min(1.0, len({config_hash(c) for c in configs}) / candidates)
            self.trust0 = max(self.trust0, coverage**0.25 * like)
            dev = self._device(gpu)
            for i, p in enumerate(points):
                rows.append(self.encoder.row(p.config, dims, feats[i] if feats else None, dev))
                ys.append(math.log(p.time_s / best))
                ws.append(p.weight * near * like * math.sqrt(coverage))
            top = min(points, key=lambda p: p.time_s)
            d_dev = 0.0 if like == 1.0 else -math.log(like) * DEVICE_SCALE
            ranked.append((distance + d_dev, -top.weight, (tuple(sorted(dims.items())), gpu), top.config))
        self.trust0 = max(MIN_TRUST, min(1.0, self.trust0))
        self.trust = self.trust0
        # one seed per (shape, GPU) group, nearest first (a shape tuned in several spaces or software
        # versions on one GPU: the closest environment's best)
        ranked.sort(key=lambda t: t[:2])
        seen: set[tuple[Any, ...]] = set()
        for _, _, where, config in ranked:
            if len(seen) >= NEAREST_SHAPES:
                break
            if where in seen:
                continue
            seen.add(where)
            i = self._index.get(config_hash(config))
            if i is not None and i not in self.seeds:
                self.seeds.append(i)
        x_hist, w = np.array(rows), np.array(ws)
        prior = TransferPrior(self.seed).fit(x_hist, np.array(ys), w)
        self.prior = prior.predict(x_pool)
        n_par = self.encoder.n_param_cols
        spread = PriorSpread(x_hist[:, :n_par], w, x_pool[:, :n_par], self.seed)
        self.prior_sd = spread.sd(x_pool[:, :n_par])
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
            i = self._trial_index(t)
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

    def _trial_index(self, t: FrozenTrial) -> int | None:
        """The pool index of a trial's config, cached by trial number: a trial's parameters never change
        once asked, and snapping and hashing every trial on every proposal cost more than the model."""
        if t.number in self._trial_pool:
            return self._trial_pool[t.number]
        i = self._index.get(config_hash(self._config(t.params)))
        if t.params:  # an empty one may be a trial still being asked
            self._trial_pool[t.number] = i
        return i

    # ------------------------------------------------------------------ the choice

    def _choose(self, observed: dict[int, float], blocked: set[int], free: np.ndarray) -> int:
        for i in self.seeds:
            if free[i]:
                return i
        pending = [i for i in blocked if i not in observed]
        self._choices += 1
        cover = self.has_prior and self._choices % COVER_EVERY == 0
        idx = np.array(sorted(observed), dtype=int)
        log_t = np.log(np.array([observed[i] for i in idx]))
        # a batch (the proposals between two results) shares one fit: the model depends on the results
        # alone, the pending configs only shrink its sd near them (``sd_given``)
        key = tuple((int(i), observed[int(i)]) for i in idx)
        fresh = key != self._fit_key
        if fresh:
            self._fit_key, self._mean = key, None
            if self.has_prior and not self.dropped:
                self.trust, self.tau = prior_trust(self.prior[idx], log_t, self.trust0)
        prior = self.trust * self.prior
        wrong = self.tau is not None and self.tau <= 0  # the prior ranks this shape's results wrong
        if self.has_prior and len(observed) < PRIOR_ONLY and not wrong:
            # the prior's best where it is sure; where history is thin, its uncertainty invites a look
            sure = np.where(free, self.prior - KAPPA * self.prior_sd, np.inf)
            c = self._cover(blocked, sure, free) if cover else None
            return c if c is not None else self._diverse_prior(blocked, free, sure)
        if len(observed) < N_INIT:
            return self._start(blocked, free)
        if self._mean is None:
            self.local.fit(self.x_gp[idx], log_t - prior[idx])
            self._mean, _ = self.local.predict(self.x_gp)
        # kriging believer: the pending configs counted at their predicted times leave the mean as it is
        # and shrink the sd near them, so a batch spreads out
        mean = self._mean
        sd = self.local.posterior().sd_given(self.x_gp, np.array(sorted(pending), dtype=int))
        sd = np.sqrt(sd**2 + (self.trust * self.prior_sd) ** 2)
        score = np.where(free, prior + mean - KAPPA * sd, np.inf)
        c = self._cover(blocked, score, free) if cover else None
        return c if c is not None else int(score.argmin())

    def drop_prior(self) -> bool:
        """Ignore the prior for the rest of the search, if it is still followed (True: dropped now). A prior
        can rank a shape's results fairly overall and still put its best region low; once the search has
        stalled where it points, only the GP and the coverage picks can leave."""
        if not self.has_prior or self.dropped or self.trust <= 0:
            return False
        log.info(
            "%s: stalled where the prior points (trust %.2f); the prior is dropped",
            self.ctx.shape,
            self.trust,
        )
        self.dropped = True
        self.trust, self._fit_key, self._mean = 0.0, None, None
        return True

    def _cover(self, blocked: set[int], score: np.ndarray, free: np.ndarray) -> int | None:
        """A free candidate holding a parameter value no chosen config holds yet: alternately the
        best-scored one and a random one (not the prior's favourite for every other parameter)."""
        tried = np.zeros(len(self.pool), dtype=bool)
        tried[list(blocked)] = True
        untried = [has for has in self._by_value.values() if not (has & tried).any() and (has & free).any()]
        if not untried:
            return None
        self._covers += 1
        if self._covers % 2 == 0:
            has = untried[self._rng.randrange(len(untried))]
            return int(self._rng.choice(np.flatnonzero(has & free)))
        best: tuple[float, int] | None = None
        for has in untried:
            i = int(np.where(has, score, np.inf).argmin())
            if math.isfinite(score[i]) and (best is None or score[i] < best[0]):
                best = (float(score[i]), i)
        return best[1] if best else None

    def _start(self, blocked: set[int], free: np.ndarray) -> int:
        """Before the GP has data: the free candidate farthest from every config already chosen (a random
        one first). A k-means design (interior points) was tried instead and replayed worse on the peer
        convolution landscapes (598 / 364 / 64 / 13 % at 10 / 20 / 40 / 80 against 136 / 34 / 20 / 4.6 %):
        their best configs sit near the space's edges."""
        if len(blocked) <= 1:
            # a random one first, also beside the default config (measured first, alone): farthest from the
            # default alone made every seed's start the same run
            return int(self._rng.choice(np.flatnonzero(free)))
        chosen = self.x_gp[list(blocked)]
        d = ((self.x_gp[:, None, :] - chosen[None, :, :]) ** 2).sum(axis=2).min(axis=1)
        return int(np.where(free, d, -np.inf).argmax())

    def _diverse_prior(self, blocked: set[int], free: np.ndarray, score: np.ndarray) -> int:
        """The best of ``score`` (the prior), discounted near configs already chosen: the first batches
        cover several good regions of the prior instead of the neighbours of its single best."""
        if blocked and DIVERSITY > 0:
            chosen = self.x_gp[list(blocked)]
            d = np.sqrt(((self.x_gp[:, None, :] - chosen[None, :, :]) ** 2).sum(axis=2).min(axis=1))
            score = score + DIVERSITY * np.exp(-d)
        return int(np.where(free, score, np.inf).argmin())

    def _config(self, params: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in params.items():
            o = self._ordinals.get(k)
            out[k] = o.snap(v) if o is not None else v
        return out


class AutoStrategy(OptunaStrategy):
    def __init__(self, ctx: StrategyContext):
        super().__init__(ctx, AutoSampler(ctx))

    def change_course(self) -> bool:
        """At a stall (``stopping.StoppingRule``): drop a prior still followed, once; the GP alone goes on."""
        return self.study.sampler.drop_prior()


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
