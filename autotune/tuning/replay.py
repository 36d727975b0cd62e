"""Replay strategies offline on recorded landscapes: what each would have found, per budget, over seeds.

A replay is ``autotune search``'s own loop (``tuning.shape_search.ShapeSearch``) on the simulated backend:
for each target landscape (one shape), strategy and seed, the search runs with the landscape answering every
evaluation, on a ``SerialPipeline`` standing for the real one (``depth`` proposals in flight; results in the
order they were submitted, so a run depends on its seed alone), with a temporary SQLite store (each run its
own key). The default config first, invalid configs and repeats told back without counting, the budget
counting new valid configs only, the strategy's batch size and history: as a search.

Transfer: the other landscapes of the same kernel and any ``preload`` files are written into a temporary
store, as a search would find them in a shared database, except the target's own (its shape on its
device): other shapes on any device (leave-one-shape-out) and the target's shape on other devices
(leave-one-device-out). The strategy reads them through ``store.history.transfer`` (another space's configs
weighted lower). With ``history_evaluations`` N, each history landscape enters as what an N-evaluation
search of it (``auto``, empty store) measured, not as a sweep: the store a team really has.

A strategy named ``NAME@D`` runs with ``D`` proposals in flight instead of the replay's depth (``tpe@1``:
sequential TPE beside the pipelined one)."""

from __future__ import annotations

import hashlib
import math
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.engine import SerialPipeline, SimulatedBackend, SimulatedKernel
from autotune.engine.simulated import simulated_env
from autotune.errors import SettingsError
from autotune.search.base import FeatureFn, HistoryPoint, load_history
from autotune.settings import SearchSettings
from autotune.store import Owner
from autotune.trial import TrialResult, TrialStatus, config_hash
from autotune.tuning.landscape import Landscape
from autotune.tuning.report import TrialEvent
from autotune.tuning.shape_search import SearchEngine, SearchStore, ShapeSearch

#: in-flight proposals of the H200 pipeline (15 compile workers + 4 per device): the replay's default
DEFAULT_DEPTH = 19


@dataclass
class Run:
    shape_key: str
    strategy: str
    seed: int
    #: best time found after each evaluation (len = evaluations made)
    best_after: list[float]
    best_s: float
    wall_s: float
    proposals: int = 0
    invalid: int = 0
    repeats: int = 0
    #: the hashes of the configs evaluated, in order: what tells two runs apart
    configs: list[str] = field(default_factory=list)
    #: why the search stopped (``search.stopping``) and the stopping rule's last bound and noise
    stop_reason: str = ""
    stop_bound: float | None = None
    stop_noise: float | None = None
    #: neighbours of a best the stopping rule had measured before it let the search stop
    polished: int = 0
    #: with measurement noise: the true time of the config the search declared best
    chosen_s: float | None = None

    @property
    def evaluations(self) -> int:
        return len(self.best_after)

    @property
    def final_regret(self) -> float:
        """The regret where the search stopped (its budget, or where the stopping rule stopped it): of the
        config it declared best, when that is known (a noisy replay)."""
        if self.chosen_s is not None:
            return self.chosen_s / self.best_s - 1.0
        return self.regret(len(self.best_after)) if self.best_after else math.inf

    def regret(self, n: int) -> float:
        if not self.best_after:
            return math.inf
        return self.best_after[min(n, len(self.best_after)) - 1] / self.best_s - 1.0


@dataclass
class Summary:
    shape_key: str
    strategy: str
    budget: int
    regrets: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.regrets)

    @property
    def median(self) -> float:
        return statistics.median(self.regrets)

    @property
    def worst(self) -> float:
        return max(self.regrets)

    def within(self, x: float) -> float:
        return sum(r <= x for r in self.regrets) / len(self.regrets)


def label(target: Landscape) -> str:
    """A target's name in the tables: its shape and its space (one shape may be recorded in two spaces)."""
    return f"{target.shape_key} [{target.space.name} {target.space.hash()[:6]}]"


def history_store(landscapes: Sequence[Landscape], url: str) -> Any:
    """A store holding every landscape's measured configs under its own key (as searches would have)."""
    from autotune.store import Store

    store = Store(url)
    store.schema.upgrade()
    for land in landscapes:
        key = store.keys.ensure(
            land.kernel,
            "replay",
            land.space.hash(),
            land.space.to_dict(),
            dict(land.shape),
            land.shape_key,
            {},
            simulated_env(land.device_name, land.facts),
        )
        results = [r for r in land.results.values() if r.status is not TrialStatus.INVALID]
        store.trials.record_many(key.id, [(r, None, None) for r in results])
    return store


