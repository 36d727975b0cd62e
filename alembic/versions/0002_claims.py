"""claims: one process measures each (key, config); trials record their device; drop unused reused_from

Existing trials are backfilled as ``done`` claims (the newest non-invalid trial of each (key, config)), so
an upgraded database is never re-measured.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 19:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('autotune_claims',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key_id', sa.Integer(), nullable=False),
    sa.Column('config_hash', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('owner', sa.String(), nullable=False),
    sa.Column('host', sa.String(), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('device', sa.String(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('trial_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("status IN ('running', 'done')", name=op.f('ck_autotune_claims_status')),
    sa.ForeignKeyConstraint(['key_id'], ['autotune_tuning_keys.id'], name=op.f('fk_autotune_claims_key_id')),
    sa.ForeignKeyConstraint(['trial_id'], ['autotune_trials.id'], name=op.f('fk_autotune_claims_trial_id')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_autotune_claims')),
    sa.UniqueConstraint('key_id', 'config_hash', name=op.f('uq_autotune_claims_key_id'))
    )
    # SQLite: batch mode copies autotune_trials and drops the original, which other tables reference;
    # store.schema.upgrade runs migrations with foreign keys off there and checks them before committing.
    with op.batch_alter_table('autotune_trials', schema=None) as batch_op:
        batch_op.add_column(sa.Column('device', sa.String(), nullable=True))
        batch_op.drop_constraint(batch_op.f('fk_autotune_trials_reused_from'), type_='foreignkey')
        batch_op.drop_column('reused_from')

    # Backfill: every (key, config) already evaluated becomes a done claim on its newest trial.
    trials = sa.table(
        'autotune_trials',
        sa.column('id', sa.Integer), sa.column('key_id', sa.Integer),
        sa.column('config_hash', sa.String), sa.column('status', sa.String),
    )
    newest = (
        sa.select(trials.c.key_id, trials.c.config_hash, sa.func.max(trials.c.id).label('trial_id'))
        .where(trials.c.status != 'invalid')
        .group_by(trials.c.key_id, trials.c.config_hash)
    )
    rows = op.get_bind().execute(newest).all()
    if rows:
        from datetime import datetime, timezone

        now = datetime.now(timezone.utc)
        claims = sa.table(
            'autotune_claims',
            *(sa.column(n) for n in ('key_id', 'config_hash', 'status', 'owner', 'host', 'pid', 'attempts',
                                     'lease_expires_at', 'trial_id', 'created_at', 'updated_at')),
        )
        op.bulk_insert(claims, [
            {'key_id': k, 'config_hash': h, 'status': 'done', 'owner': 'migration-0002', 'host': '',
             'pid': 0, 'attempts': 1, 'lease_expires_at': now, 'trial_id': t, 'created_at': now,
             'updated_at': now}
            for k, h, t in rows
        ])


def downgrade() -> None:
    with op.batch_alter_table('autotune_trials', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reused_from', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f('fk_autotune_trials_reused_from'), 'autotune_trials', ['reused_from'], ['id']
        )
        batch_op.drop_column('device')
    op.drop_table('autotune_claims')
