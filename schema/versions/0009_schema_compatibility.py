"""Which builds may run on this schema: one row per schema revision, from this one on.

A rolling upgrade migrates the store while owners of the previous release still serve (expand, then contract
in a later release). A build checks the revision it finds at start-up: its own head serves; an older one it
knows asks for `commit-owner migrate`; a newer one it cannot know, so the newer migration says here the oldest
schema revision whose code still runs on it (``oldest_code_revision``) and the release that wrote it
(``written_by``). A build whose head is at or after that serves; any other refuses in one line naming the
release to run (decision 81). A contract migration (one that breaks older code) names its own revision.

Both 0008 (a new table) and this one (a new table) leave every statement of 0007's code valid: 0007 is the
oldest code revision that runs on them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

WRITTEN_BY = "0.2.0"


def upgrade() -> None:
    table = op.create_table(
        "schema_compatibility",
        sa.Column("revision", sa.String(32), primary_key=True),
        sa.Column("oldest_code_revision", sa.String(32), nullable=False),
        sa.Column("written_by", sa.String(32), nullable=False),
    )
    op.bulk_insert(table, [{"revision": "0008", "oldest_code_revision": "0007", "written_by": WRITTEN_BY},
                           {"revision": "0009", "oldest_code_revision": "0007", "written_by": WRITTEN_BY}])


def downgrade() -> None:
    op.drop_table("schema_compatibility")
