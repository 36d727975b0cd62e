"""Optuna samplers as strategies, on an in-memory study: Optuna proposes, but the hot loop pays no database
round trip per trial. The study is rebuilt from our trials table at start (every result the loop tells,
whoever measured it) and written to the database study in batches by ``StudyWriter``.

- Parameters: ordinal ones (numbers, 3+ choices) are Optuna int/float distributions, on a log scale for
  ``pow2``-like choices, snapped to the nearest choice (``search.encoding``); the rest categorical. That is
  the database study's view (optuna-dashboard plots numbers) and the random sampler's. TPE proposes over
  every parameter as categorical (``ordinal_view=False``): a Parzen estimator over numbers spreads a good value's
  weight onto its numeric neighbours, and on GPU landscapes a neighbour is often far worse (a tile of 3
  between 2 and 4; shared memory on or off changes which block sizes win). Replayed on the peer convolution
  landscapes its regret was 111-259 % at 10-80 evaluations, the categorical view's 12-93 %
  (docs/strategies.md).
- Batches: several ``ask`` calls before any ``tell``; TPE's ``constant_liar`` treats the pending ones as
  bad so a batch spreads out.
- Invalid and failed configs are told PRUNED with ``autotune_status`` and the reason, never as a fake time
  (TPE counts pruned trials among the bad ones, so it learns to avoid them; no model sees a 1e3 s outlier).
- A proposal that repeats a config already told, or that was not evaluated here (over budget, claimed
  by another process), is told FAIL: samplers ignore it, so TPE's good set never fills with copies."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from autotune.search.base import Strategy, StrategyContext, StrategyInfo
from autotune.search.encoding import Ordinal, ordinal
from autotune.trial import TrialResult, config_hash

log = logging.getLogger("autotune.search")

#: draws per proposal before a sampler that only repeats configs already proposed gives up on that slot
REASK = 8


def tpe_sampler(seed: int | None) -> optuna.samplers.BaseSampler:
    with warnings.catch_warnings():
        # multivariate/group/constant_liar are experimental in Optuna 4-5
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True, group=True, n_startup_trials=8, constant_liar=True
        )


def distribution(p: Any) -> BaseDistribution:
    """Optuna's view of a parameter (see the module docstring)."""
    o = ordinal(p)
    if o is None:
        return CategoricalDistribution(list(p.choices))
    lo, hi = o.choices[0], o.choices[-1]
    if o.integer:
        return IntDistribution(int(lo), int(hi), log=o.log)
    return FloatDistribution(float(lo), float(hi), log=o.log)


def distributions(space: Any) -> dict[str, BaseDistribution]:
    return {p.name: distribution(p) for p in space.params}


def frozen_trial(
    space: Any, result: TrialResult, user_attrs: dict[str, Any] | None = None
) -> optuna.trial.FrozenTrial:
    """A finished trial for ``result``: COMPLETE with the time when it was measured, else FAIL with the
    status in ``autotune_status`` (the database study shows real times, never a penalty value)."""
    dists = distributions(space)
    params = {k: v for k, v in result.config.items() if k in dists}
    attrs = {"autotune_status": result.status.value, **(user_attrs or {})}
    if result.error:
        attrs["autotune_error"] = result.error[:500]
    ok = result.timed
    return optuna.trial.create_trial(
        params=params,
        distributions={k: dists[k] for k in params},
        value=result.time_s if ok else None,
        state=TrialState.COMPLETE if ok else TrialState.FAIL,
        user_attrs=attrs,
    )


class OptunaStrategy:
    def __init__(
        self, ctx: StrategyContext, sampler: optuna.samplers.BaseSampler, *, ordinal_view: bool = True
    ):
        """``ordinal_view``: the sampler sees ordinal parameters as numbers (False: every parameter categorical;
        the in-memory study only, the database study keeps ``distributions``)."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.ctx = ctx
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self._ordinals: dict[str, Ordinal] = {}
        if ordinal_view:
            self._ordinals = {p.name: o for p in ctx.space.params if (o := ordinal(p)) is not None}
            self._dists = distributions(ctx.space)
        else:  # every parameter a category (the module docstring says why)
            self._dists = {p.name: CategoricalDistribution(list(p.choices)) for p in ctx.space.params}
        self._pending: dict[str, list[optuna.trial.Trial]] = {}
        #: configs already told with a result: a later proposal of one is a repeat
        self._told: set[str] = set()

    def propose(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            for attempt in range(REASK):
                trial = self.study.ask()
                config = self._suggest(trial)
                h = config_hash(config)
                if (h not in self._told and h not in self._pending) or attempt == REASK - 1:
                    break
                # a repeat (snapping makes TPE's samples near a good config land on it): told FAIL here,
                # so the sampler draws again, instead of the loop giving up on it for a random config
                trial.set_user_attr("autotune_status", "repeat")
                self.study.tell(trial, state=TrialState.FAIL)
            self._pending.setdefault(h, []).append(trial)
            out.append(config)
        return out

    def _suggest(self, trial: optuna.trial.Trial) -> dict[str, Any]:
        """Define-by-run: conditional parameters are asked only when their condition holds."""
        config: dict[str, Any] = {}
        for p in self.ctx.space.params:
            if p.active(config, self.ctx.facts):
                o = self._ordinals.get(p.name)
                if o is None:
                    config[p.name] = trial.suggest_categorical(p.name, list(p.choices))
                elif o.integer:
                    d = self._dists[p.name]
                    config[p.name] = o.snap(trial.suggest_int(p.name, d.low, d.high, log=o.log))
                else:
                    d = self._dists[p.name]
                    config[p.name] = o.snap(trial.suggest_float(p.name, d.low, d.high, log=o.log))
        return config

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        h = config_hash(config)
        waiting = self._pending.get(h)
        trial = waiting.pop(0) if waiting else None
        if waiting is not None and not waiting:
            del self._pending[h]
        if trial is None:
            if result is not None and h not in self._told:
                # learnt from the store or another process: add it as finished
                self._told.add(h)
                self.study.add_trial(self._finished(result))
            return
        if result is None or h in self._told:
            trial.set_user_attr("autotune_status", "repeat" if result is not None else "not_evaluated")
            self.study.tell(trial, state=TrialState.FAIL)
            return
        self._told.add(h)
        if result.timed:
            self.study.tell(trial, result.time_s)
            return
        trial.set_user_attr("autotune_status", result.status.value)
        if result.error:
            trial.set_user_attr("autotune_error", result.error[:300])
        self.study.tell(trial, state=TrialState.PRUNED)

    def _finished(self, result: TrialResult) -> optuna.trial.FrozenTrial:
        ok = result.timed
        params = {k: v for k, v in result.config.items() if k in self._dists}
        attrs = {"autotune_status": result.status.value}
        if result.error:
            attrs["autotune_error"] = result.error[:300]
        return optuna.trial.create_trial(
            params=params,
            distributions={k: self._dists[k] for k in params},
            value=result.time_s if ok else None,
            state=TrialState.COMPLETE if ok else TrialState.PRUNED,
            user_attrs=attrs,
        )

    @property
    def exhausted(self) -> bool:
        return False


def _tpe(ctx: StrategyContext) -> Strategy:
    return OptunaStrategy(ctx, tpe_sampler(ctx.seed), ordinal_view=False)


def _random(ctx: StrategyContext) -> Strategy:
    return OptunaStrategy(ctx, optuna.samplers.RandomSampler(seed=ctx.seed))


TPE = StrategyInfo("tpe", _tpe, exhaustive_when_small=True, summary="Optuna's multivariate TPE")
RANDOM = StrategyInfo("random", _random, summary="uniform random sampling")
