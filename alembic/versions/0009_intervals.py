"""intervals: a best's median interval and its speedup over the default with an interval; re-timing rounds

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | Sequence[str] | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEST = ('ci_low_s', 'ci_high_s', 'speedup', 'speedup_low', 'speedup_high')


def upgrade() -> None:
    # NULL for rows stored before: their re-timings carry no round, their bests no interval (the next
    # search of the key re-times the best with the default and fills them)
    with op.batch_alter_table('autotune_trials') as batch:
        batch.add_column(sa.Column('retime_round', sa.String(length=64), nullable=True))
    with op.batch_alter_table('autotune_best_configs') as batch:
        for name in _BEST:
            batch.add_column(sa.Column(name, sa.Double(), nullable=True))
        batch.add_column(sa.Column('pairs', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('autotune_best_configs') as batch:
        batch.drop_column('pairs')
        for name in reversed(_BEST):
            batch.drop_column(name)
    with op.batch_alter_table('autotune_trials') as batch:
        batch.drop_column('retime_round')