class _RunStore:
    """The temporary store of a replay's runs: one SQLite file, its schema made once; each run searches
    its own key (as a fresh version of the kernel), so no run sees another's trials."""

    def __init__(self, directory: str):
        from autotune.store import Store

        self.store = Store(f"sqlite:///{Path(directory) / 'runs.db'}")
        self.store.schema.upgrade()
        self.runs = 0

    def next_version(self) -> str:
        """A kernel source hash of its own for the next run (unique in its first 12 characters, which
        name the run's Optuna study)."""
        self.runs += 1
        return hashlib.sha256(f"replay run {self.runs}".encode()).hexdigest()


def replay_one(
    target: Landscape,
    strategy: str,
    evaluations: int | None,
    seed: int,
    history: Sequence[HistoryPoint] = (),
    features: FeatureFn | None = None,
    depth: int = DEFAULT_DEPTH,
    *,
    runs: _RunStore | None = None,
    measured: list[TrialResult] | None = None,
    noise: float = 0.0,
) -> Run:
    """One search of ``target`` by ``strategy`` (``history``: what the store would give it); ``NAME@D``
    runs ``NAME`` with ``D`` proposals in flight. ``measured`` collects every result, in order.
    ``noise``: each measurement's time is the landscape's times a log-normal factor of this relative sd
    (a GPU's run-to-run noise, ~1 %: what a noise-free replay cannot show); regrets are then of the true
    times of the configs the search took for best."""
    if runs is None:
        with tempfile.TemporaryDirectory() as tmp:
            owned = _RunStore(tmp)
            try:
                args = (target, strategy, evaluations, seed, history, features, depth)
                return replay_one(*args, runs=owned, measured=measured, noise=noise)
            finally:
                owned.store.close()
    name, depth = strategy_depth(strategy, depth)
    t0 = time.perf_counter()
    pipeline = _pipeline(target, runs, depth, noise, seed)
    infos = tuple(pipeline.start())
    run = Run(label(target), strategy, seed, [], target.best_s, 0.0)

    def true_s(result: TrialResult | None) -> float:
        if result is None:
            return math.inf
        return (target.answer(result.config).time_s if noise > 0 else result.time_s) or math.inf

    def on_event(event: TrialEvent) -> None:
        run.best_after.append(true_s(event.best))
        run.configs.append(config_hash(event.result.config))
        if measured is not None:
            measured.append(event.result)

    search = ShapeSearch(
        target.shape,
        SearchEngine(pipeline, infos, target.space, features),
        SearchStore.of(runs.store),
        _settings(name, evaluations, seed),
        owner=Owner(),
        history=lambda *_: list(history),
        on_event=on_event,
    )
    report = search.run()
    run.proposals, run.invalid, run.repeats = search.proposals, report.invalid, search.repeats
    run.stop_reason, run.stop_bound, run.stop_noise = report.stop_reason, report.stop_bound, report.stop_noise
    run.polished = search.stopper.polished if search.stopper is not None else 0
    if noise > 0 and report.best is not None:
        run.chosen_s = true_s(report.best)
    run.wall_s = time.perf_counter() - t0
    return run


def _pipeline(target: Landscape, runs: _RunStore, depth: int, noise: float, seed: int) -> SerialPipeline:
    """The simulated pipeline of one run: ``target`` as a fresh version of its kernel, measured with
    ``noise`` (``_noisy``) when it is above 0."""
    kernel = SimulatedKernel.of([target])
    kernel = replace(kernel, meta=replace(kernel.meta, source_hash=runs.next_version()))
    backend = SimulatedBackend.of(kernel)
    if noise > 0:
        backend = SimulatedBackend(kernel.info(), _noisy(kernel.answer, noise, seed))
    return SerialPipeline(backend, ["sim:0"], depth)


def _noisy(answer: Callable[..., TrialResult], noise: float, seed: int) -> Callable[..., TrialResult]:
    """``answer`` with each timed result's time drawn anew around the recorded one (the n-th measurement
    of a config draws the same factor in every run of ``seed``: runs stay reproducible)."""
    counts: Counter[str] = Counter()

    def noisy(config: dict[str, Any], shape: dict[str, int]) -> TrialResult:
        res = answer(config, shape)
        if not res.timed or not res.time_s:
            return res
        h = config_hash(config)
        counts[h] += 1
        factor = math.exp(random.Random(f"{seed}:{h}:{counts[h]}").gauss(0.0, noise))
        return replace(res, time_s=res.time_s * factor)

    return noisy


