"""Replays (autotune/tuning/replay.py): the seed of a run reaches every strategy, one seed per (seed,
strategy), so runs over seeds are samples and two strategies never share their random draws; the settings
of the store a search would find: leave-one-device-out, partial histories (``--history-evaluations``),
several ``--preload`` files, and ``NAME@D`` (a strategy's proposals in flight)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.tuning.landscape import load_landscape
from autotune.tuning.replay import (
    _RunStore,
    history_of,
    partial,
    replay,
    replay_one,
    strategy_depth,
    strategy_seed,
)
from tests.test_auto import landscape

LANDSCAPE = Path(__file__).resolve().parents[1] / "data" / "landscapes" / "gemm_fp8_128x24576x1536.json"


@pytest.fixture(scope="module")
def target():
    return load_landscape(LANDSCAPE)


def _configs(target, strategy: str, seed: int) -> list[str]:
    logging.getLogger("autotune").setLevel(logging.WARNING)
    run = replay_one(target, strategy, 10, seed, depth=4)
    assert len(run.configs) == len(run.best_after) == 10
    return run.configs


def test_two_seeds_of_random_give_different_runs_and_one_seed_the_same(target):
    first = _configs(target, "random", 0)
    assert _configs(target, "random", 1) != first
    assert _configs(target, "random", 0) == first  # a run depends on its seed alone


def test_strategies_do_not_share_a_seed(target):
    """TPE starts with random trials: with the random strategy's seed it replayed the same configs."""
    assert _configs(target, "tpe", 0)[1:] != _configs(target, "random", 0)[1:]  # [0]: the default config
    seeds = {strategy_seed(seed, s) for seed in range(5) for s in ("auto", "tpe", "random")}
    assert len(seeds) == 15 and all(0 <= x < 2**32 for x in seeds)


def test_the_seeds_of_auto_give_different_runs(target):
    runs = [_configs(target, "auto", seed) for seed in range(3)]
    assert len({tuple(r) for r in runs}) > 1


def test_history_is_every_other_shape_and_the_targets_shape_on_other_devices():
    target = landscape(16)
    other_gpu = replace(landscape(16), device_name="Other GPU")
    same_again = replace(landscape(16))  # the target's own shape and device, recorded twice
    n8 = landscape(8)
    assert history_of(target, [target, other_gpu, same_again, n8]) == [other_gpu, n8]


def test_a_partial_history_holds_only_what_its_search_measured(tmp_path):
    land = landscape(32)
    runs = _RunStore(str(tmp_path))
    part = partial(land, 7, 0, runs, depth=4)
    runs.store.close()
    timed = [r for r in part.results.values() if r.timed]
    assert 7 <= len(part.results) < len(land.results) and timed  # some of the 7 may fail to compile
    assert set(part.results) <= set(land.results)


def test_history_evaluations_changes_what_the_search_learns_from():
    target = landscape(16)
    others = [landscape(8), landscape(32)]
    full = replay([target], ["auto"], 6, [0], preload=others, depth=4)
    realistic = replay([target], ["auto"], 6, [0], preload=others, depth=4, history_evaluations=5)
    assert full[0].best_after != realistic[0].best_after or full[0].proposals != realistic[0].proposals


def test_strategy_at_depth():
    assert strategy_depth("tpe@1", 19) == ("tpe", 1) and strategy_depth("auto", 19) == ("auto", 19)


def test_replay_cli_preload_takes_several_files_and_strategies_take_a_depth(tmp_path):
    files = {}
    for n in (8, 16, 32):
        p = tmp_path / f"l{n}.json"
        p.write_text(json.dumps(landscape(n).to_json()))
        files[n] = str(p)
    args = ["replay", files[16], "--strategy", "auto,tpe@1", "--trials", "8", "--seeds", "1"]
    r = CliRunner().invoke(
        app, [*args, "--depth", "4", "--history-evaluations", "6", "--preload", files[8], files[32]]
    )
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line.startswith("N=")]
    # both preloaded files are history, not targets: only the target's rows
    assert rows and all(line.startswith("N=16 ") for line in rows)
    assert any(" tpe@1 " in line for line in rows)
    r = CliRunner().invoke(app, ["replay", files[16], "--strategy", "tpe@0"])
    assert r.exit_code == 2 and "NAME@D" in r.output
