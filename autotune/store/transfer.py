"""What a search can learn from other keys: every ok measurement of the same kernel (by name) and search
space under another shape, device or software version, weighted by how far its environment is from
this one (the ``auto`` strategy's training data)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from ..trial import KIND_SEARCH, TrialStatus
from .database import Database
from .models import EnvironmentRow, KernelRow, ShapeRow, TrialRow, TuningKeyRow

#: weights of a measurement by its environment against the search's: same GPU model and software, same
#: GPU model with another torch/Triton/driver, another GPU model
SAME_ENV_WEIGHT = 1.0
SAME_GPU_WEIGHT = 0.5
OTHER_GPU_WEIGHT = 0.2


class TransferQueries(Database):
    def transfer_history(
        self, kernel_name: str, space_hash: str, env: dict[str, Any], exclude_key_id: int | None = None
    ) -> list[tuple[dict[str, int], dict[str, Any], float, float]]:
        """(dims, config, time_s, weight) of every ok+measured search trial of ``kernel_name`` with this
        space under other keys than ``exclude_key_id``, any kernel source version."""
        stmt = (
            select(ShapeRow.dims, TrialRow.config, TrialRow.time_s, EnvironmentRow)
            .join(TuningKeyRow, TuningKeyRow.id == TrialRow.key_id)
            .join(KernelRow, KernelRow.id == TuningKeyRow.kernel_id)
            .join(ShapeRow, ShapeRow.id == TuningKeyRow.shape_id)
            .join(EnvironmentRow, EnvironmentRow.id == TuningKeyRow.environment_id)
            .where(
                KernelRow.name == kernel_name,
                TuningKeyRow.space_hash == space_hash,
                TrialRow.status == TrialStatus.OK.value,
                TrialRow.measured.is_(True),
                TrialRow.time_s.is_not(None),
                TrialRow.kind == KIND_SEARCH,
            )
        )
        if exclude_key_id is not None:
            stmt = stmt.where(TrialRow.key_id != exclude_key_id)
        out = []
        with self.session() as s:
            for dims, config, time_s, e in s.execute(stmt):
                out.append((dict(dims), dict(config), float(time_s), _weight(e, env)))
        return out

    def key_space(self, key_id: int) -> dict[str, Any]:
        """The search space a key was tuned over (as stored with the key)."""
        with self.session() as s:
            key = s.get(TuningKeyRow, key_id)
            return dict(key.space) if key is not None else {}


def _weight(row: EnvironmentRow, env: dict[str, Any]) -> float:
    if row.gpu_name != env.get("gpu_name"):
        return OTHER_GPU_WEIGHT
    same = all(str(getattr(row, k)) == str(env.get(k)) for k in ("torch", "triton", "driver", "cuda"))
    return SAME_ENV_WEIGHT if same else SAME_GPU_WEIGHT
