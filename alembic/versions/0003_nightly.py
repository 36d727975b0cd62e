"""nightly jobs: shapes requested at run time, verifications of stored bests, nightly runs

New tables only; nothing existing changes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 02:00:20.064481
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | Sequence[str] | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('autotune_nightly_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('job_name', sa.String(), nullable=False),
    sa.Column('hostname', sa.String(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('summary', sa.JSON(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_nightly_runs')),
    sa.UniqueConstraint('run_id', name=op.f('uq_autotune_nightly_runs_run_id'))
    )
    op.create_table('autotune_shape_requests',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kernel_name', sa.String(), nullable=False),
    sa.Column('shape_key', sa.String(), nullable=False),
    sa.Column('dims', sa.JSON(), nullable=False),
    sa.Column('dtypes_key', sa.String(), nullable=False),
    sa.Column('device_name', sa.String(), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_shape_requests')),
    sa.UniqueConstraint('kernel_name', 'shape_key', 'dtypes_key', 'device_name', name=op.f('uq_autotune_shape_requests_kernel_name'))
    )
    op.create_table('autotune_verifications',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key_id', sa.Integer(), nullable=False),
    sa.Column('trial_id', sa.Integer(), nullable=True),
    sa.Column('run_id', sa.String(), nullable=False),
    sa.Column('kernel_name', sa.String(), nullable=False),
    sa.Column('shape_key', sa.String(), nullable=False),
    sa.Column('device_name', sa.String(), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('config_hash', sa.String(length=32), nullable=False),
    sa.Column('baseline_s', sa.Double(), nullable=True),
    sa.Column('median_s', sa.Double(), nullable=True),
    sa.Column('samples_s', sa.JSON(), nullable=False),
    sa.Column('reference_s', sa.JSON(), nullable=True),
    sa.Column('ratio', sa.Double(), nullable=True),
    sa.Column('p_value', sa.Double(), nullable=True),
    sa.Column('threshold', sa.Double(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('hostname', sa.String(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("status IN ('ok', 'regression', 'confirmed', 'improved', 'failed')", name=op.f('ck_autotune_verifications_status')),
    sa.ForeignKeyConstraint(['key_id'], ['autotune_tuning_keys.id'], name=op.f('fk_autotune_verifications_key_id')),
    sa.ForeignKeyConstraint(['trial_id'], ['autotune_trials.id'], name=op.f('fk_autotune_verifications_trial_id')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_verifications'))
    )
    with op.batch_alter_table('autotune_verifications', schema=None) as batch_op:
        batch_op.create_index('ix_autotune_verifications_key_id_config_hash', ['key_id', 'config_hash'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('autotune_verifications', schema=None) as batch_op:
        batch_op.drop_index('ix_autotune_verifications_key_id_config_hash')

    op.drop_table('autotune_verifications')
    op.drop_table('autotune_shape_requests')
    op.drop_table('autotune_nightly_runs')
