"""The engine: the pipeline over simulated and real evaluators, claims across searchers, the Optuna study
written in batches. Simulated devices let the pipeline's scheduling be tested without GPUs."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest

from autotune.engine import (
    Candidate,
    EvalOptions,
    KernelMeta,
    Pipeline,
    ProcessBackend,
    SimulatedBackend,
    WorkerInfo,
)
from autotune.settings import SearchSettings
from autotune.space import Space
from autotune.store import Store
from autotune.trial import TrialResult, TrialStatus, config_hash
from autotune.tuning.tuner import Tuner

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "tests" / "kernels" / "tiny.py")
LANDSCAPES = sorted((ROOT / "data" / "landscapes").glob("gemm_fp8_*.json"))
SPACE = {
    "name": "sim",
    "params": {"A": [1, 2, 3, 4, 5, 6], "B": [1, 2, 3, 4], "C": ["x", "y"]},
    "constraints": [{"name": "not_too_big", "expr": "A * B <= 16"}],
}


def sim_info(space: Space, default: dict) -> WorkerInfo:
    meta = KernelMeta(
        name="sim_kernel",
        path="sim",
        source_hash="s" * 64,
        space=space.to_dict(),
        space_source="<inline>",
        default_config=default,
        default_shapes=({"N": 8},),
        shape_params=("N",),
        dtypes={"x": "f32"},
    )
    env = {
        "device_kind": "sim",
        "gpu_name": "Sim GPU",
        "cc": "sim",
        "sm_count": 1,
        "driver": "sim",
        "cuda": "sim",
        "torch": "sim",
        "triton": "sim",
        "hostname": "h",
    }
    return WorkerInfo(meta, {"cc": 0}, env, "sim:0", 4)


def synthetic(config, shape) -> TrialResult:
    """A smooth landscape with one failing region: best at A=4, B=3, C=y."""
    if config["A"] == 6 and config["C"] == "x":
        return TrialResult(TrialStatus.COMPILE_FAILED, config, error="synthetic ptxas error")
    t = 1e-5 * (1 + (config["A"] - 4) ** 2 + (config["B"] - 3) ** 2 + (0 if config["C"] == "y" else 0.5))
    return TrialResult(TrialStatus.OK, config, time_s=t, tflops=1.0)


def sim_tuner(url: str, devices: int, **settings) -> Tuner:
    space = Space.from_dict(SPACE)
    backend = SimulatedBackend(sim_info(space, {"A": 1, "B": 1, "C": "x"}), synthetic, eval_s=0.002)
    s = SearchSettings(devices=",".join(f"sim:{i}" for i in range(devices)), **settings)
    tuner = Tuner("sim", Store(url), s, backend=backend)
    tuner.store.schema.upgrade()
    return tuner


def test_pipeline_spreads_candidates_over_devices_and_compiles_ahead():
    space = Space.from_dict(SPACE)
    backend = SimulatedBackend(
        sim_info(space, {"A": 1, "B": 1, "C": "x"}), synthetic, compile_s=0.01, eval_s=0.01
    )
    pipe = Pipeline(backend, [f"sim:{i}" for i in range(4)], compile_workers=3)
    infos = pipe.start()
    assert [i.device for i in infos] == ["sim:0", "sim:1", "sim:2", "sim:3"]
    configs = list(space.enumerate({"cc": 0}))
    try:
        for c in configs:
            pipe.submit(Candidate(c, config_hash(c), {"N": 8}))
        outs = [pipe.next_result(timeout=30) for _ in configs]
    finally:
        pipe.close()
    assert None not in outs and pipe.in_flight == 0
    assert sorted(o.candidate.config_hash for o in outs) == sorted(config_hash(c) for c in configs)
    # a compile failure never reaches a timing worker; everything else was timed, on every device
    failed = [o for o in outs if o.result.status is TrialStatus.COMPILE_FAILED]
    assert failed and all(o.device == "compile" for o in failed)
    assert {o.device for o in outs if o.result.status is TrialStatus.OK} == {f"sim:{i}" for i in range(4)}
    timed = [
        h for ev in backend.made if ev.device.startswith("sim:") for kind, h in ev.calls if kind == "eval"
    ]
    assert len(timed) == len(configs) - len(failed)


def test_a_dead_worker_is_retried_once_then_crashed():
    space = Space.from_dict(SPACE)
    deaths: dict[str, int] = {}

    def dies(config, shape):
        h = config_hash(config)
        deaths[h] = deaths.get(h, 0) + 1
        if config["A"] == 1 or (config["A"] == 2 and deaths[h] == 1):  # A=1 always, A=2 the first time
            return TrialResult(TrialStatus.CRASHED, config, error="worker killed by SIGKILL")
        return TrialResult(TrialStatus.OK, config, time_s=1e-5)

    pipe = Pipeline(SimulatedBackend(sim_info(space, {}), dies), ["sim:0"], compile_workers=0)
    pipe.start()
    try:
        for a in (1, 2, 3):
            c = {"A": a, "B": 1, "C": "x"}
            pipe.submit(Candidate(c, config_hash(c), {"N": 8}))
        outs = {o.candidate.config["A"]: o for o in (pipe.next_result(timeout=30) for _ in range(3))}
    finally:
        pipe.close()
    assert outs[1].result.status is TrialStatus.CRASHED and outs[1].candidate.attempt == 1
    assert outs[2].result.status is TrialStatus.OK and outs[2].candidate.attempt == 1
    assert outs[3].result.status is TrialStatus.OK and outs[3].candidate.attempt == 0
    assert sum(deaths.values()) == 2 + 2 + 1


def test_worker_killed_from_outside_is_retried_on_a_fresh_worker():
    opts = EvalOptions(num_tests=2, env={"TINY_FIRST_RUN_SLEEP": "4"})
    pipe = Pipeline(ProcessBackend(TINY, opts), ["cpu"], compile_workers=0)
    pipe.start()
    worker = pipe.timers[0]
    try:
        cfg = {"REPS": 2, "MODE": "a"}
        pipe.submit(Candidate(cfg, config_hash(cfg), {"N": 16}))
        time.sleep(1.5)  # the child is sleeping in its first launch
        first_pid = worker.pid
        os.kill(first_pid, signal.SIGKILL)
        out = pipe.next_result(timeout=120)
    finally:
        pipe.close()
    assert out is not None and out.result.status is TrialStatus.OK, out.result.error
    assert out.candidate.attempt == 1 and worker.pid != first_pid


@pytest.mark.parametrize("devices", [1, 4])
def test_search_with_simulated_devices(sqlite_url, devices):
    tuner = sim_tuner(sqlite_url, devices, strategy="exhaustive", trials=1000, compile_workers=2)
    with tuner:
        tuner.start()
        report = tuner.search_shape({"N": 8})
    space = Space.from_dict(SPACE)
    valid = list(space.enumerate({"cc": 0}))
    assert report.evaluations == len(valid) and report.busy == 0
    assert report.best.config == {"A": 4, "B": 3, "C": "y"}
    assert set(report.devices) == {f"sim:{i}" for i in range(devices)}
    store = tuner.store
    key = store.history.key_states()[0].key_id
    trials = store.trials.recorded(key)
    # the finalists' re-timings are extra trials on one device, never copied to the study: the top 3 and the
    # default config (re-timed beside them: the speed-up is a ratio of paired samples), 3 rounds each
    assert len(store.trials.recorded(key, retimed=True)) == len(trials) + 4 * 3 and len(report.finalists) == 4
    assert {"A": 1, "B": 1, "C": "x"} in [f.config for f in report.finalists] and report.speedup_pairs == 3
    assert {t.device for t in trials if t.status is TrialStatus.OK} == set(report.devices)
    assert store.trials.duplicate_measurements() == 0 and store.claims.running(key) == {}
    # the Optuna study in the database: every trial, finished, with real times (no penalty values)
    import optuna

    study = optuna.load_study(study_name=report.study_name, storage=sqlite_url)
    assert len(study.trials) == len(trials)
    assert all(t.state.is_finished() for t in study.trials)
    ok = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(ok) == sum(t.status is TrialStatus.OK for t in trials)
    assert min(t.value for t in ok) == pytest.approx(report.best.time_s)
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    assert {t.user_attrs["autotune_status"] for t in failed} == {"compile_failed"}
    # named for people (optuna-dashboard shows these): the metric, and what the hash name stands for
    assert study.metric_names == ["time_s"]
    assert study.user_attrs == {"kernel": "sim_kernel", "shape": {"N": 8}, "device": "Sim GPU"}


def test_budget_and_strategies_on_simulated_devices(sqlite_url):
    for strategy, seed in (("tpe", 1), ("random", 2), ("exhaustive", 3)):
        tuner = sim_tuner(sqlite_url, 2, strategy=strategy, trials=7, seed=seed, compile_workers=1)
        with tuner:
            tuner.start()
            report = tuner.search_shape({"N": 8})
        assert report.evaluations == 7, strategy  # --trials budgets every strategy, exhaustive too
    store = Store(sqlite_url)
    key = store.history.key_states()[0].key_id
    assert store.trials.duplicate_measurements() == 0
    # later searches reuse, never re-measure: 21 distinct configs in all
    assert (
        len(
            {config_hash(t.config) for t in store.trials.recorded(key) if t.status is not TrialStatus.INVALID}
        )
        == 21
    )


def test_concurrent_searchers_split_the_work(db_url):
    """Four searchers (threads, each its own owner) on one key: each config measured exactly once."""
    tuners = [sim_tuner(db_url, 1, strategy="exhaustive", trials=1000, compile_workers=1) for _ in range(4)]
    reports, errors = [], []

    def run(t):
        try:
            with t:
                t.start()
                reports.append(t.search_shape({"N": 8}))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in tuners]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors, errors
    store = Store(db_url)
    valid = list(Space.from_dict(SPACE).enumerate({"cc": 0}))
    assert sum(r.evaluations for r in reports) == len(valid)
    assert store.trials.duplicate_measurements() == 0
    best = store.trials.best("sim_kernel")
    assert len(best) == 1 and best[0].config == {"A": 4, "B": 3, "C": "y"}


#: the space the held-out landscapes were recorded with (wave 1), and its kernel's default config then
WAVE1_SPACE = ROOT / "data" / "landscapes" / "gemm_fp8_wave1.yaml"
WAVE1_DEFAULT = {
    "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8,
    "num_stages": 3, "num_warps": 8, "USE_TMA": False, "SPLIT_K": 1,
}  # fmt: skip


def test_replay_of_a_recorded_h200_landscape(sqlite_url):
    """The simulated evaluator answers from data/landscapes: the search finds the landscape's best."""
    from autotune.engine import SimulatedKernel, load_landscape
    from autotune.env import DEVICE_PRESETS

    recorded = load_landscape(LANDSCAPES[0], space=Space.from_yaml(WAVE1_SPACE))
    land = SimulatedKernel.of([recorded], default_config=WAVE1_DEFAULT, facts=DEVICE_PRESETS["h200"])
    info = WorkerInfo(land.meta, land.facts, land.env, "sim:0", 1)
    tuner = Tuner(
        "sim",
        Store(sqlite_url),
        SearchSettings(devices="sim:0,sim:1", strategy="exhaustive", trials=5000, compile_workers=2),
        backend=SimulatedBackend(info, land.answer),
    )
    tuner.store.schema.upgrade()
    with tuner:
        tuner.start()
        shape = land.meta.default_shapes[0]
        report = tuner.search_shape(shape)
    doc = json.loads(LANDSCAPES[0].read_text())
    best = min((c for c in doc["configs"] if c["status"] == "ok"), key=lambda c: c["time_s"])
    assert report.best.time_s == pytest.approx(best["time_s"])
    assert report.evaluations == len(doc["configs"])


