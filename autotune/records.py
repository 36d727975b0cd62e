"""The records the store hands out, as plain data importable without SQLAlchemy: the best config of a
tuning key (what `autotune export` writes and the runtime lookup reads) and a key's state (what
`autotune show`, the nightly planner, the report and the exports read)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

#: the ``format`` field of an exported file, and its version (bump on an incompatible change)
EXPORT_FORMAT = "autotune-best-configs"
EXPORT_VERSION = 1


@dataclass(frozen=True)
class BestRecord:
    kernel_name: str
    shape_key: str
    dims: dict[str, int]
    dtypes: dict[str, str]
    device_name: str
    cc: str
    env_hash: str
    torch: str
    triton: str
    source_hash: str
    space_hash: str
    config: dict[str, Any]
    time_s: float
    tflops: float | None
    updated_at: datetime
    key_id: int
    trial_id: int
    #: measurements behind time_s (their median) and their spread, (max - min) / median; a re-timed
    #: finalist has several. Optional: exports of version 1 written before they existed lack them.
    samples: int | None = None
    spread: float | None = None
    #: a 95 % bootstrap interval of the median time (None for one sample)
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    #: default config time / this time: the geometric mean of ratios of samples paired round by round
    #: (interleaved re-timings), its 95 % paired-t interval and the number of pairs; None without pairs
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    pairs: int | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["updated_at"] = self.updated_at.isoformat()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BestRecord:
        names = {f.name for f in fields(cls)}
        optional = {f.name for f in fields(cls) if f.default is None}
        missing = names - set(d) - optional
        if missing:
            raise ValueError(f"record lacks {', '.join(sorted(missing))}")
        values = {k: d[k] for k in names if k in d}
        values["updated_at"] = datetime.fromisoformat(d["updated_at"])
        values["dims"] = {str(k): int(v) for k, v in d["dims"].items()}
        return cls(**values)


@dataclass(frozen=True)
class KeyState:
    """One tuning key as the readers see it: its identity and environment, what was measured under it and its
    best row (``best_*``: None while no config ran ok). The store derives it from the columns of the same
    names (``autotune.store.rows.key_state``): a new field here needs only a column of that name."""

    key_id: int
    kernel_name: str
    source_hash: str
    space_hash: str
    study_name: str
    shape_key: str
    dims: dict[str, int]
    dtypes_key: str
    dtypes: dict[str, str]
    env_hash: str
    device_name: str
    cc: str
    torch: str
    triton: str
    driver: str
    cuda: str
    created_at: datetime
    #: trials stored under the key by status (finalists' re-timings included; statuses with none absent)
    counts: dict[str, int]
    #: distinct configs a search evaluated (status not invalid): what the planner compares to a budget
    measured: int
    #: claims some process holds right now (``autotune show``'s "running")
    running: int
    best_config: dict[str, Any] | None
    best_time_s: float | None
    best_tflops: float | None
    best_trial_id: int | None
    #: the best row's samples, the median's 95 % interval and the paired speed-up over the default with
    #: its interval and pairs (``BestRecord``); None on rows stored before they existed
    best_samples: int | None = None
    best_ci_low_s: float | None = None
    best_ci_high_s: float | None = None
    best_speedup: float | None = None
    best_speedup_low: float | None = None
    best_speedup_high: float | None = None
    best_pairs: int | None = None

    @property
    def trials(self) -> int:
        """Every trial stored under the key."""
        return sum(self.counts.values())
