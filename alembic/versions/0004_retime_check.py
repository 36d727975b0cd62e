"""re-timed finalists and check metrics: trials.kind, trials.check, best_configs.samples/spread

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 02:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | Sequence[str] | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # batch mode: SQLite rebuilds the table (it cannot add a NOT NULL column with a default otherwise
    # on every version); Postgres gets plain ALTERs.
    with op.batch_alter_table('autotune_trials') as batch:
        batch.add_column(sa.Column('check', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('kind', sa.String(length=16), server_default='search', nullable=False))
    with op.batch_alter_table('autotune_best_configs') as batch:
        batch.add_column(sa.Column('samples', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('spread', sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('autotune_best_configs') as batch:
        batch.drop_column('spread')
        batch.drop_column('samples')
    with op.batch_alter_table('autotune_trials') as batch:
        batch.drop_column('kind')
        batch.drop_column('check')
