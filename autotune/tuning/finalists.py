"""Finalists: the top configs of a shape measured again, interleaved, before a best is declared.

One sample of a ~1 % noisy measurement can crown the wrong config. The top ``--retime-top`` configs are
measured ``--retime-rounds`` more rounds on one device, interleaved (A B C, B C A, ...) so a slow drift of
the device touches them alike; the re-timings are stored as ``retime`` trials, and the best row then keeps
the median and spread of each config's measurements (``Store.refresh_best``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from autotune.trial import KIND_RETIME, TrialResult, config_hash, median_spread

if TYPE_CHECKING:
    from autotune.engine import Evaluator

#: (result, started, finished) of measurements to store
Record = Callable[[list[tuple[TrialResult, datetime | None, datetime | None]]], Any]


@dataclass
class Finalist:
    """A top config measured again, interleaved with the others, before a best is declared."""

    config: dict[str, Any]
    #: the search's one measurement, then the median and (max - min) / median over all of them
    first_s: float
    median_s: float
    spread: float | None
    samples: int


def retime(
    timer: Evaluator,
    shape: dict[str, int],
    top: Sequence[TrialResult],
    *,
    rounds: int,
    deadline: float,
    device: str,
    record: Record,
) -> list[Finalist]:
    """Measure ``top`` (timed results) ``rounds`` more times on ``timer``, interleaved, storing each round's
    timed re-measurements through ``record``; the finalists, fastest median first. ``deadline``
    (``time.monotonic()``) holds between rounds: the rounds done so far count. Each round's samples carry
    one ``retime_round`` tag, so any two finalists' samples pair up round by round (the default's among
    them: a speedup is a ratio of paired samples, ``autotune.stats.paired_ratio``)."""
    samples: dict[str, list[float]] = {config_hash(r.config): [r.time_s or 0.0] for r in top}
    run = uuid.uuid4().hex[:12]
    for rnd in range(rounds):
        if time.monotonic() >= deadline:
            break
        order = [*top[rnd % len(top) :], *top[: rnd % len(top)]]
        tag = f"{run}:{rnd}"
        results = [_measure(timer, r.config, shape, device, tag) for r in order]
        for r, (res, _, _) in zip(order, results, strict=True):
            if res.timed:
                samples[config_hash(r.config)].append(res.time_s or 0.0)
        record([x for x in results if x[0].timed])
    finalists = []
    for r in top:
        times = samples[config_hash(r.config)]
        median, spread = median_spread(times)
        finalists.append(Finalist(dict(r.config), r.time_s or 0.0, median, spread, len(times)))
    return sorted(finalists, key=lambda f: f.median_s)


def _measure(
    timer: Evaluator, config: dict[str, Any], shape: dict[str, int], device: str, tag: str
) -> tuple[TrialResult, datetime, datetime]:
    started = datetime.now(timezone.utc)
    res = timer.evaluate(dict(config), dict(shape))
    res = replace(res, kind=KIND_RETIME, device=res.device or device, retime_round=tag)
    return res, started, datetime.now(timezone.utc)