def test_optuna_dashboard_lists_each_shape_study_with_real_times(sqlite_url):
    optuna_dashboard = pytest.importorskip("optuna_dashboard")
    tuner = sim_tuner(sqlite_url, 2, strategy="exhaustive", trials=1000, compile_workers=1)
    with tuner:
        tuner.start()
        reports = [tuner.search_shape({"N": 8}), tuner.search_shape({"N": 16})]
    app = optuna_dashboard.wsgi(sqlite_url)

    def get(path):
        env: dict = {}
        setup_testing_defaults(env)
        env["PATH_INFO"] = path
        status = {}

        def start_response(s, headers, exc_info=None):
            status["s"] = s

        body = b"".join(app(env, start_response))
        assert status["s"].startswith("200"), status
        return json.loads(body)

    studies = get("/api/studies")["study_summaries"]
    assert sorted(s["study_name"] for s in studies) == sorted(r.study_name for r in reports)
    for s in studies:
        detail = get(f"/api/studies/{s['study_id']}")
        values = [t["values"][0] for t in detail["trials"] if t["state"] == "Complete"]
        assert values and max(values) < 1.0, "penalty values in the study"
        report = next(r for r in reports if r.study_name == s["study_name"])
        assert min(values) == pytest.approx(report.best.time_s)
        assert all(t["state"] in ("Complete", "Fail") for t in detail["trials"])
        assert detail["objective_names"] == ["time_s"]  # not "Objective 0"
        assert {a["key"] for a in detail["user_attrs"]} >= {"kernel", "shape", "device"}


