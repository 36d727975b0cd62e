"""serve: the shape requests become the ``autotune serve`` queue (status, owner, lease, tuned_at, message);
``autotune_services``: the services' heartbeats

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 17:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | Sequence[str] | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('autotune_shape_requests') as batch:
        # recorded before the service existed: queued, so a service tunes what the nightly job had not
        batch.add_column(sa.Column('status', sa.String(length=16), server_default='queued', nullable=False))
        batch.add_column(sa.Column('owner', sa.String(), nullable=True))
        batch.add_column(sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('tuned_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('message', sa.Text(), nullable=True))
        batch.add_column(sa.Column('options', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('report', sa.JSON(), nullable=True))
        batch.create_check_constraint(
            op.f('ck_autotune_shape_requests_status'), "status IN ('queued', 'running', 'done', 'refused')"
        )
        batch.create_index('ix_autotune_shape_requests_status_device_name', ['status', 'device_name'])
    op.create_table(
        'autotune_services',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('owner', sa.String(), nullable=False),
        sa.Column('host', sa.String(), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=False),
        sa.Column('device_name', sa.String(), nullable=True),
        sa.Column('devices', sa.String(), nullable=False),
        sa.Column('kernels', sa.JSON(), nullable=False),
        sa.Column('started', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_beat', sa.DateTime(timezone=True), nullable=False),
        sa.Column('request_id', sa.Integer(), nullable=True),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.CheckConstraint(
            "state IN ('starting', 'idle', 'tuning', 'stopped')", name=op.f('ck_autotune_services_state')
        ),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_services')),
        sa.UniqueConstraint('owner', name=op.f('uq_autotune_services_owner')),
    )


def downgrade() -> None:
    op.drop_table('autotune_services')
    with op.batch_alter_table('autotune_shape_requests') as batch:
        batch.drop_index('ix_autotune_shape_requests_status_device_name')
        batch.drop_constraint(op.f('ck_autotune_shape_requests_status'), type_='check')
        batch.drop_column('report')
        batch.drop_column('options')
        batch.drop_column('message')
        batch.drop_column('tuned_at')
        batch.drop_column('lease_until')
        batch.drop_column('owner')
        batch.drop_column('status')
