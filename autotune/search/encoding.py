"""Configs as numbers: how the samplers see a space's parameters.

- A parameter whose choices are all numbers (not bools), three or more of them, is **ordinal**: Optuna sees
  an ``IntDistribution``/``FloatDistribution`` over their range, on a log scale when the choices are
  positive and grow geometrically (``pow2``: 16 < 32 < 64); a sampled value is snapped to the nearest choice
  (on the same scale). Two choices or other types stay categorical. This is the database study's view and
  the random sampler's; TPE proposes over categories (``optuna_strategy``: its kernels spread over numeric
  neighbours that GPU landscapes often punish).
- ``Encoder`` turns configs (and shapes) into feature rows for the ``auto`` strategy's models: an ordinal
  parameter is one column (log2 of the value on a log scale), a bool 0/1, a categorical one column per
  choice; an inactive parameter is NaN (the tree model handles it; the GP sees a constant)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.space.space import Param


@dataclass(frozen=True)
class Ordinal:
    """An ordered numeric parameter: its sorted choices and whether they are spaced geometrically."""

    choices: tuple[float, ...]
    log: bool
    integer: bool

    def position(self, value: float) -> float:
        return math.log2(value) if self.log else float(value)

    def snap(self, value: float) -> Any:
        """The choice nearest to ``value`` (on the log scale when ``log``)."""
        x = self.position(value) if (not self.log or value > 0) else -math.inf
        best = min(self.choices, key=lambda c: abs(self.position(c) - x))
        return int(best) if self.integer else best


def ordinal(p: Param) -> Ordinal | None:
    """The ordinal view of ``p``, or None when it is categorical."""
    cs = p.choices
    if len(cs) < 3 or not all(isinstance(c, int | float) and not isinstance(c, bool) for c in cs):
        return None
    srt = tuple(sorted(cs))
    integer = all(isinstance(c, int) for c in cs)
    log = srt[0] > 0 and _geometric(srt)
    return Ordinal(srt, log, integer)


def _geometric(xs: Sequence[float]) -> bool:
    """Whether consecutive ratios are (nearly) constant and > 1, e.g. powers of two."""
    ratios = [b / a for a, b in zip(xs, xs[1:], strict=False)]
    return min(ratios) > 1.0 and max(ratios) / min(ratios) < 1.5 and max(ratios) >= 1.5


class Encoder:
    """Feature rows for configs of one space: parameter columns, then the shape's log2 dims, then the
    device's facts (``devices.device_features``: results on other GPUs inform by how alike they are), then
    the kernel's own features (``features(config, shape, facts)``), in a fixed column order."""

    def __init__(
        self,
        params: Sequence[Param],
        shape_params: Sequence[str] = (),
        feature_names: Sequence[str] = (),
        device_names: Sequence[str] = (),
    ):
        self.params = tuple(params)
        self.shape_params = tuple(shape_params)
        self.feature_names = tuple(feature_names)
        self.device_names = tuple(device_names)
        self._cols: list[tuple[str, Any]] = []
        for p in self.params:
            o = ordinal(p)
            if o is not None:
                self._cols.append((p.name, o))
            elif len(p.choices) <= 2 and all(isinstance(c, bool) for c in p.choices):
                self._cols.append((p.name, "bool"))
            elif all(isinstance(c, int | float) and not isinstance(c, bool) for c in p.choices):
                self._cols.append((p.name, "number"))
            else:
                for c in p.choices:
                    self._cols.append((p.name, ("is", c)))
        self.n_param_cols = len(self._cols)

    @property
    def width(self) -> int:
        return self.n_param_cols + len(self.shape_params) + len(self.device_names) + len(self.feature_names)

    @property
    def context_cols(self) -> range:
        """The shape's and the device's columns: constant within one search (its GP leaves them out)."""
        start = self.n_param_cols
        return range(start, start + len(self.shape_params) + len(self.device_names))

    def row(
        self,
        config: Mapping[str, Any],
        shape: Mapping[str, int] | None = None,
        feats: Mapping[str, float] | None = None,
        device: Mapping[str, float] | None = None,
    ) -> list[float]:
        out: list[float] = []
        for name, how in self._cols:
            if name not in config:
                out.append(math.nan)
                continue
            v = config[name]
            if isinstance(how, Ordinal):
                out.append(how.position(v) if (not how.log or v > 0) else math.nan)
            elif how == "bool":
                out.append(float(bool(v)))
            elif how == "number":
                out.append(float(v))
            else:
                out.append(1.0 if v == how[1] and type(v) is type(how[1]) else 0.0)
        for d in self.shape_params:
            x = (shape or {}).get(d)
            out.append(math.log2(x) if x and x > 0 else math.nan)
        for k in self.device_names:
            out.append(float((device or {}).get(k, math.nan)))
        for f in self.feature_names:
            x = (feats or {}).get(f)
            out.append(float(x) if isinstance(x, int | float) and math.isfinite(x) else math.nan)
        return out
