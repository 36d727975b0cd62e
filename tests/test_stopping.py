"""The stopping rule (``autotune.search.stopping``), the default budget of the one search loop: on the
simulated evaluator, it stops early on a smooth landscape, never converges on one with an isolated best it
has not found, honours ``--trials`` and ``--timeout`` exactly, says why in the JSON, and is what replay and
nightly use too."""

from __future__ import annotations

import hashlib
import math
import types

import pytest

from autotune.engine import SerialPipeline, SimulatedBackend, SimulatedKernel
from autotune.engine.simulated import Landscape
from autotune.search import stopping
from autotune.search.stopping import StoppingRule, StopSettings
from autotune.settings import SearchSettings
from autotune.space import Space
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus, config_hash
from autotune.tuning import shape_search
from autotune.tuning.replay import replay_one
from autotune.tuning.report import report_dict
from autotune.tuning.tuner import Tuner

#: 16 x 7 x 2 = 224 configs
SPACE = {
    "name": "stop",
    "params": {"A": {"range": [1, 16]}, "B": {"pow2": [1, 64]}, "C": ["x", "y"]},
}
FACTS = {"cc": 0}
SHAPE = {"N": 1024}


def smooth(c: dict) -> float:
    """One broad basin: a model learns it from a few points."""
    return 1e-5 * (
        1 + (c["A"] - 9) ** 2 / 20 + (math.log2(c["B"]) - 3) ** 2 / 5 + (0.3 if c["C"] == "x" else 0)
    )


def rough(c: dict) -> float:
    """Unrelated times in [1, 2) (a hash of the config), and one config far faster than all."""
    if c == {"A": 13, "B": 2, "C": "x"}:
        return 0.5e-5
    h = int(hashlib.sha256(config_hash(c).encode()).hexdigest()[:8], 16)
    return 1e-5 * (1 + h / 2**32)


def landscape(fn) -> Landscape:
    space = Space.from_dict(SPACE)
    results = {config_hash(c): TrialResult(TrialStatus.OK, c, time_s=fn(c)) for c in space.enumerate(FACTS)}
    return Landscape("stop", "Sim GPU", dict(FACTS), dict(SHAPE), space, {"A": 1, "B": 1, "C": "x"}, results)


def search(url: str, land: Landscape, clock: list[float] | None = None, **settings):
    """One search as ``autotune search`` runs it (``Tuner``) on the simulated backend; ``clock``: a fake
    monotonic clock the loop reads, moved one second per evaluation (no real time in a test)."""
    s = SearchSettings(devices="sim:0", compile_workers=0, retime_top=0, seed=1, **settings)

    def tick(_event):
        if clock is not None:
            clock[0] += 1.0

    store = Store(url)
    store.schema.upgrade()
    tuner = Tuner(
        "sim",
        store,
        s,
        on_event=tick,
        backend=SimulatedBackend.of(SimulatedKernel.of([land])),
        pipeline=lambda backend, workers: SerialPipeline(backend, [], depth=4),
    )
    with tuner:
        tuner.start()
        report = tuner.search_shape(land.shape)
    store.close()
    return report


@pytest.fixture
def fake_clock(monkeypatch):
    clock = [1000.0]
    fake = types.SimpleNamespace(monotonic=lambda: clock[0], perf_counter=lambda: clock[0])
    monkeypatch.setattr(shape_search, "time", fake)
    return clock


def test_stops_early_on_a_smooth_landscape(sqlite_url):
    land = landscape(smooth)
    report = search(sqlite_url, land, stop_min=20, stop_patience=10, stop_max=200)
    assert report.stop_reason == stopping.CONVERGED
    assert report.stop_bound is not None and report.stop_bound <= report.stop_noise
    assert 20 <= report.evaluations < 200 and report.evaluations < len(land.results) / 2
    assert report.best.time_s <= land.best_s * (1 + report.stop_noise)


