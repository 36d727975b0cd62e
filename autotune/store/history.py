"""Read-only views across tuning keys for the nightly planner and the report: every key of a kernel with
its environment, space and source, how many configs it measured and its best row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from autotune.store.database import Database
from autotune.store.models import BestConfigRow, EnvironmentRow, KernelRow, ShapeRow, TrialRow, TuningKeyRow
from autotune.store.rows import from_db_time
from autotune.trial import KIND_SEARCH, TrialStatus


class HistoryQueries(Database):
    def key_states(self, kernel_name: str | None = None) -> list[dict[str, Any]]:
        """One dict per tuning key (oldest first): identity, environment, measured configs (distinct configs
        a search evaluated, status not invalid), trial counts by status, the best row's config/time/trial and the key's creation time."""
        stmt = (
            select(TuningKeyRow, KernelRow, ShapeRow, EnvironmentRow, BestConfigRow)
            .join(KernelRow, KernelRow.id == TuningKeyRow.kernel_id)
            .join(ShapeRow, ShapeRow.id == TuningKeyRow.shape_id)
            .join(EnvironmentRow, EnvironmentRow.id == TuningKeyRow.environment_id)
            .outerjoin(BestConfigRow, BestConfigRow.key_id == TuningKeyRow.id)
            .order_by(TuningKeyRow.id)
        )
        if kernel_name is not None:
            stmt = stmt.where(KernelRow.name == kernel_name)
        counts_stmt = select(TrialRow.key_id, TrialRow.status, func.count(TrialRow.id)).group_by(
            TrialRow.key_id, TrialRow.status
        )
        # distinct configs the searches evaluated (re-timed finalists are measured again, not new configs)
        measured_stmt = (
            select(TrialRow.key_id, func.count(func.distinct(TrialRow.config_hash)))
            .where(TrialRow.status != TrialStatus.INVALID.value, TrialRow.kind == KIND_SEARCH)
            .group_by(TrialRow.key_id)
        )
        with self.session() as s:
            counts: dict[int, dict[str, int]] = {}
            for key_id, status, n in s.execute(counts_stmt):
                counts.setdefault(key_id, {})[status] = int(n)
            measured = {key_id: int(n) for key_id, n in s.execute(measured_stmt)}
            out = []
            for key, kernel, shape, env, best in s.execute(stmt):
                c = counts.get(key.id, {})
                out.append(
                    {
                        "key_id": key.id,
                        "kernel": kernel.name,
                        "source_hash": kernel.source_hash,
                        "space_hash": key.space_hash,
                        "shape_key": shape.shape_key,
                        "dims": {str(k): int(v) for k, v in shape.dims.items()},
                        "dtypes_key": shape.dtypes_key,
                        "env_hash": env.env_hash,
                        "device_name": env.gpu_name,
                        "cc": env.cc,
                        "torch": env.torch,
                        "triton": env.triton,
                        "driver": env.driver,
                        "cuda": env.cuda,
                        "measured": measured.get(key.id, 0),
                        "counts": c,
                        "best_config": dict(best.config) if best else None,
                        "best_time_s": best.time_s if best else None,
                        "best_trial_id": best.trial_id if best else None,
                        "created_at": from_db_time(key.created_at).isoformat(),
                    }
                )
            return out
