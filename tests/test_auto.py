"""The search strategies' model side: the ``auto`` strategy (transfer from other shapes, a GP per shape,
only valid never-measured proposals), ordinal parameters, repeats and failures told to Optuna without fake
times, budgeted exhaustive order, re-timed finalists, landscape files and ``autotune replay``."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.engine import SimulatedBackend, Worker
from autotune.search import HistoryPoint, StrategyContext, make_strategy
from autotune.search.encoding import ordinal
from autotune.search.optuna_strategy import OptunaStrategy, distribution, tpe_sampler
from autotune.settings import SearchSettings
from autotune.space import Space
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus, config_hash
from autotune.tuning.landscape import LandscapeFile, load_landscape
from autotune.tuning.replay import history_store, replay_one
from autotune.tuning.tuner import Tuner
from tests.test_engine import sim_info

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "tests" / "kernels" / "tiny.py")

#: a space whose best A follows the shape: A = log2(N), B = 2, C = "y"
SPACE = {
    "name": "shifting",
    "params": {"A": {"range": [1, 8]}, "B": {"pow2": [1, 8]}, "C": ["x", "y"]},
    "constraints": [{"name": "small", "expr": "A * B <= 24"}],
}
FACTS = {"cc": 0}


def shifting(config, shape) -> TrialResult:
    a0 = math.log2(shape["N"])
    if config["A"] == 8 and config["C"] == "x":
        return TrialResult(TrialStatus.COMPILE_FAILED, config, error="synthetic")
    t = 1e-5 * (
        1 + (config["A"] - a0) ** 2 + 0.3 * (config["B"] - 2) ** 2 + (0 if config["C"] == "y" else 0.4)
    )
    return TrialResult(TrialStatus.OK, config, time_s=t)


def features(config, shape, facts):
    return {"distance": abs(config["A"] - math.log2(shape["N"]))}


def landscape(n: int) -> LandscapeFile:
    space = Space.from_dict(SPACE)
    results = {config_hash(c): shifting(c, {"N": n}) for c in space.enumerate(FACTS)}
    return LandscapeFile(
        "shifting", "Sim GPU", dict(FACTS), {"N": n}, space, {"A": 1, "B": 1, "C": "x"}, results
    )


def history(*ns: int) -> list[HistoryPoint]:
    return [
        HistoryPoint({"N": n}, r.config, r.time_s, 1.0)
        for n in ns
        for r in landscape(n).results.values()
        if r.timed
    ]


def test_ordinal_parameters_are_ordered_and_snapped():
    space = Space.from_dict(SPACE)
    a, b, c = space.params
    assert distribution(a) == optuna.distributions.IntDistribution(1, 8, log=False)
    assert distribution(b) == optuna.distributions.IntDistribution(1, 8, log=True)
    assert isinstance(distribution(c), optuna.distributions.CategoricalDistribution)
    assert ordinal(b).snap(3) == 4 and ordinal(b).snap(2.7) == 2 and ordinal(a).snap(4.4) == 4
    # TPE proposes only values of the space, whatever it samples between them
    st = OptunaStrategy(StrategyContext(space, FACTS, 0, None), tpe_sampler(0))
    for _ in range(6):
        for cfg in st.propose(4):
            assert cfg["A"] in a.choices and cfg["B"] in b.choices
            st.tell(cfg, shifting(cfg, {"N": 16}))


def test_tpe_proposes_over_categories_and_the_database_study_keeps_numbers(sqlite_url):
    """TPE's in-memory study sees every parameter as categorical (a numeric Parzen estimator spreads a good
    value's weight onto neighbours a GPU landscape often punishes: docs/strategies.md); ``random`` and the
    database study (optuna-dashboard) keep the ordinal view, numbers on a log scale for pow2 choices."""
    space = Space.from_dict(SPACE)
    ctx = StrategyContext(space, FACTS, 0, None)
    tpe, rnd = make_strategy("tpe", ctx), make_strategy("random", ctx)
    for st in (tpe, rnd):
        for _ in range(4):
            for cfg in st.propose(3):
                assert all(cfg[q.name] in q.choices for q in space.params)
                st.tell(cfg, shifting(cfg, {"N": 16}))
    kinds = {type(d) for t in tpe.study.trials for d in t.distributions.values()}
    assert kinds == {optuna.distributions.CategoricalDistribution}
    assert tpe.study.trials[0].distributions["B"].choices == (1, 2, 4, 8)
    assert rnd.study.trials[0].distributions["B"] == optuna.distributions.IntDistribution(1, 8, log=True)
    settings = SearchSettings(
        devices="sim:0", strategy="tpe", trials=12, seed=0, compile_workers=0, retime_top=0
    )
    backend = SimulatedBackend(sim_info(space, {"A": 1, "B": 1, "C": "x"}), shifting)
    with Tuner("sim", Store(sqlite_url), settings, backend=backend) as tuner:
        tuner.store.schema.upgrade()
        tuner.start()
        report = tuner.search_shape({"N": 16})
    study = optuna.load_study(study_name=report.study_name, storage=sqlite_url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 10 and all(t.distributions["B"] == distribution(space.params[1]) for t in done)


def test_repeats_and_failures_are_never_told_as_times():
    space = Space.from_dict(SPACE)
    st = OptunaStrategy(StrategyContext(space, FACTS, 0, None), tpe_sampler(0))
    cfg = {"A": 2, "B": 2, "C": "y"}
    first, again = st.study.ask(), st.study.ask()
    st._pending[config_hash(cfg)] = [first, again]
    st.tell(cfg, shifting(cfg, {"N": 16}))
    st.tell(cfg, shifting(cfg, {"N": 16}))  # the same config proposed twice: a repeat
    bad = {"A": 8, "B": 1, "C": "x"}
    t3 = st.study.ask()
    st._pending[config_hash(bad)] = [t3]
    st.tell(bad, shifting(bad, {"N": 16}))
    trials = st.study.get_trials()
    assert [t.state for t in trials] == [
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.FAIL,
        optuna.trial.TrialState.PRUNED,
    ]
    assert trials[1].user_attrs["autotune_status"] == "repeat"
    assert trials[2].user_attrs["autotune_status"] == "compile_failed" and trials[2].value is None


def _run(strategy: str, hist, evaluations: int, feats=None, seed: int = 0):
    target = landscape(16)
    return replay_one(
        target,
        strategy,
        evaluations,
        seed,
        hist,
        (lambda shape, configs: [features(c, shape, FACTS) for c in configs]) if feats else None,
        depth=4,
    )


def test_auto_with_other_shapes_in_the_store_finds_the_best_in_a_few_evaluations():
    best = landscape(16).best_s
    run = _run("auto", history(8, 32), 4, feats=True)
    # the default, the nearest shapes' bests (A=3, A=5), then the prior's best (A=4): found
    assert run.best_after[-1] == pytest.approx(best)
    assert run.invalid == 0 and run.repeats == 0


def test_auto_proposes_only_valid_never_measured_configs_and_converges_without_history():
    best = landscape(16).best_s
    run = _run("auto", (), 30)
    assert run.invalid == 0 and run.repeats == 0
    assert run.best_after[-1] <= best * 1.05
    tpe = _run("tpe", (), 30)
    assert tpe.proposals > 30  # TPE repeats itself or proposes invalid configs; auto does not
    assert run.proposals == 30


#: SPACE plus a split-like parameter: slower on every history shape, the best on the target
SPLIT_SPACE = {**SPACE, "name": "split", "params": {**SPACE["params"], "S": [1, 4]}}


def split(config, shape) -> TrialResult:
    res = shifting(config, shape)
    if res.time_s is None:
        return res
    factor = 0.5 if shape["N"] == 16 else 1.5  # S=4 halves the time on the target, costs 50 % elsewhere
    return TrialResult(TrialStatus.OK, config, time_s=res.time_s * (factor if config["S"] == 4 else 1.0))


def split_landscape(n: int) -> LandscapeFile:
    space = Space.from_dict(SPLIT_SPACE)
    results = {config_hash(c): split(c, {"N": n}) for c in space.enumerate(FACTS)}
    default = {"A": 1, "B": 1, "C": "x", "S": 1}
    return LandscapeFile("split", "Sim GPU", dict(FACTS), {"N": n}, space, default, results)


@pytest.mark.parametrize("cover_every", [3, 10**9])
def test_auto_tries_what_the_other_shapes_never_favoured(monkeypatch, cover_every):
    """The prior learned S=4 is slow on every other shape; on this one it is the best. The coverage choices
    (one in COVER_EVERY: the best candidate with a value no config tried yet) find it; the model alone,
    exploiting its prior, does not within the budget."""
    from autotune.search import auto

    monkeypatch.setattr(auto, "COVER_EVERY", cover_every)
    hist = [
        HistoryPoint({"N": n}, r.config, r.time_s, 1.0)
        for n in (8, 32)
        for r in split_landscape(n).results.values()
        if r.timed
    ]
    target = split_landscape(16)
    feats = lambda shape, configs: [features(c, shape, FACTS) for c in configs]  # noqa: E731
    run = replay_one(target, "auto", 6, 0, hist, feats, depth=4)
    found = run.best_after[-1] == pytest.approx(target.best_s)
    assert found is (cover_every == 3)


def test_budgeted_exhaustive_is_ordered_by_the_model():
    space = Space.from_dict(SPACE)
    valid = list(space.enumerate(FACTS))
    ctx = StrategyContext(
        space, FACTS, 0, valid, shape={"N": 16}, shape_params=("N",), history=history(8, 32), budget=5
    )
    order = make_strategy("exhaustive", ctx).propose(len(valid))
    assert sorted(map(config_hash, order)) == sorted(map(config_hash, valid))  # still every config
    plain = make_strategy("exhaustive", StrategyContext(space, FACTS, 0, valid)).propose(len(valid))
    assert order != plain
    t = {config_hash(c): shifting(c, {"N": 16}).time_s or math.inf for c in valid}

    def first_five(o):  # the mean time of the first 5 configs: what a 5-evaluation budget measures
        return statistics.mean(t[config_hash(c)] for c in o[:5])

    # better than the unordered search whatever its seed (one seed's first five can be lucky)
    plains = [StrategyContext(space, FACTS, seed, valid) for seed in range(10)]
    assert first_five(order) < min(
        first_five(make_strategy("exhaustive", c).propose(len(valid))) for c in plains
    )


def test_features_come_from_the_kernel_file_in_a_worker():
    with Worker(TINY, "cpu") as w:
        w.start()
        rows = w.features({"N": 4}, [{"REPS": 2, "MODE": "b"}, {"REPS": 1, "MODE": "a"}], {"cc": 0})
        assert rows == [{"work": 64.0}, {"work": 16.0}]
        # and the worker still evaluates afterwards (one exchange at a time on its pipe)
        res = w.evaluate({"REPS": 1, "MODE": "a"}, {"N": 4})
        assert res.status is TrialStatus.OK, (res.status, res.error)


def noisy(config, shape) -> TrialResult:
    """shifting() with a deterministic +-3 % wobble per call: re-timing sees different samples."""
    res = shifting(config, shape)
    noisy.calls += 1
    if res.time_s:
        return replace(res, time_s=res.time_s * (1 + 0.03 * math.sin(noisy.calls)))
    return res


noisy.calls = 0


def test_finalists_are_retimed_and_the_best_keeps_their_median(sqlite_url):
    space = Space.from_dict(SPACE)
    info = sim_info(space, {"A": 1, "B": 1, "C": "x"})
    settings = SearchSettings(
        devices="sim:0", strategy="auto", trials=12, seed=0, compile_workers=0, retime_top=3
    )
    store = Store(sqlite_url)
    store.schema.upgrade()
    with Tuner("sim", store, settings, backend=SimulatedBackend(info, noisy)) as tuner:
        tuner.start()
        report = tuner.search_shape({"N": 16})
    # the top 3 and the default config (re-timed beside them for the paired speed-up), unless among them
    default_retimed = {"A": 1, "B": 1, "C": "x"} in [f.config for f in report.finalists]
    assert default_retimed and len(report.finalists) in (3, 4)
    assert all(f.samples == 4 for f in report.finalists)  # the search's sample + 3 interleaved rounds
    medians = [f.median_s for f in report.finalists]
    assert medians == sorted(medians)
    best = store.trials.best("sim_kernel")[0]
    assert best.samples == 4 and best.time_s == pytest.approx(medians[0]) and best.spread > 0
    assert best.config == report.finalists[0].config
    assert store.trials.duplicate_measurements() == 0  # re-timings are not duplicate evaluations
    assert sum(store.trials.counts(best.key_id).values()) == report.evaluations


def test_landscape_export_and_replay_cli(tmp_path, sqlite_url):
    store = history_store([landscape(16)], sqlite_url)
    store.close()
    out = tmp_path / "l16.json"
    r = CliRunner().invoke(
        app, ["landscape", "export", "shifting", "--shape", "N=16", "--out", str(out), "--db", sqlite_url]
    )
    assert r.exit_code == 0, r.output
    back = load_landscape(out)
    assert back.best_s == pytest.approx(landscape(16).best_s) and len(back.results) == len(
        landscape(16).results
    )
    files = []
    for n in (8, 32):
        p = tmp_path / f"l{n}.json"
        p.write_text(json.dumps(landscape(n).to_json()))
        files.append(str(p))
    r = CliRunner().invoke(
        app,
        [
            "replay",
            *files,
            str(out),
            "--strategy",
            "auto,tpe",
            "--trials",
            "12",
            "--seeds",
            "2",
            "--depth",
            "4",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "N=16" in r.output and "auto" in r.output and "tpe" in r.output and "<= 2 %" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = CliRunner().invoke(app, ["replay", str(bad)])
    assert r.exit_code == 2 and "not a usable landscape" in r.output


def test_timeout_holds_within_the_evaluation_timing_when_it_passes(sqlite_url):
    """--timeout (a nightly job's deadline): queued and compiling candidates are handed back, so at most
    the one evaluation timing on the device when the deadline passes starts... and none after it."""
    import threading
    import time

    space = Space.from_dict(SPACE)
    starts: list[float] = []

    def slow(config, shape):
        if threading.current_thread().name == "timer":  # the timing worker's evaluations, not compiles
            starts.append(time.monotonic())
        return shifting(config, shape)

    info = sim_info(space, {"A": 1, "B": 1, "C": "x"})
    settings = SearchSettings(
        devices="sim:0", strategy="tpe", trials=200, seed=0, compile_workers=2, timeout_s=1.0, retime_top=0
    )
    store = Store(sqlite_url)
    store.schema.upgrade()
    backend = SimulatedBackend(info, slow, eval_s=0.25)
    with Tuner("sim", store, settings, backend=backend) as tuner:
        tuner.start()
        report = tuner.search_shape({"N": 16})
    timed = [h for ev in backend.made if ev.device == "sim:0" for kind, h in ev.calls if kind == "eval"]
    assert 2 <= len(timed) == len(starts) < 200
    # the deadline is 1 s after the shape's set-up, which precedes its first evaluation: at most one
    # evaluation starts after it (no clock bound: the set-up may take long on a loaded machine)
    assert len([t for t in starts if t > starts[0] + 1.0]) <= 1, [round(t - starts[0], 3) for t in starts]
    key = store.history.key_states()[0].key_id
    recorded = store.trials.recorded(key)
    # every evaluation is stored; each one that compiled was timed (a compile failure never reaches the timer)
    compiled = [t for t in recorded if t.status is not TrialStatus.COMPILE_FAILED]
    assert report.evaluations == len(recorded) and len(compiled) == len(timed)
    assert store.claims.running(key) == {}  # the handed-back candidates' claims are released


def test_a_config_measured_once_does_not_outrank_the_finalists_it_lost_to():
    """Re-timed finalists' medians are compared with single samples only where that sample beat a finalist's
    own search sample: one that ranked below them when they were chosen stays below."""
    from types import SimpleNamespace

    from autotune.store.trials import _fastest_config

    def rows(*groups):
        out, i = [], 0
        for h, times in groups:
            for j, t in enumerate(times):
                i += 1
                out.append(
                    SimpleNamespace(id=i, config_hash=h, time_s=t, kind="search" if j == 0 else "retime")
                )
        return out

    finalists = [("a", [1.00, 1.20, 1.22]), ("b", [1.05, 1.09, 1.10])]
    chosen = _fastest_config(rows(*finalists, ("c", [1.08])))  # c lost to both when they were chosen
    assert chosen is not None and chosen.median == 1.09 and chosen.samples == 3
    # issue 43: d, measured once after them, faster than their medians, is not a best until re-timed
    later = _fastest_config(rows(*finalists, ("d", [0.90])))
    assert later is not None and later.config_hash == "b" and later.samples == 3
    retimed = _fastest_config(rows(*finalists, ("d", [0.90, 1.00, 1.02])))  # re-timed: it may win
    assert retimed is not None and retimed.config_hash == "d" and retimed.median == 1.00
    # only where no config has 3 samples (re-timing off or cut short) does the older rule hold
    short = [("a", [1.00, 1.20]), ("b", [1.05, 1.09])]
    assert _fastest_config(rows(*short, ("c", [1.08]))).median == pytest.approx(1.07)
    assert _fastest_config(rows(*short, ("d", [0.90]))).samples == 1


#: SPACE narrowed (A up to 6) and SPACE widened (a parameter D more): the same kernel's other search spaces
NARROW_SPACE = {**SPACE, "name": "narrow", "params": {**SPACE["params"], "A": {"range": [1, 6]}}}
WIDE_SPACE = {**SPACE, "name": "wide", "params": {**SPACE["params"], "D": [0, 1]}}


def landscape_in(spec: dict, n: int, scale: float = 1.0) -> LandscapeFile:
    space = Space.from_dict(spec)
    results = {}
    for c in space.enumerate(FACTS):
        r = shifting(c, {"N": n})
        results[config_hash(c)] = TrialResult(r.status, c, time_s=r.time_s * scale if r.time_s else None)
    return LandscapeFile(
        "shifting", "Sim GPU", dict(FACTS), {"N": n}, space, {"A": 1, "B": 1, "C": "x"}, results
    )


def test_transfer_history_reads_the_kernels_other_spaces_weighted_lower(sqlite_url):
    from autotune.store.transfer import OTHER_SPACE_WEIGHT

    lands = [landscape(8), landscape_in(NARROW_SPACE, 32), landscape_in(WIDE_SPACE, 64)]
    store = history_store(lands, sqlite_url)
    env = {"gpu_name": "Sim GPU", "torch": "replay", "triton": "replay", "driver": "replay", "cuda": "replay"}
    space = Space.from_dict(SPACE)
    rows = store.history.transfer("shifting", space.hash(), env, params=[p.name for p in space.params])
    by_n: dict[int, set[float]] = {}
    keys: dict[int, set[int]] = {}
    for key_id, dims, _, _, weight, gpu in rows:
        assert gpu == "Sim GPU"
        by_n.setdefault(dims["N"], set()).add(weight)
        keys.setdefault(dims["N"], set()).add(key_id)
    # this space at full weight, the narrowed one lower, the widened one (configs setting D) not at all
    assert by_n == {8: {1.0}, 32: {OTHER_SPACE_WEIGHT}}
    assert len(keys[8]) == len(keys[32]) == 1 and keys[8] != keys[32]
    assert len(rows) == sum(r.timed for land in lands[:2] for r in land.results.values())
    # without this space's parameter names: this space only
    same = store.history.transfer("shifting", space.hash(), env)
    assert {d["N"] for _, d, *_ in same} == {8}
    store.close()


def test_auto_learns_from_a_narrower_space_of_the_kernel():
    """The other shapes were tuned over an older, narrower space: a search over the new space still starts
    from what they taught (the best found in 6 evaluations, whatever the seed), which an empty store does
    not."""
    from autotune.tuning.replay import replay

    target = landscape(16)
    others = [landscape_in(NARROW_SPACE, 8), landscape_in(NARROW_SPACE, 32)]
    feats = lambda land: lambda shape, configs: [features(c, shape, FACTS) for c in configs]  # noqa: E731
    with_history = replay([target], ["auto"], 6, [0, 1, 2], preload=others, features_for=feats, depth=4)
    empty = replay([target], ["auto"], 6, [0, 1, 2], transfer=False, features_for=feats, depth=4)
    assert all(r.best_after[-1] == pytest.approx(target.best_s) for r in with_history)
    # an empty store's runs are samples (each seed its own run): some may be lucky, not all of them
    lucky = [r.best_after[-1] == pytest.approx(target.best_s) for r in empty]
    assert not all(lucky), [r.best_after[-1] / target.best_s for r in empty]


def test_auto_seeds_one_best_per_nearest_shape():
    """A shape tuned in two groups (another device, another space) gives one seed: the closer
    environment's best; the next seed comes from the next shape."""
    from autotune.search.auto import AutoSampler

    space = Space.from_dict(SPACE)

    def points(n: int, group: int, weight: float, as_n: int | None = None, scale: float = 1.0):
        return [
            HistoryPoint({"N": as_n or n}, r.config, r.time_s * scale, weight, group)
            for r in landscape(n).results.values()
            if r.timed
        ]

    # N=16 in group 1 (best A=4) and in group 2, another GPU model, twice as fast, with another best
    # (N=128's times: A=7); its times are not comparable with group 1's, nor is its best the one to seed
    hist = points(16, 1, 1.0) + points(128, 2, 0.2, as_n=16, scale=0.5) + points(64, 3, 1.0)
    ctx = StrategyContext(
        space, FACTS, 0, list(space.enumerate(FACTS)), shape={"N": 16}, shape_params=("N",), history=hist
    )
    sampler = AutoSampler(ctx)
    seeds = [sampler.pool[i] for i in sampler.seeds]
    assert [s["A"] for s in seeds] == [4, 6]


def test_a_search_over_an_edited_space_learns_from_the_old_spaces_shapes(sqlite_url):
    """Shapes tuned over a space, then the space edited (a new space hash): the search of a new shape still
    reads their measurements, and the report says how many. Narrowed (A up to 6) or widened (a parameter D
    the old configs lack, so they stay configs of the new space), the history is kept."""
    store = Store(sqlite_url)
    store.schema.upgrade()

    def search(spec: dict, n: int, trials: int):
        space = Space.from_dict(spec)
        info = sim_info(space, {"A": 1, "B": 1, "C": "x", **({"D": 0} if "D" in spec["params"] else {})})
        settings = SearchSettings(devices="sim:0", strategy="auto", trials=trials, seed=0, compile_workers=0)
        with Tuner("sim", store, settings, backend=SimulatedBackend(info, shifting)) as tuner:
            tuner.start()
            return tuner.search_shape({"N": n})

    def ok_so_far() -> int:
        return sum(store.trials.counts(k.key_id).get("ok", 0) for k in store.history.key_states())

    assert search(SPACE, 8, 30).history_points == 0
    before = ok_so_far()
    second = search(SPACE, 32, 30)
    assert (second.history_keys, second.history_points) == (1, before)
    before = ok_so_far()
    narrow = search(NARROW_SPACE, 16, 6)
    assert (narrow.history_keys, narrow.history_points) == (2, before)
    assert narrow.strategy == "auto" and narrow.best is not None
    before = ok_so_far()
    wide = search(WIDE_SPACE, 64, 6)
    assert (wide.history_keys, wide.history_points) == (3, before)


# ------------------------------------------------------------------------------------------- prior trust


def _mean_best(hist, evaluations: int, seeds=(0, 1, 2), target=None, history_device: str = "") -> float:
    target = target or landscape(16)
    runs = [replay_one(target, "auto", evaluations, s, hist, None, depth=4) for s in seeds]
    return sum(r.best_after[-1] / target.best_s - 1.0 for r in runs) / len(runs)


def test_a_prior_inverted_for_the_target_is_abandoned():
    """The store holds this shape (another group: another run, another software version) with every time
    inverted: the prior ranks the target's best last. The trust it earned as a sweep falls with the rank
    correlation measured on the target's own results, and the search ends within the empty store's
    result."""
    target = landscape(16)
    inverted = [
        HistoryPoint({"N": 16}, r.config, 1e-10 / r.time_s, 1.0, group=1)
        for r in target.results.values()
        if r.timed
    ]
    from autotune.search.auto import AutoSampler

    space = Space.from_dict(SPACE)
    valid = list(space.enumerate(FACTS))
    ctx = StrategyContext(space, FACTS, 0, valid, shape={"N": 16}, shape_params=("N",), history=inverted)
    sampler = AutoSampler(ctx)
    best = min(range(len(valid)), key=lambda i: shifting(valid[i], {"N": 16}).time_s or math.inf)
    assert sampler.prior[best] == max(sampler.prior)  # the prior is as wrong as it gets
    assert _mean_best(inverted, 20) <= _mean_best((), 20) + 0.02


def test_device_facts_change_the_priors_ranking():
    """One shape measured on two GPUs with different bests (A=3 on the A4000, A=6 on the MI250X): the
    prior for a third GPU follows the one whose facts it shares."""
    from autotune.search.auto import AutoSampler

    space = Space.from_dict(SPACE)
    valid = list(space.enumerate(FACTS))
    hist = [
        HistoryPoint({"N": 16}, r.config, r.time_s, 0.2, group=g, device=gpu)
        for g, (gpu, n) in enumerate((("NVIDIA RTX A4000", 8), ("AMD Instinct MI250X", 64)))
        for r in landscape(n).results.values()
        if r.timed
    ]

    def prior_best(device: str) -> int:
        ctx = StrategyContext(
            space, FACTS, 0, valid, shape={"N": 16}, shape_params=("N",), history=hist, device=device
        )
        s = AutoSampler(ctx)
        assert s.encoder.device_names  # the GPUs' facts are model inputs
        return valid[int(s.prior.argmin())]["A"]

    assert prior_best("NVIDIA RTX A4000") == 3
    assert prior_best("AMD Instinct MI210") == 6


def test_gpu_facts_match_reported_names():
    from autotune.devices import device_distance, device_features, gpu_facts

    assert gpu_facts("NVIDIA H100 80GB HBM3").sm_count == 132
    assert gpu_facts("AMD Instinct MI250X").vendor == "amd" and gpu_facts("cpu") is None
    a4000, w6600, mi250x = (device_features(n) for n in ("A4000", "W6600", "MI250X"))
    assert device_distance(a4000, a4000) == 0 and device_distance(a4000, None) == math.inf
    assert device_distance(mi250x, w6600) > device_distance(a4000, w6600)


def _partial_history(evaluations: int) -> list[HistoryPoint]:
    from autotune.tuning.replay import _RunStore, partial

    with __import__("tempfile").TemporaryDirectory() as tmp:
        runs = _RunStore(tmp)
        lands = [partial(landscape(n), evaluations, 7, runs, depth=4) for n in (8, 32, 64)]
        runs.store.close()
    return [
        HistoryPoint(dict(land.shape), r.config, r.time_s, 1.0, group=g)
        for g, land in enumerate(lands)
        for r in land.results.values()
        if r.timed
    ]


@pytest.mark.parametrize("budget", [8, 16])
def test_a_partial_history_is_never_worse_than_none(budget):
    hist = _partial_history(15)
    assert len(hist) >= 30  # enough for a prior (auto.MIN_HISTORY)
    assert _mean_best(hist, budget) <= _mean_best((), budget) + 0.01


@pytest.mark.parametrize("with_history", [False, True])
def test_two_seeds_give_different_runs(with_history):
    hist = history(8, 32) if with_history else ()
    runs = []
    for seed in (0, 1):
        measured: list[TrialResult] = []
        replay_one(landscape(16), "auto", 12, seed, hist, None, depth=4, measured=measured)
        runs.append([config_hash(r.config) for r in measured])
    assert runs[0] != runs[1]


def test_tpe_draws_again_instead_of_repeating_a_config(monkeypatch):
    """Snapped to the choices, TPE's samples near a good config land on it again and again; each repeat is
    drawn again inside the strategy (told FAIL), not handed to the loop, whose fallback is a random config."""
    from autotune.search import optuna_strategy

    repeats = {}
    for reask in (1, optuna_strategy.REASK):
        monkeypatch.setattr(optuna_strategy, "REASK", reask)
        repeats[reask] = sum(_run("tpe", (), 30, seed=s).repeats for s in (0, 1))
    assert repeats[optuna_strategy.REASK] < repeats[1]


def test_the_numpy_posterior_is_sklearns_and_conditions_on_pending_configs():
    """The GP's posterior with fixed hyperparameters is computed in numpy (sklearn's estimator around it
    cost most of a proposal): its mean and sd are sklearn's, and its sd given pending configs is the sd of
    a fit with them counted at their predicted values (the kriging believer) on the same normalization."""
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessRegressor

    from autotune.search.surrogate import LocalCorrection

    rng = np.random.default_rng(0)
    x, pool = rng.normal(size=(30, 4)), rng.normal(size=(200, 4))
    y = np.sin(2 * x[:, 0]) + x[:, 1] ** 2 + 0.05 * rng.normal(size=30)
    gp = LocalCorrection(0)
    gp.fit(x, y)
    ref = GaussianProcessRegressor(gp._kernel, normalize_y=True, optimizer=None).fit(x, y)
    mean, sd = gp.predict(pool)
    ref_mean, ref_sd = ref.predict(pool, return_std=True)
    assert np.allclose(mean, ref_mean, atol=1e-8) and np.allclose(sd, ref_sd, atol=1e-8)

    pending = np.array([3, 50, 120])
    z = (y - y.mean()) / y.std()
    believed = (mean[pending] - y.mean()) / y.std()
    xb, zb = np.vstack([x, pool[pending]]), np.concatenate([z, believed])
    ref_b = GaussianProcessRegressor(gp._kernel, normalize_y=False, optimizer=None).fit(xb, zb)
    given = gp.posterior().sd_given(pool, pending)
    assert np.allclose(given, y.std() * ref_b.predict(pool, return_std=True)[1], atol=1e-8)
    assert (given[pending] < sd[pending] - 1e-3).all()  # a pending config's sd falls to about the noise
    assert (given <= sd + 1e-12).all()


def test_a_batch_of_proposals_shares_one_model_fit():
    """Between two results the model is the same: a batch of proposals fits it once (each proposal then
    costs a numpy solve), and the batch spreads out (distinct, never-measured configs)."""
    space = Space.from_dict(SPACE)
    valid = list(space.enumerate(FACTS))
    st = make_strategy("auto", StrategyContext(space, FACTS, 0, valid, shape={"N": 16}, shape_params=("N",)))
    sampler = st.study.sampler
    fits = []
    fit = sampler.local.fit
    sampler.local.fit = lambda x, y: (fits.append(len(x)), fit(x, y))
    for config in st.propose(4):
        st.tell(config, shifting(config, {"N": 16}))
    batch = st.propose(6)
    assert len(fits) == 1 and fits[0] >= 3
    told = set(st._told)
    assert len({config_hash(c) for c in batch}) == 6 and not told & {config_hash(c) for c in batch}
    st.tell(batch[0], shifting(batch[0], {"N": 16}))
    st.propose(2)
    assert len(fits) == 2  # a new result: a new fit