def test_no_convergence_before_an_isolated_best_is_found(sqlite_url):
    """Times unrelated to the parameters: the model can bound nothing, so the rule goes on to its ceiling
    (or stops having found the isolated best), never "converged" on a worse config."""
    land = landscape(rough)
    report = search(sqlite_url, land, strategy="random", stop_min=20, stop_patience=10, stop_max=120)
    found = report.best.time_s == land.best_s
    assert report.stop_reason in (stopping.CEILING, stopping.STALLED) or (
        found and report.stop_reason == stopping.CONVERGED
    )
    if report.stop_reason == stopping.CEILING:
        assert report.evaluations == 120


def test_the_exhaustive_strategy_measures_every_valid_config_whatever_the_rule(sqlite_url):
    """An explicit --strategy exhaustive without --trials is every valid config, never cut by the rule."""
    land = landscape(smooth)
    report = search(sqlite_url, land, strategy="exhaustive", stop_min=2, stop_patience=2, stop_max=5)
    assert report.evaluations == len(land.results) > 5
    assert report.stop_bound is None and report.stop_reason == stopping.EXHAUSTED


def test_trials_is_an_exact_budget(sqlite_url):
    report = search(sqlite_url, landscape(smooth), trials=7, stop_min=2, stop_max=3)
    assert report.evaluations == 7 and report.stop_reason == stopping.TRIALS
    assert report.stop_bound is None and report.stop_noise is None  # the rule took no part


def test_timeout_is_honoured_with_the_rule(sqlite_url, fake_clock):
    """--timeout 10 with one (fake) second per evaluation: 10 evaluations, whatever the rule's floor."""
    report = search(sqlite_url, landscape(rough), fake_clock, timeout_s=10.0, stop_min=50)
    assert report.stop_reason == stopping.TIMEOUT
    assert report.evaluations == 10


def test_timeout_is_honoured_with_trials(sqlite_url, fake_clock):
    report = search(sqlite_url, landscape(rough), fake_clock, timeout_s=6.0, trials=50)
    assert report.stop_reason == stopping.TIMEOUT and report.evaluations == 6


def test_the_wall_time_ceiling(sqlite_url, fake_clock):
    report = search(sqlite_url, landscape(rough), fake_clock, stop_wall_s=12.0, stop_min=50)
    assert report.stop_reason == stopping.WALL and report.evaluations == 12


def test_the_stop_reason_is_in_the_json(sqlite_url):
    report = search(sqlite_url, landscape(smooth), stop_min=20, stop_patience=10)
    d = report_dict(report)
    assert d["stop_reason"] == stopping.CONVERGED and d["evaluations"] == report.evaluations
    assert d["stop_noise"] == pytest.approx(0.01) and d["stop_bound"] <= d["stop_noise"]


def test_the_floor_counts_stored_results_so_a_rerun_stops_at_once(sqlite_url):
    land = landscape(smooth)
    first = search(sqlite_url, land, stop_min=20, stop_patience=10)
    again = search(sqlite_url, land, stop_min=20, stop_patience=10)
    assert first.stop_reason == again.stop_reason == stopping.CONVERGED
    assert again.evaluations < first.evaluations


def test_a_space_smaller_than_the_floor_is_measured_whole():
    space = Space.from_dict({"name": "s", "params": {"A": [1, 2, 3]}})
    rule = StoppingRule(StopSettings(min_evals=30), space, {}, list(space.enumerate({})))
    assert rule.floor == 3


def test_patience_needs_improvement_beyond_the_noise():
    space = Space.from_dict(SPACE)
    rule = StoppingRule(StopSettings(patience=3, noise=0.01), space, FACTS, None)
    configs = list(space.enumerate(FACTS))[:8]
    for c, t in zip(configs, [2.0, 1.5, 1.0, 0.995, 0.999, 0.994], strict=False):
        rule.observe(TrialResult(TrialStatus.OK, c, time_s=t))
    assert rule.stalled()  # 1.0 -> 0.994: within 1 %
    assert not rule.stalled(2)  # 2.0 -> 0.994 over the last 6
    rule.observe(TrialResult(TrialStatus.OK, configs[6], time_s=0.9))
    assert not rule.stalled()


