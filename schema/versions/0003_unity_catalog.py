"""Names for owned tables (Unity Catalog facade): catalogs, schemas, table names, staging tables.

A table keeps its id and ownership row in ``owned_tables``; a name is optional and lives in
``table_names`` (one row per named table, with the facade's attributes: type, format, columns,
properties). Foreign keys keep names consistent: a schema needs its catalog, a name needs its schema,
and neither can be dropped while something lives under it. Staging tables are reservations made by
``POST /staging-tables``; they disappear when the table is created or their schema is dropped.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalogs",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("properties", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("id", name="uq_catalogs_id"),
    )
    op.create_table(
        "schemas",
        sa.Column("catalog_name", sa.String(255), sa.ForeignKey("catalogs.name", name="fk_schemas_catalog"),
                  nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("properties", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("catalog_name", "name", name="pk_schemas"),
        sa.UniqueConstraint("id", name="uq_schemas_id"),
    )
    op.create_table(
        "table_names",
        sa.Column("table_id", sa.String(36), sa.ForeignKey("owned_tables.table_id", name="fk_table_names_table"),
                  primary_key=True),
        sa.Column("catalog_name", sa.String(255), nullable=False),
        sa.Column("schema_name", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("table_type", sa.String(16), nullable=False),  # MANAGED | EXTERNAL
        sa.Column("data_source_format", sa.String(16), nullable=False),  # DELTA
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("columns", sa.JSON, nullable=False),
        sa.Column("properties", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("catalog_name", "schema_name", "name", name="uq_table_names_name"),
        sa.ForeignKeyConstraint(["catalog_name", "schema_name"], ["schemas.catalog_name", "schemas.name"],
                                name="fk_table_names_schema"),
    )
    op.create_table(
        "staging_tables",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("catalog_name", sa.String(255), nullable=False),
        sa.Column("schema_name", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("location", sa.String(2048), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("location", name="uq_staging_tables_location"),
        sa.ForeignKeyConstraint(["catalog_name", "schema_name"], ["schemas.catalog_name", "schemas.name"],
                                name="fk_staging_tables_schema", ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("staging_tables")
    op.drop_table("table_names")
    op.drop_table("schemas")
    op.drop_table("catalogs")
