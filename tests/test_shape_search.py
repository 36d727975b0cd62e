"""The one search loop: ``autotune replay`` is ``autotune search``'s ``ShapeSearch`` on the simulated
backend, so a replayed run and a search of the same landscape with the same seed evaluate the same configs
in the same order."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autotune.engine import SerialPipeline, SimulatedBackend, SimulatedKernel
from autotune.engine.simulated import simulated_env
from autotune.search import strategy_info
from autotune.search.base import load_history
from autotune.settings import SearchSettings
from autotune.space import Space
from autotune.store import Store
from autotune.tuning.replay import history_store, replay_one
from autotune.tuning.tuner import Tuner
from tests.test_auto import SPACE, landscape, shifting
from tests.test_engine import sim_info


@pytest.mark.parametrize("strategy", ["auto", "tpe"])
def test_a_replay_is_the_search_on_the_simulated_backend(sqlite_url, strategy):
    """A search (``Tuner``, as ``autotune search`` runs it) of the N=16 landscape, in a database holding
    the N=8 and N=32 ones, and the replay of that landscape with the same history: the same trajectory."""
    target, others = landscape(16), [landscape(8), landscape(32)]
    store = history_store(others, sqlite_url)
    env = simulated_env(target.device_name, target.facts)
    history = load_history(store.history, target.kernel, target.space, env)
    settings = SearchSettings(
        devices="sim:0", strategy=strategy, trials=14, seed=3, compile_workers=0, retime_top=0
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


def _wobbling(amplitude: float):
    """The ``shifting`` landscape with throughput (tflops x time = 1) and a deterministic wobble of
    ``amplitude`` per call: re-timings see different samples."""
    calls = [0]

    def evaluate(config, shape):
        res = shifting(config, shape)
        calls[0] += 1
        if not res.time_s:
            return res
        t = res.time_s * (1 + amplitude * math.sin(calls[0]))
        return replace(res, time_s=t, tflops=1.0 / t)

    return evaluate


def _search_with_retiming(sqlite_url, amplitude: float, **settings_kw):
    space = Space.from_dict(SPACE)
    settings = SearchSettings(
        devices="sim:0", strategy="random", trials=12, seed=0, compile_workers=0, **settings_kw
    )
    store = Store(sqlite_url)
    store.schema.upgrade()
    backend = SimulatedBackend(sim_info(space, {"A": 1, "B": 1, "C": "x"}), _wobbling(amplitude))
    with Tuner("sim", store, settings, backend=backend) as tuner:
        tuner.start()
        return tuner.search_shape({"N": 16})


def test_one_figure_per_quantity_the_median_and_the_throughput_at_it(sqlite_url):
    """The best's time is the median of its measurements, its TFLOP/s are at that median (not at the first
    sample), and the default, when re-timed, is compared at its own median."""
    report = _search_with_retiming(sqlite_url, 0.03, retime_top=12, retime_rounds=3)
    first = report.finalists[0]
    assert first.samples == 4 and report.best is not None and report.best_samples == 4
    assert report.best.time_s == pytest.approx(first.median_s) != pytest.approx(first.first_s)
    assert report.best.tflops == pytest.approx(1.0 / first.median_s)
    default = next(f for f in report.finalists if f.config == {"A": 1, "B": 1, "C": "x"})
    assert report.default is not None and report.default.time_s == pytest.approx(default.median_s)
    assert report.speedup == pytest.approx(default.median_s / first.median_s)
    assert not report.unreliable and report.best_spread == pytest.approx(first.spread)


def test_a_best_spread_past_the_threshold_is_flagged_unreliable(sqlite_url, tmp_path):
    from autotune.cli.search import report_dict

    wild = _search_with_retiming(sqlite_url, 0.8, retime_top=3, retime_rounds=3)
    assert wild.best_spread is not None and wild.best_spread > 0.5 and wild.unreliable
    assert report_dict(wild)["unreliable"] is True
    tolerant = _search_with_retiming(
        f"sqlite:///{tmp_path / 'tolerant.db'}", 0.8, retime_top=3, retime_rounds=3, unreliable_spread=100.0
    )
    assert not tolerant.unreliable