def test_replay_uses_the_same_rule():
    land = landscape(smooth)
    run = replay_one(land, "auto", None, 1, depth=4)
    assert run.stop_reason in (stopping.CONVERGED, stopping.CEILING)
    assert run.evaluations == len(run.best_after) <= SearchSettings().stop_max
    fixed = replay_one(land, "auto", 9, 1, depth=4)
    assert fixed.stop_reason == stopping.TRIALS and fixed.evaluations == 9


def test_nightly_uses_the_same_rule(sqlite_url, tmp_path, monkeypatch):
    """``evaluations: auto`` (the job file's default): each shape's search stops by the rule, the run's
    summary says why; a second run resumes the keys under the rule, which counts what they measured."""
    from tests.test_nightly_sim import NoisyKernel, job, run

    monkeypatch.setenv("AUTOTUNE_STOP_MIN", "8")
    monkeypatch.setenv("AUTOTUNE_STOP_PATIENCE", "4")
    kernel = NoisyKernel()
    first = run(job(sqlite_url, tmp_path, evaluations="auto", verify=None), kernel)
    assert [s["planned"] for s in first.shapes] == [None] * 3
    reasons = {s["stop_reason"] for s in first.shapes}
    assert reasons <= {stopping.CONVERGED, stopping.EXHAUSTED} and all(
        8 <= s["evaluations"] <= 24 for s in first.shapes
    )
    second = run(job(sqlite_url, tmp_path, evaluations="auto", verify=None), kernel)
    assert {s["action"] for s in second.shapes} <= {"resume", "done"}
    assert sum(s["evaluations"] for s in second.shapes) < sum(s["evaluations"] for s in first.shapes)


def test_a_best_is_final_only_once_its_neighbours_are_measured():
    """A narrow best one move (C) from the smooth basin's floor: the model's bound says the basin is done,
    and a random search stops there (or stalls) 3-24 % off on some of these seeds; checking the best's
    neighbours before stopping finds it on every seed."""
    spike = {"A": 9, "B": 8, "C": "x"}
    land = landscape(lambda c: 0.97e-5 if c == spike else smooth(c))
    for seed in range(4):
        run = replay_one(land, "random", None, seed, depth=4)
        assert run.final_regret == 0.0, (seed, run.stop_reason, run.evaluations)
        assert run.polished > 0 and run.stop_reason in (stopping.CONVERGED, stopping.STALLED)


def test_the_neighbour_check_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_STOP_NEIGHBOURS", "0")
    land = landscape(smooth)
    run = replay_one(land, "random", None, 0, depth=4)
    assert run.polished == 0 and run.stop_reason in (stopping.CONVERGED, stopping.STALLED)


def test_the_rule_waits_for_the_neighbours_it_asked_for_but_not_forever():
    space = Space.from_dict(SPACE)
    rule = StoppingRule(StopSettings(min_evals=1, patience=2, noise=0.01), space, FACTS, None)
    rule._bound = lambda: 0.0  # the model says nothing better is left
    best = {"A": 5, "B": 4, "C": "y"}
    far = [c for c in space.enumerate(FACTS) if abs(c["A"] - 5) > 1 and c["B"] != 4][:4]
    for c, t in [(best, 1.0), *((c, 2.0) for c in far)]:
        rule.observe(TrialResult(TrialStatus.OK, c, time_s=t))
    assert not rule.check()
    wanted = rule.take_wanted()
    assert {config_hash(c) for c in wanted} == {config_hash(c) for c in space.neighbours(best, FACTS)}
    assert len(wanted) == 5 and rule.take_wanted() == []  # A 4/6, B 2/8, C x: each handed out once
    for c in wanted[:-1]:  # one is still in flight
        rule.observe(TrialResult(TrialStatus.OK, c, time_s=1.5))
        rule._checked_at = -math.inf
        assert not rule.check()
    rule.observe(TrialResult(TrialStatus.OK, wanted[-1], time_s=1.5))
    rule._checked_at = -math.inf
    assert rule.check() and rule.reason == stopping.CONVERGED
    # a neighbour never measured (held by a process that died) is waited for NEIGHBOUR_WAIT results
    lost = StoppingRule(StopSettings(min_evals=1, patience=2, noise=0.01), space, FACTS, None)
    lost._bound = lambda: 0.0
    lost.observe(TrialResult(TrialStatus.OK, best, time_s=1.0))
    others = [c for c in space.enumerate(FACTS) if c["A"] > 8]
    for c in others[:4]:
        lost.observe(TrialResult(TrialStatus.OK, c, time_s=2.0))
    assert not lost.check() and lost.take_wanted()
    for c in others[4 : 4 + stopping.NEIGHBOUR_WAIT]:
        lost._checked_at = -math.inf
        assert not lost.check()
        lost.observe(TrialResult(TrialStatus.OK, c, time_s=2.0))
    lost._checked_at = -math.inf
    assert lost.check()


