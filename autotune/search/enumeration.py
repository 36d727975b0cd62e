"""Exhaustive search: every valid config, budgeted by ``--trials`` like the others. In compile order
(``compile_order``: shuffled, the configs predicted fastest to compile last), or, when the store has other
shapes' measurements and the budget is smaller than the space, in the order the ``auto`` strategy's model
ranks them. Only for spaces small enough to list (the tuner refuses it on larger ones).

Why that order: a whole space keeps the compile pool and the GPU about equally busy (1,176 gemm_fp8 configs
on the H200: ~27 ms of checking and measuring each, 32 s in all, beside ~0.4 s of compiling each over 15
workers), so the search ends near its floor only if both run at their mean rate throughout. In enumeration
order the large, slow tiles come in runs (the GPU waits through them, then the compilers wait on the GPU).
Slowest first (the longest-processing-time rule) starves the GPU at the start: on the H200 it searched in
35.1 s where a shuffled list took 32.0 s, and slow and fast halves interleaved in 43.8 s (a slower run of
the host; issue 20). A shuffle keeps the rate at its mean; the fastest compiles last keep
a long one from running alone at the end (replayed on the 848 measured sm_90 compile times: within 2 % of
the floor in every GPU-to-compiler ratio tried, the best of the orders tried)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

from autotune.search.base import Strategy, StrategyContext, StrategyInfo
from autotune.trial import TrialResult


class EnumerationStrategy:
    def __init__(self, ctx: StrategyContext, order: list[dict[str, Any]] | None = None):
        self._it: Iterator[dict[str, Any]] = iter(order if order is not None else ctx.valid or ())
        self._done = False

    def propose(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            try:
                out.append(next(self._it))
            except StopIteration:
                self._done = True
                break
        return out

    def tell(self, config: dict[str, Any], result: TrialResult | None) -> None:
        pass

    @property
    def exhausted(self) -> bool:
        return self._done


def compile_cost(config: Mapping[str, Any]) -> float:
    """A config's compile time, up to a monotone transform, predicted from its tile: the log of the tile's
    elements per warp (the product of its ``BLOCK_*`` sizes over ``num_warps``), ``num_stages`` a tie-break.
    On the 848 sm_90 compiles of data/probes/smem_probe_sm90.json (0.11-1.4 s) it ranks them with
    Spearman 0.74 (the stage count alone: -0.07). A config with no such parameter costs 0 (order kept)."""
    cost = 0.0
    for name, value in config.items():
        if name.upper().startswith("BLOCK") and isinstance(value, (int, float)) and value > 0:
            cost += math.log2(value)
    warps = config.get("num_warps")
    if cost and isinstance(warps, (int, float)) and warps > 0:
        cost -= math.log2(warps)
    stages = config.get("num_stages")
    return cost + (0.01 * stages if isinstance(stages, (int, float)) else 0.0)


#: share of the configs, the fastest predicted to compile, that end the order
_FAST_TAIL = 0.05


def compile_order(configs: list[dict[str, Any]], seed: int | None = None) -> list[dict[str, Any]]:
    """``configs`` shuffled (by ``seed``), then the fastest-compiling ``_FAST_TAIL`` of them moved to the
    end. A space without tile parameters is only shuffled."""
    order = random.Random(seed or 0).sample(configs, len(configs))
    costs = [compile_cost(c) for c in order]
    if not order or min(costs) == max(costs):
        return order
    k = max(1, int(len(order) * _FAST_TAIL))
    fastest = set(sorted(range(len(order)), key=costs.__getitem__)[:k])
    return [c for i, c in enumerate(order) if i not in fastest] + [
        c for i, c in enumerate(order) if i in fastest
    ]


def make(ctx: StrategyContext) -> Strategy:
    order = None
    if ctx.valid and ctx.history and 0 < ctx.budget < len(ctx.valid):
        # a budgeted exhaustive search takes the configs the model ranks best first
        from autotune.search.auto import model_order

        order = model_order(ctx)
    if order is None and ctx.valid:
        order = compile_order(ctx.valid, ctx.seed)
    return EnumerationStrategy(ctx, order)


INFO = StrategyInfo(
    "exhaustive",
    make,
    wants_history=True,  # the order of a budgeted search
    exhaustive=True,
    needs_valid_list=True,
    summary="every valid config (model-ranked first when the store has other shapes and the budget is short)",
)
