"""Is a re-measured best config slower than before? A regression is called only when the slowdown is both
larger than a threshold (asv's factor) AND significant under a rank test over the repeats (asv: Mann-Whitney
U), and it is *confirmed* only when the previous verification of the same config said so too (PyTorch HUD:
two consecutive violations). Pure functions: no store, no devices.

The baseline is the samples of the first verification of the config that was not a regression (measured
the same way, so a lucky stored trial does not haunt every later night); before there is one, the stored
trial's single time, with a one-sample signed-rank test of the repeats against it."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

#: verdicts stored in ``autotune_verifications.status``
OK, REGRESSION, CONFIRMED, IMPROVED, FAILED = "ok", "regression", "confirmed", "improved", "failed"
REGRESSED = (REGRESSION, CONFIRMED)


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
