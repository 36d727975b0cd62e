"""The one search loop: ``autotune replay`` is ``autotune search``'s ``ShapeSearch`` on the simulated
backend, so a replayed run and a search of the same landscape with the same strategy seed evaluate the same
configs in the same order (a replay's run seed gives each strategy its own: ``replay.strategy_seed``)."""

from __future__ import annotations

import pytest

from autotune.engine import SerialPipeline, SimulatedBackend, SimulatedKernel
from autotune.engine.simulated import simulated_env
from autotune.search import strategy_info
from autotune.search.base import load_history
from autotune.settings import SearchSettings
from autotune.tuning.replay import history_store, replay_one, strategy_seed
from autotune.tuning.tuner import Tuner
from tests.test_auto import landscape


@pytest.mark.parametrize("strategy", ["auto", "tpe"])
def test_a_replay_is_the_search_on_the_simulated_backend(sqlite_url, strategy):
    """A search (``Tuner``, as ``autotune search`` runs it) of the N=16 landscape, in a database holding
    the N=8 and N=32 ones, and the replay of that landscape with the same history: the same trajectory."""
    target, others = landscape(16), [landscape(8), landscape(32)]
    store = history_store(others, sqlite_url)
    env = simulated_env(target.device_name, target.facts)
    history = load_history(store.history, target.kernel, target.space, env)
    settings = SearchSettings(
        devices="sim:0",
        strategy=strategy,
        trials=14,
        seed=strategy_seed(3, strategy),  # what replay_one's seed 3 gives the strategy
        compile_workers=0,
        retime_top=0,
    )
    events = []
    tuner = Tuner(
        "sim",
        store,
        settings,
        on_event=events.append,
        backend=SimulatedBackend.of(SimulatedKernel.of([target])),
        pipeline=lambda backend, workers: SerialPipeline(backend, [], depth=6),
    )
    with tuner:
        tuner.start()
        report = tuner.search_shape(target.shape)
    searched = [e.best.time_s if e.best else None for e in events]
    store.close()
    # the replay is given what the search read from the database (a strategy that wants it)
    assert report.history_points == (len(history) if strategy_info(strategy).wants_history else 0)
    run = replay_one(target, strategy, 14, 3, history, depth=6)
    assert run.best_after == searched and len(searched) == report.evaluations == 14
    assert run.invalid == report.invalid
