"""The statistics behind every number shown: a median's interval, a ratio of paired samples with its interval.

One sample of a noisy measurement is not a time (a CPU's two samples of one config differ by 2x under load;
a GPU's by a few per cent), so a stored best carries its median and a bootstrap interval of it, and a
speedup is the geometric mean of per-round ratios of samples measured side by side (interleaved rounds:
a slow moment of the machine slows both), with a paired-t interval on their logarithms. scipy is imported
inside the functions: the runtime lookup imports this module's callers' records, never scipy."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: the confidence of every interval shown or stored
CONFIDENCE = 0.95
#: the fewest measurements behind a declared best: its search sample and two interleaved re-timings at least
MIN_BEST_SAMPLES = 3


def median_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """A bootstrap (percentile) interval of the median of ``samples``; None below two samples. Seeded: the
    same samples always give the same interval (a stored row is reproducible)."""
    xs = [float(x) for x in samples if x is not None and math.isfinite(x)]
    if len(xs) < 2:
        return None
    if min(xs) == max(xs):
        return xs[0], xs[0]
    import numpy as np
    from scipy import stats

    res = stats.bootstrap(
        (np.asarray(xs),),
        np.median,
        confidence_level=confidence,
        n_resamples=2000,
        method="percentile",
        random_state=0,
    )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return min(lo, statistics.median(xs)), max(hi, statistics.median(xs))


@dataclass(frozen=True)
class Ratio:
    """``value`` (geometric mean of paired ratios a_i / b_i) and its interval over ``pairs`` pairs; ``low``
    and ``high`` are None below two pairs (no interval: shown as such)."""

    value: float
    low: float | None
    high: float | None
    pairs: int

    @property
    def significant(self) -> bool:
        """The interval lies wholly on one side of 1: the two differ."""
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)

    def text(self) -> str:
        """``2.31x [2.10-2.55]``; an interval across 1 says so ("no clear difference"), never a speedup."""
        if self.low is None or self.high is None:
            return f"{self.value:.2f}x (1 pair: no interval)" if self.pairs == 1 else f"{self.value:.2f}x"
        span = f"{self.value:.2f}x [{self.low:.2f}-{self.high:.2f}]"
        return span if self.significant else f"~1x, no clear difference ({span})"


def paired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Ratio | None:
    """The ratio a / b of samples paired round by round (``a[i]`` and ``b[i]`` measured side by side):
    the geometric mean of a_i / b_i with a paired-t interval on log(a_i) - log(b_i). None without a pair."""
    logs = [
        math.log(x / y)
        for x, y in zip(a, b, strict=True)
        if x is not None and y is not None and x > 0 and y > 0 and math.isfinite(x / y)
    ]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return Ratio(math.exp(mean), None, None, len(logs))
    if max(logs) == min(logs):
        return Ratio(math.exp(mean), math.exp(mean), math.exp(mean), len(logs))
    from scipy import stats

    ci = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return Ratio(math.exp(mean), math.exp(float(ci.low)), math.exp(float(ci.high)), len(logs))


def fmt_interval(low: float | None, high: float | None, fmt: object) -> str:
    """``[low-high]`` through ``fmt`` (a time formatter), or "" without an interval."""
    if low is None or high is None:
        return ""
    assert callable(fmt)
    return f"[{fmt(low)}-{fmt(high)}]"
