"""clocks: trials' SM clock range, throttle reasons and re-takes; verifications' ratios against tuning
time, clock range, throttled count and the ``inconclusive`` verdict

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 14:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | Sequence[str] | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUSES = ('ok', 'regression', 'confirmed', 'improved', 'failed')
_CHECK = 'ck_autotune_verifications_status'


def _status_check(statuses: tuple[str, ...]) -> str:
    return "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")"


def upgrade() -> None:
    with op.batch_alter_table('autotune_trials') as batch:
        batch.add_column(sa.Column('clock_min_mhz', sa.Double(), nullable=True))
        batch.add_column(sa.Column('clock_max_mhz', sa.Double(), nullable=True))
        batch.add_column(sa.Column('clock_limit_mhz', sa.Double(), nullable=True))
        batch.add_column(sa.Column('throttle_reasons', sa.String(), nullable=True))
        batch.add_column(sa.Column('throttled', sa.Boolean(), nullable=True))
        batch.add_column(sa.Column('retakes', sa.Integer(), nullable=True))
    with op.batch_alter_table('autotune_verifications') as batch:
        batch.add_column(sa.Column('ratios', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('tuned_ratio', sa.Double(), nullable=True))
        batch.add_column(sa.Column('clock_min_mhz', sa.Double(), nullable=True))
        batch.add_column(sa.Column('clock_max_mhz', sa.Double(), nullable=True))
        batch.add_column(sa.Column('throttled', sa.Integer(), nullable=True))
        batch.drop_constraint(op.f(_CHECK), type_='check')
        batch.create_check_constraint(op.f(_CHECK), _status_check((*_STATUSES, 'inconclusive')))


def downgrade() -> None:
    # an inconclusive verdict has no 0004 spelling: it was a verification without a verdict, i.e. failed
    op.execute(sa.text("UPDATE autotune_verifications SET status = 'failed' WHERE status = 'inconclusive'"))
    with op.batch_alter_table('autotune_verifications') as batch:
        batch.drop_constraint(op.f(_CHECK), type_='check')
        batch.create_check_constraint(op.f(_CHECK), _status_check(_STATUSES))
        batch.drop_column('throttled')
        batch.drop_column('clock_max_mhz')
        batch.drop_column('clock_min_mhz')
        batch.drop_column('tuned_ratio')
        batch.drop_column('ratios')
    with op.batch_alter_table('autotune_trials') as batch:
        batch.drop_column('retakes')
        batch.drop_column('throttled')
        batch.drop_column('throttle_reasons')
        batch.drop_column('clock_limit_mhz')
        batch.drop_column('clock_max_mhz')
        batch.drop_column('clock_min_mhz')
