"""The one search loop: ``autotune replay`` is ``autotune search``'s ``ShapeSearch`` on the simulated
backend, so a replayed run and a search of the same landscape with the same strategy seed evaluate the same
configs in the same order (a replay's run seed gives each strategy its own: ``replay.strategy_seed``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autotune.engine import Pipeline, SerialPipeline, SimulatedBackend, SimulatedKernel
from autotune.engine.simulated import simulated_env
from autotune.search import strategy_info
from autotune.search.base import load_history
from autotune.settings import SearchSettings
from autotune.space import Space
from autotune.store import Store
from autotune.trial import config_hash
from autotune.tuning.replay import history_store, replay_one, strategy_seed
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
    # "vs default": the geometric mean of the ratios of samples paired round by round, with an interval
    store = Store(sqlite_url)
    retimings = [r for r in store.trials.recorded(1, retimed=True) if r.retime_round]
    by_round: dict[str, dict[str, float]] = {}
    for r in retimings:
        by_round.setdefault(r.retime_round, {})[config_hash(r.config)] = r.time_s
    ratios = [d[config_hash(default.config)] / d[config_hash(first.config)] for d in by_round.values()]
    assert len(ratios) == report.speedup_pairs == 3
    assert report.speedup == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3))
    lo, hi = report.speedup_interval
    assert lo <= report.speedup <= hi
    assert not report.unreliable and report.best_spread == pytest.approx(first.spread)


def test_a_best_spread_past_the_threshold_is_flagged_unreliable(sqlite_url, tmp_path):
    from autotune.tuning.report import report_dict

    wild = _search_with_retiming(sqlite_url, 0.8, retime_top=3, retime_rounds=3)
    assert wild.best_spread is not None and wild.best_spread > 0.5 and wild.unreliable
    assert report_dict(wild)["unreliable"] is True
    tolerant = _search_with_retiming(
        f"sqlite:///{tmp_path / 'tolerant.db'}", 0.8, retime_top=3, retime_rounds=3, unreliable_spread=100.0
    )
    assert not tolerant.unreliable


class _WatchedPipeline(Pipeline):
    """The threaded pipeline, noting at every wait of the search loop how many candidates it held and how
    many had been submitted so far."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.submitted = 0
        self.waits: list[tuple[int, int]] = []  # (in flight, submitted so far)

    def submit(self, candidate):
        self.submitted += 1
        super().submit(candidate)

    def next_result(self, timeout=None):
        if timeout != 0:  # a wait, not the drain of what finished meanwhile
            self.waits.append((self.in_flight, self.submitted))
        return super().next_result(timeout)


@pytest.mark.parametrize("strategy", ["auto", "tpe", "random"])
def test_in_flight_fills_the_pipeline_for_every_strategy_whatever_the_budget(sqlite_url, strategy):
    """Slow compiles (the simulated compile pool sleeps), a budget small beside the space: every time the
    loop waits for a result while the budget allows more submissions, the pipeline holds at least its
    compile workers + 2 x devices candidates, so no compile worker is idle for want of a proposal (the
    ``auto`` strategy used to keep max(4, trials/5) in flight)."""
    from tests.test_engine import SPACE, sim_info, synthetic

    space = Space.from_dict(SPACE)
    backend = SimulatedBackend(sim_info(space, {"A": 1, "B": 1, "C": "x"}), synthetic, compile_s=0.02)
    workers, trials = 5, 20
    settings = SearchSettings(
        devices="sim:0", strategy=strategy, trials=trials, seed=0, compile_workers=workers, retime_top=0
    )
    store = Store(sqlite_url)
    store.schema.upgrade()
    made: list[_WatchedPipeline] = []

    def pipeline(b, w):
        made.append(_WatchedPipeline(b, [], w))
        return made[-1]

    with Tuner("sim", store, settings, backend=backend, pipeline=pipeline) as tuner:
        tuner.start()
        report = tuner.search_shape({"N": 8})
    store.close()
    assert report.strategy == strategy and report.evaluations == trials
    capacity = workers + 2
    waits = made[0].waits
    # after the default config (measured first, alone) and while the budget allows more submissions
    while_budget = [n for n, submitted in waits if 1 < submitted < trials]
    assert while_budget and min(while_budget) >= capacity, waits
    # every compile worker compiled
    compilers = [ev for ev in backend.made if ev.device == "sim-compile"]
    assert len(compilers) == workers and all(ev.calls for ev in compilers)
