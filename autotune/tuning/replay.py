"""Replay a strategy offline on recorded landscapes: what it would have found, per budget, over seeds.

For each target landscape (one shape) and seed, a fresh strategy is made exactly as ``autotune search``
makes it (``StrategyContext`` with the space, the default config, the store's history of other shapes and
the kernel's features) and driven by the same rules as the search loop: the default config first, up to
``depth`` proposals in flight (fewer when the strategy asks: ``max_in_flight``), results told in the order
they finish, invalid configs and repeats told back without counting, the budget counting new valid
configs only. Each answer comes from the landscape.

Transfer: the other landscapes of the same kernel (leave-one-shape-out: no landscape of the target's shape,
in any space) and any ``preload`` files are written into a temporary store, as a search would find them in a
shared database; the strategy reads them through ``store.history.transfer`` (another space's configs
weighted lower)."""

from __future__ import annotations

import math
import random
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.search import HistoryPoint, StrategyContext, make_strategy
from autotune.search.base import MAX_STALE, FeatureFn, load_history
from autotune.trial import TrialResult, TrialStatus, config_hash
from autotune.tuning.landscape import LandscapeFile

if TYPE_CHECKING:
    from autotune.store import Store

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


def label(target: LandscapeFile) -> str:
    """A target's name in the tables: its shape and its space (one shape may be recorded in two spaces)."""
    return f"{target.shape_key} [{target.space.name} {target.space.hash()[:6]}]"


def history_store(landscapes: Sequence[LandscapeFile], url: str) -> Store:
    """A store holding every landscape's measured configs under its own key (as searches would have)."""
    from autotune.store import Store

    store = Store(url)
    store.schema.upgrade()
    for land in landscapes:
        env = {
            "device_kind": "cuda",
            "gpu_name": land.device_name,
            "cc": "replay",
            "sm_count": int(land.facts.get("sm_count", 0)),
            "driver": "replay",
            "cuda": "replay",
            "torch": "replay",
            "triton": "replay",
        }
        key = store.keys.ensure(
            land.kernel,
            "replay",
            land.space.hash(),
            land.space.to_dict(),
            dict(land.shape),
            land.shape_key,
            {},
            env,
        )
        results = [r for r in land.results.values() if r.status is not TrialStatus.INVALID]
        store.trials.record_many(key.id, [(r, None, None) for r in results])
    return store


def replay_one(
    target: LandscapeFile,
    strategy: str,
    evaluations: int,
    seed: int,
    history: Sequence[HistoryPoint] = (),
    features: FeatureFn | None = None,
    depth: int = DEFAULT_DEPTH,
) -> Run:
    t0 = time.perf_counter()
    valid = list(target.space.enumerate(target.facts)) if target.space.enumerable(target.facts) else None
    default = (
        target.default_config
        if target.default_config and target.space.is_valid(target.default_config, target.facts)
        else None
    )
    name = strategy
    if name in ("auto", "tpe") and valid is not None and len(valid) <= evaluations:
        name = "exhaustive"
    ctx = StrategyContext(
        target.space,
        target.facts,
        seed,
        valid,
        shape=dict(target.shape),
        shape_params=tuple(target.shape),
        default=default,
        history=list(history) if name in ("auto", "exhaustive") else [],
        features=features,
        budget=evaluations,
    )
    st = make_strategy(name, ctx)
    depth = min(depth, getattr(st, "max_in_flight", None) or depth)
    first = [default] if default else []
    known: dict[str, TrialResult] = {}
    in_flight: deque[tuple[str, dict[str, Any]]] = deque()
    pending: set[str] = set()
    evaluated = 0
    best = math.inf
    run = Run(label(target), strategy, seed, [], target.best_s, 0.0)
    stale = 0
    rng = random.Random(seed)
    while True:
        while len(in_flight) < depth and evaluated < evaluations and not (st.exhausted and not first):
            want = depth - len(in_flight)
            batch, first = first[:want], first[want:]
            if len(batch) < want:
                batch += st.propose(want - len(batch))
            if not batch:
                break
            fresh = 0
            for config in batch:
                run.proposals += 1
                h = config_hash(config)
                if h in known or h in pending:
                    run.repeats += 1
                    st.tell(config, known.get(h))
                elif evaluated >= evaluations:
                    st.tell(config, None)
                elif target.space.check(config, target.facts):
                    run.invalid += 1
                    res = TrialResult(TrialStatus.INVALID, dict(config))
                    known[h] = res
                    st.tell(config, res)
                else:
                    pending.add(h)
                    in_flight.append((h, config))
                    evaluated += 1
                    fresh += 1
            stale = 0 if fresh else stale + len(batch)
            if stale >= MAX_STALE:
                # as the search loop does: the strategy only repeats itself, so an
                # unseen valid config is evaluated next
                unseen = [
                    c for c in valid or () if config_hash(c) not in known and config_hash(c) not in pending
                ]
                if not unseen:
                    break
                first.append(rng.choice(unseen))
                stale = 0
        if not in_flight:
            break
        h, config = in_flight.popleft()
        pending.discard(h)
        res = target.answer(config)
        known[h] = res
        st.tell(config, res)
        if res.timed:
            best = min(best, res.time_s or math.inf)
        run.best_after.append(best)
    run.wall_s = time.perf_counter() - t0
    return run


def replay(
    targets: Sequence[LandscapeFile],
    strategies: Sequence[str],
    evaluations: int,
    seeds: Sequence[int],
    *,
    transfer: bool = True,
    preload: Sequence[LandscapeFile] = (),
    features_for: Callable[[LandscapeFile], FeatureFn | None] | None = None,
    depth: int = DEFAULT_DEPTH,
    progress: Callable[[Run], None] | None = None,
) -> list[Run]:
    """Every (target, strategy, seed); with ``transfer``, the other targets of the same kernel are in the
    store (leave-one-shape-out, any space), plus ``preload`` (never the target's own shape)."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, target in enumerate(targets):
            others = [
                t
                for t in [*(targets if transfer else ()), *preload]
                if t is not target and t.kernel == target.kernel and t.shape_key != target.shape_key
            ]
            history: list[HistoryPoint] = []
            if others:
                store = history_store(others, f"sqlite:///{Path(tmp) / f'history{i}.db'}")
                env = {
                    "gpu_name": target.device_name,
                    "torch": "replay",
                    "triton": "replay",
                    "driver": "replay",
                    "cuda": "replay",
                }
                history = load_history(store.history, target.kernel, target.space, env)
                store.close()
            features = features_for(target) if features_for else None
            for strategy in strategies:
                for seed in seeds:
                    run = replay_one(target, strategy, evaluations, seed, history, features, depth)
                    runs.append(run)
                    if progress:
                        progress(run)
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
def kernel_features(kernel_path: str) -> Iterator[Callable[[LandscapeFile], FeatureFn | None]]:
    """The kernel file's ``features`` hook, computed in a worker process (as in a search: this process
    never imports kernel files), with each landscape's device facts; the worker lives for the block."""
    from autotune.engine import Worker

    with Worker(kernel_path, "cpu") as worker:
        worker.start()

        def for_target(target: LandscapeFile) -> FeatureFn | None:
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
    return lines