def strategy_depth(spec: str, depth: int) -> tuple[str, int]:
    """``NAME@D`` -> (NAME, D); ``NAME`` -> (NAME, ``depth``)."""
    name, sep, d = spec.partition("@")
    if not sep:
        return spec, depth
    if not d.isdigit() or int(d) < 1:
        raise SettingsError(f"strategy {spec!r}: NAME@D needs D, the proposals in flight, at least 1")
    return name, int(d)


def partial(land: Landscape, evaluations: int, seed: int, runs: _RunStore, depth: int) -> Landscape:
    """``land`` as an ``evaluations``-evaluation search of it (``auto``, empty store) left it in a store:
    only the configs that search measured."""
    measured: list[TrialResult] = []
    replay_one(land, "auto", evaluations, seed, (), None, depth, runs=runs, measured=measured)
    results = {config_hash(r.config): r for r in measured if r.status is not TrialStatus.INVALID}
    return replace(land, results=results)


def history_of(target: Landscape, candidates: Sequence[Landscape]) -> list[Landscape]:
    """What a search of ``target`` may learn from: the same kernel, never its own shape on its own device."""
    return [
        t
        for t in candidates
        if t is not target
        and t.kernel == target.kernel
        and not (t.shape_key == target.shape_key and t.device_name == target.device_name)
    ]


def strategy_seed(seed: int, strategy: str) -> int:
    """The seed a strategy gets in a replay's run ``seed``: one per (seed, strategy). The same number for
    every strategy made TPE's random start-up trials the random strategy's, so the two replayed alike."""
    digest = hashlib.sha256(f"replay seed {seed} strategy {strategy}".encode()).digest()
    return int.from_bytes(digest[:4], "big")  # within Optuna's and numpy's 0 .. 2**32 - 1


def _settings(strategy: str, evaluations: int | None, seed: int) -> SearchSettings:
    """A search's settings for a replay: the budget (None: the stopping rule, as a search without
    --trials) and the strategy's seed; no deadline and no re-timing (a landscape answers one time per
    config), whatever the environment says. The stopping rule's wall-time ceiling is off: a replay's time
    is not a search's."""
    return SearchSettings(
        trials=evaluations,
        strategy=strategy,
        seed=strategy_seed(seed, strategy),
        devices="sim:0",
        timeout_s=0.0,
        compile_workers=0,
        retime_top=0,
        stop_wall_s=0.0,
    )


def _history(target: Landscape, others: Sequence[Landscape], url: str) -> list[HistoryPoint]:
    """What a search of ``target`` reads from a database holding ``others``."""
    if not others:
        return []
    store = history_store(others, url)
    try:
        return load_history(
            store.history, target.kernel, target.space, simulated_env(target.device_name, target.facts)
        )
    finally:
        store.close()


def replay(
    targets: Sequence[Landscape],
    strategies: Sequence[str],
    evaluations: int | None,
    seeds: Sequence[int],
    *,
    transfer: bool = True,
    preload: Sequence[Landscape] = (),
    features_for: Callable[[Landscape], FeatureFn | None] | None = None,
    depth: int = DEFAULT_DEPTH,
    progress: Callable[[Run], None] | None = None,
    history_evaluations: int = 0,
    noise: float = 0.0,
) -> list[Run]:
    """Every (target, strategy, seed); with ``transfer``, the other targets of the same kernel are in the
    store, plus ``preload``: never the target's own shape on its own device (``history_of``). With
    ``history_evaluations``, each of those as a search of that many evaluations left it (``partial``).
    ``noise``: measurement noise of the targets' searches (``replay_one``)."""
    for s in strategies:
        strategy_depth(s, depth)  # a bad NAME@D fails before any run
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        run_store = _RunStore(tmp)
        searched: dict[int, Landscape] = {}

        def as_stored(land: Landscape, n: int) -> Landscape:
            if history_evaluations <= 0:
                return land
            if id(land) not in searched:
                searched[id(land)] = partial(land, history_evaluations, 1000 + n, run_store, depth)
            return searched[id(land)]

        pool = [*(targets if transfer else ()), *preload]
        index = {id(t): n for n, t in enumerate(pool)}  # each history landscape's search has its own seed
        for i, target in enumerate(targets):
            others = [as_stored(t, index[id(t)]) for t in history_of(target, pool)]
            history = _history(target, others, f"sqlite:///{Path(tmp) / f'history{i}.db'}")
            features = features_for(target) if features_for else None
            for strategy in strategies:
                for seed in seeds:
                    args = (target, strategy, evaluations, seed, history, features, depth)
                    run = replay_one(*args, runs=run_store, noise=noise)
                    runs.append(run)
                    if progress:
                        progress(run)
        run_store.store.close()
    return runs