def _search_without_waiting_on_the_study(url: str, trials: int, result) -> None:
    """A search as ``autotune search`` ends one: it does not wait on its Optuna study copy (a process of its
    own, so the next search sees it dead and adopts what it left unwritten)."""
    tuner = sim_tuner(url, 1, strategy="random", trials=trials, seed=1, compile_workers=0, retime_top=0)
    tuner.wait_for_study = False
    with tuner:
        tuner.start()
        report = tuner.search_shape({"N": 8})
    tuner.store.close()
    result.put(report.evaluations)


def _study_trial_ids(url: str, study_name: str) -> list[int]:
    import optuna

    try:
        study = optuna.load_study(study_name=study_name, storage=url)
    except KeyError:  # never created: the writer was stopped before it opened the study
        return []
    return [t.user_attrs["autotune_trial_id"] for t in study.get_trials(deepcopy=False)]


def test_shutdown_with_a_pending_study_copy_loses_nothing_and_the_next_run_adds_it(db_url):
    """A search that ends before its study writer has even started (it imports Optuna: seconds) does not
    wait for it; every trial is in the trials table, and the next search of the shape copies the missing
    ones into the study, each once."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    result = ctx.Queue()
    first = ctx.Process(target=_search_without_waiting_on_the_study, args=(db_url, 3, result))
    first.start()
    assert result.get(timeout=300) == 3
    first.join(timeout=60)
    assert first.exitcode == 0

    store = Store(db_url)
    stored = _stored_search_ids(store)
    assert len(stored) == 3
    study_name = _study_name(store)
    assert len(_study_trial_ids(db_url, study_name)) < 3  # the copy was pending when the search ended
    store.close()

    tuner = sim_tuner(db_url, 1, strategy="random", trials=2, seed=2, compile_workers=0, retime_top=0)
    with tuner:  # a library search waits for its copy (wait_for_study)
        tuner.start()
        tuner.search_shape({"N": 8})
    stored = _stored_search_ids(tuner.store)
    tuner.store.close()
    copied = _study_trial_ids(db_url, study_name)
    assert len(stored) == 5 and sorted(copied) == sorted(stored), (stored, copied)


def _stored_search_ids(store: Store) -> list[int]:
    from autotune.trial import KIND_SEARCH

    (key_id,) = _key_ids(store)
    return [i for i, r in store.trials.since(key_id, 0) if r.kind == KIND_SEARCH]


def _key_ids(store: Store) -> list[int]:
    from sqlalchemy import select

    from autotune.store.models import TuningKeyRow

    with store.db.session() as s:
        return list(s.scalars(select(TuningKeyRow.id)))


def _study_name(store: Store) -> str:
    from sqlalchemy import select

    from autotune.store.models import TuningKeyRow

    with store.db.session() as s:
        return s.scalars(select(TuningKeyRow.study_name)).one()


def test_devices_of_different_models_are_refused(sqlite_url):
    """Identical GPUs share a key; a second model would need its own: one search per model."""
    from dataclasses import replace

    from autotune.engine import SimulatedEvaluator
    from autotune.errors import SettingsError

    space = Space.from_dict(SPACE)
    info = sim_info(space, {"A": 1, "B": 1, "C": "x"})
    other = replace(info, env={**info.env, "gpu_name": "Other GPU"})

    class Mixed(SimulatedBackend):
        def timer(self, device):
            return SimulatedEvaluator(other if device == "sim:1" else self.info, self.answer, device=device)

    s = SearchSettings(devices="sim:0,sim:1", compile_workers=0)
    tuner = Tuner("sim", Store(sqlite_url), s, backend=Mixed(info, synthetic))
    with tuner, pytest.raises(SettingsError, match="mixes GPU models"):
        tuner.start()


def test_a_long_lived_tuner_copies_every_shape_to_its_study_in_the_background(sqlite_url):
    """``autotune serve``'s tuner (``long_lived``) answers a shape without waiting on its Optuna study copy,
    keeps the next shape's writer started, and loses nothing: once the tuner is closed, every shape's study
    holds each of its stored search trials, once."""
    tuner = sim_tuner(sqlite_url, 1, strategy="random", trials=3, seed=1, compile_workers=0, retime_top=0)
    tuner.long_lived = True
    # the last copy's writer may still be importing Optuna at close on a loaded machine: wait for it here
    tuner.closing_wait_s = 300.0
    shapes = ({"N": 8}, {"N": 16}, {"N": 32})
    with tuner:
        tuner.start()
        reports = [tuner.search_shape(s) for s in shapes]
        assert tuner._writer is not None  # the next shape's writer, already started
    store = Store(sqlite_url)
    from autotune.trial import KIND_SEARCH

    for report in reports:
        (key,) = [k for k in store.history.key_states() if k.shape_key == report.shape_key]
        stored = [i for i, r in store.trials.since(key.key_id, 0) if r.kind == KIND_SEARCH]
        copied = _study_trial_ids(sqlite_url, report.study_name)
        assert len(stored) == 3 and sorted(copied) == sorted(stored), (report.shape_key, stored, copied)
    store.close()


@pytest.mark.parametrize("warm", [False, True])
def test_compile_workers_of_a_long_lived_owner_warm_up_on_the_default_config(warm):
    """``warm_compilers`` (``autotune serve``): every compile worker compiles the default config at the first
    default shape once it started, before any candidate, so a request's first compile is warm; without it
    (``autotune search``) a compile worker compiles only the candidates."""
    space = Space.from_dict(SPACE)
    default = {"A": 1, "B": 1, "C": "x"}
    backend = SimulatedBackend(sim_info(space, default), synthetic, compile_s=0.01, eval_s=0.001)
    pipe = Pipeline(backend, ["sim:0"], compile_workers=3)
    pipe.warm_compilers = warm
    pipe.start()
    other = {"A": 4, "B": 3, "C": "y"}
    try:
        pipe.submit(Candidate(other, config_hash(other), {"N": 16}))
        assert pipe.next_result(timeout=30) is not None
    finally:
        pipe.close()
    compilers = [ev for ev in backend.made if ev.device == "sim-compile"]
    assert len(compilers) == 3
    firsts = [ev.calls[0] if ev.calls else None for ev in compilers]
    if warm:
        assert firsts == [("compile", config_hash(default))] * 3
    else:
        assert ("compile", config_hash(default)) not in firsts


def test_the_racing_bound_follows_the_best_and_is_off_for_the_default_the_finalists_and_after(sqlite_url):
    """``SearchSettings.race``: the default is measured before any best (no bound); then every evaluation is
    asked under (race_calls, race x the best so far), a bound that only falls and never below race x the
    final best; the finalists' re-timings and whatever comes after the search take every call."""
    tuner = sim_tuner(sqlite_url, 1, strategy="random", trials=12, seed=0, race=1.5, race_calls=4)
    with tuner:
        tuner.start()
        report = tuner.search_shape({"N": 8})
    (timer,) = [ev for ev in tuner.backend.made if ev.device == "sim:0"]
    races = timer.races
    retimes = len(races) - report.evaluations  # every evaluation (the default's too), then the re-timings
    search, finals = races[: len(races) - retimes], races[len(races) - retimes :]
    assert search[0] is None and retimes > 0 and finals == [None] * retimes
    bounds = [r[1] for r in search[1:]]
    assert all(r is not None and r[0] == 4 for r in search[1:])
    assert bounds == sorted(bounds, reverse=True)
    (key,) = tuner.store.history.key_states()
    best = min(r.time_s for r in tuner.store.trials.recorded(key.key_id) if r.timed)
    assert min(bounds) >= 1.5 * best * (1 - 1e-9)
    assert timer.options.race is None


