"""What a search can learn from other keys: every ok measurement of the same kernel (by name) under another
shape, device, software version or search space, weighted by how far its environment is from this one (the
``auto`` strategy's training data). Another space's configs count when they only set this space's
parameters (a widened or narrowed space: editing a space must not throw the kernel's history away)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import select

from autotune.store.database import Database
from autotune.store.models import EnvironmentRow, KernelRow, ShapeRow, TrialRow, TuningKeyRow
from autotune.trial import KIND_SEARCH, TrialStatus

#: weights of a measurement by its environment against the search's: same GPU model and software, same
#: GPU model with another torch/Triton/driver, another GPU model
SAME_ENV_WEIGHT = 1.0
SAME_GPU_WEIGHT = 0.5
OTHER_GPU_WEIGHT = 0.2
#: a measurement under another search space of the kernel (its values may lie outside this space's, and
#: the space may belong to another kernel version) counts this much on top of its environment's weight
OTHER_SPACE_WEIGHT = 0.2


def transfer_history(
    db: Database,
    kernel_name: str,
    space_hash: str,
    env: dict[str, Any],
    exclude_key_id: int | None = None,
    params: Collection[str] | None = None,
) -> list[tuple[int, dict[str, int], dict[str, Any], float, float, str]]:
    """(key id, dims, config, time_s, weight, GPU name) of every ok+measured search trial of ``kernel_name`` under
    other keys than ``exclude_key_id``, any kernel source version: this space's, and, given this
    space's parameter names ``params``, other spaces' whose config sets no other parameter. The key id
    groups a shape's measurements on one device and space (times compare only within a group); the GPU
    name lets the model read the device's facts (``devices.device_features``)."""
    stmt = (
        select(
            TuningKeyRow.id,
            TuningKeyRow.space_hash,
            ShapeRow.dims,
            TrialRow.config,
            TrialRow.time_s,
            EnvironmentRow,
        )
        .join(TuningKeyRow, TuningKeyRow.id == TrialRow.key_id)
        .join(KernelRow, KernelRow.id == TuningKeyRow.kernel_id)
        .join(ShapeRow, ShapeRow.id == TuningKeyRow.shape_id)
        .join(EnvironmentRow, EnvironmentRow.id == TuningKeyRow.environment_id)
        .where(
            KernelRow.name == kernel_name,
            TrialRow.status == TrialStatus.OK.value,
            TrialRow.measured.is_(True),
            TrialRow.time_s.is_not(None),
            TrialRow.kind == KIND_SEARCH,
        )
    )
    if params is None:
        stmt = stmt.where(TuningKeyRow.space_hash == space_hash)
    if exclude_key_id is not None:
        stmt = stmt.where(TrialRow.key_id != exclude_key_id)
    names = set(params or ())
    out = []
    with db.session() as s:
        for key_id, key_space, dims, config, time_s, e in s.execute(stmt):
            weight = _weight(e, env)
            if key_space != space_hash:
                if not set(config) <= names:
                    continue
                weight *= OTHER_SPACE_WEIGHT
            out.append((key_id, dict(dims), dict(config), float(time_s), weight, str(e.gpu_name)))
    return out


def _weight(row: EnvironmentRow, env: dict[str, Any]) -> float:
    if row.gpu_name != env.get("gpu_name"):
        return OTHER_GPU_WEIGHT
    same = all(str(getattr(row, k)) == str(env.get(k)) for k in ("torch", "triton", "driver", "cuda"))
    return SAME_ENV_WEIGHT if same else SAME_GPU_WEIGHT