def summarize(runs: Sequence[Run], budgets: Sequence[int]) -> list[Summary]:
    out: dict[tuple[str, str, int], Summary] = {}
    for r in runs:
        for b in budgets:
            out.setdefault((r.shape_key, r.strategy, b), Summary(r.shape_key, r.strategy, b)).regrets.append(
                r.regret(b)
            )
    return list(out.values())


def evaluations_to(runs: Sequence[Run], strategy: str, target: float = 0.02) -> int | None:
    """The fewest evaluations after which the mean regret over every shape and seed is <= ``target``."""
    mine = [r for r in runs if r.strategy == strategy]
    if not mine:
        return None
    n_max = max(len(r.best_after) for r in mine)
    for n in range(1, n_max + 1):
        if statistics.fmean(r.regret(n) for r in mine) <= target:
            return n
    return None


@contextmanager
def kernel_features(kernel_path: str) -> Iterator[Callable[[Landscape], FeatureFn | None]]:
    """The kernel file's ``features`` hook, computed in a worker process (as in a search: this process
    never imports kernel files), with each landscape's device facts; the worker lives for the block."""
    from autotune.engine import Worker

    with Worker(kernel_path, "cpu") as worker:
        worker.start()

        def for_target(target: Landscape) -> FeatureFn | None:
            def fn(shape: Any, configs: list[dict[str, Any]]) -> list[dict[str, float]] | None:
                return worker.features(dict(shape), configs, dict(target.facts))

            return fn

        yield for_target


def format_table(runs: Sequence[Run], budgets: Sequence[int]) -> list[str]:
    """Per shape, strategy and budget: mean / median / worst regret and the share of runs within 1 % and
    2 % of the landscape's best; then, per strategy, the evaluations to a mean regret <= 2 %."""
    lines = [
        f"{'shape [space]':44} {'strategy':10} {'evals':>5} {'mean %':>7} {'median %':>8} {'worst %':>7} {'<=1 %':>6} {'<=2 %':>6}"
    ]
    sums = summarize(runs, budgets)
    for s in sorted(sums, key=lambda s: (s.shape_key, s.strategy, s.budget)):
        lines.append(
            f"{s.shape_key:44} {s.strategy:10} {s.budget:>5} {s.mean * 100:7.2f} {s.median * 100:8.2f} "
            f"{s.worst * 100:7.2f} {s.within(0.01) * 100:5.0f}% {s.within(0.02) * 100:5.0f}%"
        )
    lines.append("")
    for strategy in dict.fromkeys(r.strategy for r in runs):
        mine = [r for r in runs if r.strategy == strategy]
        means = ", ".join(f"{b}: {statistics.fmean(r.regret(b) for r in mine) * 100:.2f} %" for b in budgets)
        n = evaluations_to(runs, strategy)
        lines.append(
            f"{strategy}: mean regret over all shapes and seeds at {means}; "
            f"mean regret <= 2 % after {n if n is not None else 'more than the budget of'} evaluations; "
            f"{statistics.fmean(r.wall_s for r in mine):.2f} s per run"
        )
    return lines + format_stops(runs)


def format_stops(runs: Sequence[Run]) -> list[str]:
    """Per strategy, where the searches stopped: mean and worst regret there, mean and most evaluations,
    and why (the stopping rule's reasons, or ``trials`` for a fixed budget)."""
    lines = []
    for strategy in dict.fromkeys(r.strategy for r in runs):
        mine = [r for r in runs if r.strategy == strategy]
        regrets = [r.final_regret for r in mine]
        why = Counter(r.stop_reason for r in mine)
        lines.append(
            f"{strategy} where stopped: mean regret {statistics.fmean(regrets) * 100:.2f} %, worst "
            f"{max(regrets) * 100:.2f} %; {statistics.fmean(r.evaluations for r in mine):.1f} evaluations "
            f"on average (most {max(r.evaluations for r in mine)}); stopped: "
            + ", ".join(f"{k or '?'} {v}" for k, v in why.most_common())
        )
    return lines
