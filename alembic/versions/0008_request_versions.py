"""request versions: a request names the kernel version it asks for (source and space hash; "" for any), so
that a service tunes only what its loaded file matches (issue 45)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07 23:55:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | Sequence[str] | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = ['kernel_name', 'shape_key', 'dtypes_key', 'device_name']


def upgrade() -> None:
    # the requests stored before name no version: "", which any service of the kernel may take
    with op.batch_alter_table('autotune_shape_requests') as batch:
        batch.add_column(sa.Column('source_hash', sa.String(), server_default='', nullable=False))
        batch.add_column(sa.Column('space_hash', sa.String(), server_default='', nullable=False))
        batch.drop_constraint(op.f('uq_autotune_shape_requests_kernel_name'), type_='unique')
        batch.create_unique_constraint(
            op.f('uq_autotune_shape_requests_kernel_name'), [*OLD_KEY, 'source_hash', 'space_hash']
        )


def downgrade() -> None:
    # one row per (kernel, shape, dtypes, device) again: the first of each (the versions' rows go)
    op.execute(
        'DELETE FROM autotune_shape_requests WHERE id NOT IN (SELECT MIN(id) FROM autotune_shape_requests '
        'GROUP BY kernel_name, shape_key, dtypes_key, device_name)'
    )
    with op.batch_alter_table('autotune_shape_requests') as batch:
        batch.drop_constraint(op.f('uq_autotune_shape_requests_kernel_name'), type_='unique')
        batch.create_unique_constraint(op.f('uq_autotune_shape_requests_kernel_name'), OLD_KEY)
        batch.drop_column('space_hash')
        batch.drop_column('source_hash')