def test_the_report_splits_a_shapes_seconds(sqlite_url):
    """``ShapeReport.time_split``: where the shape's wall seconds went. Its parts are disjoint spans of the
    search (they add up to at most its ``wall_s``), the devices' measuring covers every simulated
    measurement (each sleeps 2 ms), the strategy's seconds are part of the loop's own, and the split
    survives the JSON round trip a handed-over search reads back."""
    from autotune.tuning.report import report_dict, report_from_dict

    tuner = sim_tuner(sqlite_url, 1, strategy="random", trials=12, compile_workers=2, seed=0)
    with tuner:
        tuner.start()
        report = tuner.search_shape({"N": 8})
    split = report.time_split
    assert set(split) == {
        "setup", "to_first_measurement", "measuring", "device_idle", "loop_busy", "strategy", "retime",
        "close_study", "finish",
    }  # fmt: skip
    assert all(v >= 0 for v in split.values()), split
    timed = sum(report.statuses[s] for s in ("ok", "wrong_result"))
    assert timed >= 1 and split["measuring"] >= 0.9 * 0.002 * timed, split
    disjoint = (
        "setup",
        "to_first_measurement",
        "measuring",
        "device_idle",
        "retime",
        "close_study",
        "finish",
    )
    assert sum(split[k] for k in disjoint) <= report.wall_s + 0.01, (split, report.wall_s)
    assert split["strategy"] <= split["loop_busy"] + 0.001, split
    assert report_from_dict(report_dict(report)).time_split == split
