"""Is a re-measured best config slower than before? A regression is called only when the slowdown is both
larger than a threshold (asv's factor) AND significant under a rank test over the repeats (asv: Mann-Whitney
U), and it is *confirmed* only when the previous verification of the same config said so too (PyTorch HUD:
two consecutive violations). Pure functions: no store, no devices.

The baseline is always a distribution, never one stored sample (a lucky or unlucky one made every later
night a regression): the samples of the first verification of the config that was not a regression
(measured the same way), else the best's and the default's paired re-timing rounds at tuning time; a best
stored without them gets its baseline measured by its first verification (``verify.BASELINE_NOTE``).
``judge`` still accepts one number (a one-sample signed-rank test) for callers that have nothing else."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: verdicts stored in ``autotune_verifications.status``; INCONCLUSIVE: no verdict is possible (fewer than 3
#: usable rounds, or samples in different clock bands), never a regression
OK, REGRESSION, CONFIRMED, IMPROVED, FAILED = "ok", "regression", "confirmed", "improved", "failed"
INCONCLUSIVE = "inconclusive"
REGRESSED = (REGRESSION, CONFIRMED)

#: samples are in one clock band while their SM clocks (the lowest reading of each measurement against the
#: highest of any) differ by at most this share: a kernel's time scales with its clock, so two bands
#: further apart than the regression threshold cannot be compared (H200 boost: 1980 MHz; a power-capped
#: FP8 GEMM runs some 10 % lower)
CLOCK_BAND = 0.10


def clock_range(results: Iterable[Any]) -> tuple[float | None, float | None]:
    """(lowest, highest) SM clock over measurements with clocks (``TrialResult.clock_*``); Nones without."""
    los = [r.clock_min_mhz for r in results if r is not None and r.clock_min_mhz]
    his = [r.clock_max_mhz for r in results if r is not None and r.clock_max_mhz]
    return (min(los) if los else None, max(his) if his else None)


def band_split(results: Iterable[Any], band: float = CLOCK_BAND) -> str | None:
    """Why ``results`` cannot be compared (their clocks lie in different bands), or None when they can
    (one band, or no clocks recorded)."""
    lo, hi = clock_range(results)
    if lo is None or hi is None or hi <= 0 or (hi - lo) / hi <= band:
        return None
    return f"samples in different clock bands ({lo:.0f}-{hi:.0f} MHz, more than {band:.0%} apart)"


@dataclass(frozen=True)
class Verdict:
    status: str
    ratio: float
    p_value: float
    baseline_s: float
    median_s: float


def judge(
    samples: list[float],
    baseline: list[float] | float,
    *,
    threshold: float,
    alpha: float,
    previous: str | None = None,
) -> Verdict:
    """The verdict on ``samples`` (per-repeat times) against ``baseline`` (samples, or one stored time).
    ``previous``: the status of the config's last verification (a regression twice in a row is confirmed)."""
    from scipy import stats

    xs = [float(x) for x in samples if x is not None and math.isfinite(x)]
    if len(xs) < 3:
        raise ValueError(f"need at least 3 timed repeats, got {len(xs)}")
    median = statistics.median(xs)
    if isinstance(baseline, (int, float)):
        base = float(baseline)
        diffs = [x - base for x in xs]
        if all(d == 0 for d in diffs):
            p_slower = p_faster = 1.0
        else:
            p_slower = float(stats.wilcoxon(diffs, alternative="greater", zero_method="zsplit").pvalue)
            p_faster = float(stats.wilcoxon(diffs, alternative="less", zero_method="zsplit").pvalue)
    else:
        ys = [float(y) for y in baseline]
        base = statistics.median(ys)
        p_slower = float(stats.mannwhitneyu(xs, ys, alternative="greater").pvalue)
        p_faster = float(stats.mannwhitneyu(xs, ys, alternative="less").pvalue)
    ratio = median / base if base > 0 else math.inf
    if ratio > 1.0 + threshold and p_slower < alpha:
        status = CONFIRMED if previous in REGRESSED else REGRESSION
        return Verdict(status, ratio, p_slower, base, median)
    if ratio < 1.0 - threshold and p_faster < alpha:
        return Verdict(IMPROVED, ratio, p_faster, base, median)
    return Verdict(OK, ratio, p_slower, base, median)
