"""initial schema: kernels, environments, shapes, tuning keys, trials, best configs

Revision ID: 0001
Revises:
Create Date: 2026-12-02 09:44:37.264421
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('autotune_environments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('env_hash', sa.String(length=64), nullable=False),
    sa.Column('device_kind', sa.String(), nullable=False),
    sa.Column('gpu_name', sa.String(), nullable=False),
    sa.Column('cc', sa.String(), nullable=False),
    sa.Column('sm_count', sa.Integer(), nullable=False),
    sa.Column('driver', sa.String(), nullable=False),
    sa.Column('cuda', sa.String(), nullable=False),
    sa.Column('torch', sa.String(), nullable=False),
    sa.Column('triton', sa.String(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_environments')),
    sa.UniqueConstraint('env_hash', name=op.f('uq_autotune_environments_env_hash'))
    )
    op.create_table('autotune_kernels',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(), nullable=False),
    sa.Column('source_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_kernels')),
    sa.UniqueConstraint('name', 'source_hash', name=op.f('uq_autotune_kernels_name'))
    )
    op.create_table('autotune_shapes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kernel_name', sa.String(), nullable=False),
    sa.Column('shape_key', sa.String(), nullable=False),
    sa.Column('dims', sa.JSON(), nullable=False),
    sa.Column('dtypes', sa.JSON(), nullable=False),
    sa.Column('dtypes_key', sa.String(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_shapes')),
    sa.UniqueConstraint('kernel_name', 'shape_key', 'dtypes_key', name=op.f('uq_autotune_shapes_kernel_name'))
    )
    op.create_table('autotune_tuning_keys',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kernel_id', sa.Integer(), nullable=False),
    sa.Column('space_hash', sa.String(length=64), nullable=False),
    sa.Column('space', sa.JSON(), nullable=False),
    sa.Column('shape_id', sa.Integer(), nullable=False),
    sa.Column('environment_id', sa.Integer(), nullable=False),
    sa.Column('study_name', sa.String(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['environment_id'], ['autotune_environments.id'], name=op.f('fk_autotune_tuning_keys_environment_id')),
    sa.ForeignKeyConstraint(['kernel_id'], ['autotune_kernels.id'], name=op.f('fk_autotune_tuning_keys_kernel_id')),
    sa.ForeignKeyConstraint(['shape_id'], ['autotune_shapes.id'], name=op.f('fk_autotune_tuning_keys_shape_id')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_tuning_keys')),
    sa.UniqueConstraint('kernel_id', 'space_hash', 'shape_id', 'environment_id', name=op.f('uq_autotune_tuning_keys_kernel_id')),
    sa.UniqueConstraint('study_name', name=op.f('uq_autotune_tuning_keys_study_name'))
    )
    op.create_table('autotune_trials',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key_id', sa.Integer(), nullable=False),
    sa.Column('optuna_trial_number', sa.Integer(), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('config_hash', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('time_s', sa.Double(), nullable=True),
    sa.Column('mean_s', sa.Double(), nullable=True),
    sa.Column('min_s', sa.Double(), nullable=True),
    sa.Column('spread', sa.Double(), nullable=True),
    sa.Column('launches', sa.Double(), nullable=True),
    sa.Column('tflops', sa.Double(), nullable=True),
    sa.Column('gbps', sa.Double(), nullable=True),
    sa.Column('compile_s', sa.Double(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('kernels', sa.JSON(), nullable=True),
    sa.Column('worker', sa.String(), nullable=True),
    sa.Column('hostname', sa.String(), nullable=True),
    sa.Column('measured', sa.Boolean(), nullable=False),
    sa.Column('reused_from', sa.Integer(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    # the TrialStatus values at this revision (a new status needs a migration)
    sa.CheckConstraint("status IN ('ok', 'invalid', 'compile_failed', 'launch_failed', 'wrong_result', 'timeout', 'crashed')", name=op.f('ck_autotune_trials_status')),
    sa.ForeignKeyConstraint(['key_id'], ['autotune_tuning_keys.id'], name=op.f('fk_autotune_trials_key_id')),
    sa.ForeignKeyConstraint(['reused_from'], ['autotune_trials.id'], name=op.f('fk_autotune_trials_reused_from')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_trials'))
    )
    op.create_index('ix_autotune_trials_key_id_config_hash', 'autotune_trials', ['key_id', 'config_hash'])

    op.create_table('autotune_best_configs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key_id', sa.Integer(), nullable=False),
    sa.Column('trial_id', sa.Integer(), nullable=False),
    sa.Column('kernel_name', sa.String(), nullable=False),
    sa.Column('source_hash', sa.String(length=64), nullable=False),
    sa.Column('space_hash', sa.String(length=64), nullable=False),
    sa.Column('shape_key', sa.String(), nullable=False),
    sa.Column('dims', sa.JSON(), nullable=False),
    sa.Column('dtypes_key', sa.String(), nullable=False),
    sa.Column('device_name', sa.String(), nullable=False),
    sa.Column('cc', sa.String(), nullable=False),
    sa.Column('env_hash', sa.String(length=64), nullable=False),
    sa.Column('torch', sa.String(), nullable=False),
    sa.Column('triton', sa.String(), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('time_s', sa.Double(), nullable=False),
    sa.Column('tflops', sa.Double(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['key_id'], ['autotune_tuning_keys.id'], name=op.f('fk_autotune_best_configs_key_id')),
    sa.ForeignKeyConstraint(['trial_id'], ['autotune_trials.id'], name=op.f('fk_autotune_best_configs_trial_id')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_best_configs')),
    sa.UniqueConstraint('key_id', name=op.f('uq_autotune_best_configs_key_id'))
    )
    op.create_index('ix_autotune_best_configs_kernel_name_device_name', 'autotune_best_configs',
                    ['kernel_name', 'device_name'])


def downgrade() -> None:
    op.drop_index('ix_autotune_best_configs_kernel_name_device_name', table_name='autotune_best_configs')

    op.drop_table('autotune_best_configs')
    op.drop_index('ix_autotune_trials_key_id_config_hash', table_name='autotune_trials')

    op.drop_table('autotune_trials')
    op.drop_table('autotune_tuning_keys')
    op.drop_table('autotune_shapes')
    op.drop_table('autotune_kernels')
    op.drop_table('autotune_environments')