def test_a_stall_asks_the_strategy_to_change_course_once_before_it_stops():
    """The model stays unsure (a bound of 100 %) and nothing beats the first result: at the first stall the
    rule asks the strategy to change course, and the stall counts again from there; a strategy with nothing
    left to change lets the next stall stop the search."""
    space = Space.from_dict(SPACE)
    rule = StoppingRule(
        StopSettings(min_evals=1, patience=2, noise=0.01, neighbours=False), space, FACTS, None
    )
    rule._bound = lambda: 1.0
    asked: list[int] = []

    def change_course() -> bool:
        asked.append(rule.results)
        return len(asked) == 1  # dropped what it followed the first time; nothing left the second

    rule.change_course = change_course
    stopped_at = None
    for i, c in enumerate(list(space.enumerate(FACTS))[:60]):
        rule.observe(TrialResult(TrialStatus.OK, c, time_s=1.0 if i == 0 else 2.0))
        if rule.check():
            stopped_at = rule.results
            break
    k = stopping.STALL_FACTOR * 2
    assert len(asked) == 2 and asked[0] > k  # the first stall: more than 4 x patience results without a gain
    assert asked[1] - asked[0] > k  # counted again from the change of course
    assert stopped_at == asked[1] and rule.reason == stopping.STALLED


def test_auto_drops_a_prior_it_followed_into_a_stall_and_goes_on(monkeypatch):
    """Another shape's sweep with the target's own times: the prior leads straight to the best, the rough
    landscape keeps the model's bound wide, so the search stalls there. ``auto`` then drops the prior (once)
    and searches on until the next stall; told not to, it stops at the first."""
    from autotune.search.auto import AutoSampler, AutoStrategy
    from autotune.search.base import HistoryPoint

    monkeypatch.setenv("AUTOTUNE_STOP_MIN", "8")
    monkeypatch.setenv("AUTOTUNE_STOP_PATIENCE", "4")
    land = landscape(rough)
    hist = [HistoryPoint({"N": 512}, r.config, r.time_s, 1.0) for r in land.results.values()]
    dropped: list[float] = []
    drop = AutoSampler.drop_prior

    def spy(self):
        trust = self.trust
        if drop(self):
            dropped.append(trust)
            return True
        return False

    monkeypatch.setattr(AutoSampler, "drop_prior", spy)
    on = replay_one(land, "auto", None, 0, hist, None, depth=4)
    assert len(dropped) == 1 and dropped[0] > 0  # a prior still trusted, dropped once
    monkeypatch.setattr(AutoStrategy, "change_course", lambda self: False)
    off = replay_one(land, "auto", None, 0, hist, None, depth=4)
    assert off.stop_reason == on.stop_reason == stopping.STALLED
    # the change comes at the first stall, where the search without it asks the best's neighbours and stops
    assert on.evaluations > off.evaluations
