"""The best-config record: what the store keeps per tuning key, what `autotune export` writes and what
the runtime lookup reads. Plain data, importable without SQLAlchemy."""

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
