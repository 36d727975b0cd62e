"""Replays (autotune/tuning/replay.py): the seed of a run reaches every strategy, one seed per (seed,
strategy), so runs over seeds are samples and two strategies never share their random draws."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autotune.tuning.landscape import load_landscape
from autotune.tuning.replay import replay_one, strategy_seed

LANDSCAPE = Path(__file__).resolve().parents[1] / "bench" / "landscapes" / "gemm_fp8_128x24576x1536.json"


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
