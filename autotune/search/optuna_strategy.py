"""Optuna samplers as strategies, on an in-memory study: Optuna proposes, but the hot loop pays no database
round trip per trial. The study is rebuilt from our trials table at start (every result the loop tells,
whoever measured it) and written to the database study in batches by ``StudyWriter``.

- Batches: several ``ask`` calls before any ``tell``; TPE's ``constant_liar`` treats the pending ones as
  bad so a batch spreads out.
- Failed and invalid configs are told as infeasible (a constraint violation), never as a fake time, so a
  model never sees a 1e3 s outlier; configs not evaluated here are told FAIL (ignored by the samplers)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from ..trial import TrialResult, config_hash
from .base import StrategyContext

log = logging.getLogger("autotune.search")

#: user attr carrying the constraint violation of an asked trial (read by ``_constraints``)
_VIOLATION = "autotune_violation"
#: the time told for an infeasible trial: samplers with constraints rank it by the violation, not this
_INFEASIBLE_VALUE = 1.0


def _constraints(trial: optuna.trial.FrozenTrial) -> tuple[float]:
    return (float(trial.user_attrs.get(_VIOLATION, 0.0)),)


def tpe_sampler(seed: int | None) -> optuna.samplers.BaseSampler:
    with warnings.catch_warnings():
        # constraints_func: experimental in Optuna 4, deprecated (removal in 7) in 5 in favour of
        # Trial.set_constraint, which 4.x lacks; it works in both.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return optuna.samplers.TPESampler(
            seed=seed,
            multivariate=True,
            group=True,
            n_startup_trials=8,
            constant_liar=True,
            constraints_func=_constraints,
        )


def distributions(space: Any) -> dict[str, CategoricalDistribution]:
    return {p.name: CategoricalDistribution(list(p.choices)) for p in space.params}


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
    def __init__(self, ctx: StrategyContext, sampler: optuna.samplers.BaseSampler):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.ctx = ctx
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self._dists = distributions(ctx.space)
        self._pending: dict[str, list[optuna.trial.Trial]] = {}

    def propose(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            trial = self.study.ask()
            config = self._suggest(trial)
            self._pending.setdefault(config_hash(config), []).append(trial)
            out.append(config)
        return out

    def _suggest(self, trial: optuna.trial.Trial) -> dict[str, Any]:
        """Define-by-run: conditional parameters are asked only when their condition holds."""
        config: dict[str, Any] = {}
        for p in self.ctx.space.params:
            if p.active(config, self.ctx.facts):
                config[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        return config

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        h = config_hash(config)
        waiting = self._pending.get(h)
        trial = waiting.pop(0) if waiting else None
        if waiting is not None and not waiting:
            del self._pending[h]
        if trial is None:
            if result is not None:  # learnt from the store or another process: add it as finished
                self.study.add_trial(self._finished(result))
            return
        if result is None:
            self.study.tell(trial, state=TrialState.FAIL)
            return
        ok = result.timed
        trial.set_user_attr(_VIOLATION, 0.0 if ok else 1.0)
        self.study.tell(trial, result.time_s if ok else _INFEASIBLE_VALUE)

    def _finished(self, result: TrialResult) -> optuna.trial.FrozenTrial:
        ok = result.timed
        params = {k: v for k, v in result.config.items() if k in self._dists}
        violation = 0.0 if ok else 1.0
        return optuna.trial.create_trial(
            params=params,
            distributions={k: self._dists[k] for k in params},
            value=result.time_s if ok else _INFEASIBLE_VALUE,
            user_attrs={_VIOLATION: violation},
            system_attrs={"constraints": (violation,)},
        )

    @property
    def exhausted(self) -> bool:
        return False
