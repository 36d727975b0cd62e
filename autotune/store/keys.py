"""The keys role. Key identity: what a best config is valid for (kernel source x space x shape x dtypes x
environment), and the Optuna study name derived from it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from autotune.env import ENV_KEY_FIELDS
from autotune.env import env_hash as compute_env_hash
from autotune.store.database import Database
from autotune.store.models import EnvironmentRow, KernelRow, ShapeRow, TuningKeyRow
from autotune.store.rows import dtypes_key, jsonable


@dataclass(frozen=True)
class KeyInfo:
    """A tuning key: what a best config is valid for, and the Optuna study that searches it."""

    id: int
    study_name: str
    kernel_id: int
    shape_id: int
    environment_id: int
    kernel_name: str
    source_hash: str
    space_hash: str
    shape_key: str
    dtypes_key: str
    env_hash: str


def env_columns(env: Mapping[str, Any]) -> dict[str, Any]:
    """The environments row of an ``autotune.env.environment()`` dict: its identity fields."""
    cols: dict[str, Any] = {f: str(env.get(f, "")) for f in ENV_KEY_FIELDS}
    cols["sm_count"] = int(env.get("sm_count") or 0)
    return cols


def study_name(
    kernel_name: str, shape_key: str, dtypes_key: str, env_hash: str, space_hash: str, source_hash: str
) -> str:
    """Deterministic Optuna study name of a key: every process tuning the same key joins one study."""
    dh = hashlib.sha256(dtypes_key.encode()).hexdigest()[:8]
    return f"{kernel_name}|{shape_key}|{dh}|{env_hash[:12]}|{space_hash[:12]}|{source_hash[:12]}"


def get_or_create(s: Session, model: type[Any], ident: dict[str, Any], extra: dict[str, Any]) -> Any:
    stmt = select(model).filter_by(**ident)
    row = s.scalars(stmt).first()
    if row is not None:
        return row
    try:
        with s.begin_nested():  # a savepoint: losing the race must not abort the whole transaction
            row = model(**ident, **extra)
            s.add(row)
        return row
    except IntegrityError:
        # another process inserted the same row between our select and insert: use theirs
        return s.scalars(stmt).one()


class Keys:
    """The tuning keys of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def ensure(
        self,
        kernel_name: str,
        source_hash: str,
        space_hash: str,
        space_def: Mapping[str, Any],
        shape: Mapping[str, int],
        shape_key: str,
        dtypes: Mapping[str, str],
        env: Mapping[str, Any],
    ) -> KeyInfo:
        """Get or create the kernel, environment, shape and tuning-key rows of one key."""
        dkey = dtypes_key(dtypes)
        ehash = compute_env_hash(env)
        with self.db.session(write=True) as s:
            kernel = get_or_create(s, KernelRow, {"name": kernel_name, "source_hash": source_hash}, {})
            env_row = get_or_create(s, EnvironmentRow, {"env_hash": ehash}, env_columns(env))
            shape_row = get_or_create(
                s,
                ShapeRow,
                {"kernel_name": kernel_name, "shape_key": shape_key, "dtypes_key": dkey},
                {"dims": {str(k): int(v) for k, v in shape.items()}, "dtypes": json.loads(dkey)},
            )
            key = get_or_create(
                s,
                TuningKeyRow,
                {
                    "kernel_id": kernel.id,
                    "space_hash": space_hash,
                    "shape_id": shape_row.id,
                    "environment_id": env_row.id,
                },
                {
                    "space": jsonable(space_def),
                    "study_name": study_name(kernel_name, shape_key, dkey, ehash, space_hash, source_hash),
                },
            )
            return KeyInfo(
                id=key.id,
                study_name=key.study_name,
                kernel_id=kernel.id,
                shape_id=shape_row.id,
                environment_id=env_row.id,
                kernel_name=kernel_name,
                source_hash=source_hash,
                space_hash=space_hash,
                shape_key=shape_key,
                dtypes_key=dkey,
                env_hash=ehash,
            )

    def space(self, key_id: int) -> dict[str, Any]:
        """The search space a key was tuned over (as stored with the key)."""
        with self.db.session() as s:
            key = s.get(TuningKeyRow, key_id)
            return dict(key.space) if key is not None else {}
