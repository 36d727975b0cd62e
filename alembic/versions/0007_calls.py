"""calls: the timed calls behind a trial's time (fewer than --num-tests where the measurement was raced)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07 13:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | Sequence[str] | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for the trials stored before: they took every call of their --num-tests
    with op.batch_alter_table('autotune_trials') as batch:
        batch.add_column(sa.Column('calls', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('autotune_trials') as batch:
        batch.drop_column('calls')
