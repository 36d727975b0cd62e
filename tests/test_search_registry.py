"""The strategy registry: names, aliases, capabilities declared in ``StrategyInfo`` (the search loop reads
them, never a name) and third-party strategies registered through the ``autotune.strategies`` entry-point
group of an installed distribution."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from autotune import search
from autotune.engine import SerialPipeline, SimulatedBackend
from autotune.errors import SettingsError
from autotune.search import StrategyInfo, canonical_name, strategy_info, strategy_names
from autotune.search.enumeration import EnumerationStrategy
from autotune.settings import SearchSettings
from autotune.space.space import Space
from autotune.store import Store
from autotune.tuning.tuner import Tuner
from tests.test_engine import SPACE, sim_info, synthetic

FACTS = {"cc": 0}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test (strategies registered in it are forgotten)."""
    monkeypatch.setattr(search, "_REGISTRY", dict(search._REGISTRY))
    monkeypatch.setattr(search, "_ALIASES", dict(search._ALIASES))
    return search


class Recording(EnumerationStrategy):
    """The valid configs in reverse order, noting how many it was asked for at once."""

    asked: list[int] = []

    def __init__(self, ctx):
        super().__init__(ctx, list(reversed(ctx.valid or [])))

    def propose(self, n):
        Recording.asked.append(n)
        return super().propose(n)


def simulated_search(url: str, strategy: str, trials: int):
    space = Space.from_dict(SPACE)
    info = sim_info(space, {"A": 1, "B": 1, "C": "x"})
    settings = SearchSettings(
        devices="sim:0", strategy=strategy, trials=trials, seed=0, compile_workers=0, retime_top=0
    )
    store = Store(url)
    store.schema.upgrade()
    events = []
    tuner = Tuner(
        "sim",
        store,
        settings,
        on_event=events.append,
        backend=SimulatedBackend(info, synthetic),
        pipeline=lambda backend, workers: SerialPipeline(backend, [], depth=8),
    )
    with tuner:
        tuner.start()
        report = tuner.search_shape({"N": 8})
    store.close()
    return report, [e.result.config for e in events]


def test_names_aliases_and_unknown_names():
    assert {"auto", "tpe", "random", "exhaustive", "grid"} <= set(strategy_names())
    assert canonical_name("GRID") == "exhaustive" and strategy_info("grid").name == "exhaustive"
    with pytest.raises(SettingsError, match="unknown strategy 'nope': choose one of .*auto.*tpe"):
        canonical_name("nope")


def test_exhaustive_when_small_comes_from_the_info_and_batches_fill_the_pipeline(registry, sqlite_url):
    """Two new strategies, alike but for their info: the one declaring ``exhaustive_when_small`` gives a
    space that fits the budget to the exhaustive strategy; the other searches it itself, asked for as many
    proposals as the pipeline holds (its depth, 8 here), whatever the budget."""
    valid = len(list(Space.from_dict(SPACE).enumerate(FACTS)))
    registry.register("modelled", StrategyInfo("modelled", Recording, exhaustive_when_small=True))
    registry.register("batched", StrategyInfo("batched", Recording))

    report, _ = simulated_search(sqlite_url, "modelled", valid)
    assert report.strategy == "exhaustive" and report.exhaustive

    Recording.asked = []
    report, configs = simulated_search(sqlite_url.replace(".db", "2.db"), "batched", valid)
    assert report.strategy == "batched" and not report.exhaustive
    # the default runs first, alone: the strategy is asked for a full pipeline once it returned
    assert report.evaluations == valid and Recording.asked[0] == min(8, valid)
    # its own order: the default first, then the valid configs from the last
    assert configs[1:3] == list(reversed(list(Space.from_dict(SPACE).enumerate(FACTS))))[:2]


DEMO = '''
from autotune.search.base import StrategyInfo
from autotune.search.enumeration import EnumerationStrategy


def make(ctx):
    """Every valid config, the last listed first."""
    return EnumerationStrategy(ctx, list(reversed(ctx.valid)))


INFO = StrategyInfo("backwards", make, needs_valid_list=True, summary="a third-party strategy")
'''


def test_a_strategy_installed_by_another_package_registers_through_its_entry_point(
    registry, tmp_path, monkeypatch, request, sqlite_url
):
    """A distribution (a dist-info directory on sys.path, as pip installs one) declares a strategy in the
    ``autotune.strategies`` group: its name is known without importing it, and the search imports and
    runs it when asked for."""
    dist = tmp_path / "autotune_backwards-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: autotune-backwards\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[autotune.strategies]\nbackwards = autotune_backwards:INFO\n")
    (tmp_path / "autotune_backwards.py").write_text(textwrap.dedent(DEMO))
    monkeypatch.syspath_prepend(str(tmp_path))
    request.addfinalizer(lambda: sys.modules.pop("autotune_backwards", None))

    assert "backwards" in strategy_names()
    assert "autotune_backwards" not in sys.modules  # listed from its metadata, not imported
    report, configs = simulated_search(sqlite_url, "backwards", 5)
    assert "autotune_backwards" in sys.modules
    assert report.strategy == "backwards" and strategy_info("backwards").summary == "a third-party strategy"
    valid = list(Space.from_dict(SPACE).enumerate(FACTS))
    assert configs == [{"A": 1, "B": 1, "C": "x"}, *list(reversed(valid))[:4]]


def test_exhaustive_keeps_the_compile_rate_even_and_ends_on_short_compiles():
    """Without a model order, the exhaustive strategy shuffles the configs (by its seed) and leaves those it
    predicts fastest to compile (small tiles per warp) for last: no run of slow tiles keeps the GPU waiting,
    and no long compile runs alone at the end. Checked on real compile times: the 848 sm_90 compiles of
    data/probes/smem_probe_sm90.json."""
    import json

    from autotune.search.base import StrategyContext
    from autotune.search.enumeration import make

    probe = json.loads((ROOT / "data" / "probes" / "smem_probe_sm90.json").read_text())
    params = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "USE_TMA", "SPLIT_K")
    rows = [r for r in probe["rows"] if r.get("ok") and r.get("compile_s")]
    configs = [{p: r[p] for p in params} | {"row": i} for i, r in enumerate(rows)]

    def order(seed):
        ctx = StrategyContext(Space.from_dict(SPACE), FACTS, seed, configs, budget=len(configs))
        return make(ctx).propose(len(configs))

    first = order(0)
    assert sorted(c["row"] for c in first) == list(range(len(rows)))  # every config, once
    assert order(0) == first and order(1) != first  # the seed decides
    times = [rows[c["row"]]["compile_s"] for c in first]
    tail = len(times) // 20
    mean = sum(times) / len(times)
    assert sum(times[-tail:]) / tail < 0.6 * mean  # ends on short compiles

    def worst_window(ts, width=30):  # two compile pools' worth of configs in a row
        return max(sum(ts[i : i + width]) for i in range(len(ts) - width))

    probe_order = [r["compile_s"] for r in rows]  # as listed: tiles in runs
    assert worst_window(times) < 0.8 * worst_window(probe_order)
    # a space without tile parameters is only shuffled
    plain = [{"A": a} for a in range(10)]
    got = make(StrategyContext(Space.from_dict(SPACE), FACTS, 0, plain)).propose(10)
    assert sorted(c["A"] for c in got) == list(range(10))
