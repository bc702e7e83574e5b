"""The state database: pins, approvals, audit and gateway tokens; adopts the files of mcpmux before Alembic.

Before this revision ``state.db`` was a hand-migrated SQLite file (``PRAGMA user_version`` 1 or 2)
with the tables ``pins``, ``approvals``, ``audit`` and, once a token was made, ``gateway_tokens``
(which gained ``can_approve``, ``scopes`` and ``toolsets`` over time). Such a file is brought to
version 2 first (version 1 keyed pins by server name only: those become legacy pins, claimed by the
first server of that name; its approvals become unscoped: listed and revocable, honoured for no
one), then every row is copied into the new tables and the old ones are dropped, in this one
transaction. Its ``user_version`` is set to 100, so an older mcpmux refuses the file with a clear
message instead of starting on empty tables.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ADOPTED_USER_VERSION = 100
LEGACY_IDENTITY = ""
UNSCOPED_FACE = "unscoped"
_PIN_COLUMNS = "server, tool, hash, definition, approved, pinned_at, pending_hash, pending_definition, pending_reason"
_V1_TO_V2 = f"""
ALTER TABLE pins RENAME TO pins_v1;
ALTER TABLE approvals RENAME TO approvals_v1;
CREATE TABLE pins (identity TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL, hash TEXT NOT NULL,
    definition TEXT NOT NULL, approved INTEGER NOT NULL, pinned_at REAL NOT NULL, pending_hash TEXT,
    pending_definition TEXT, pending_reason TEXT, PRIMARY KEY (identity, server, tool));
CREATE TABLE approvals (project TEXT NOT NULL, face TEXT NOT NULL, caller TEXT NOT NULL, server TEXT NOT NULL,
    tool TEXT NOT NULL, granted_at REAL NOT NULL, PRIMARY KEY (project, face, caller, server, tool));
INSERT INTO pins (identity, {_PIN_COLUMNS}) SELECT '{LEGACY_IDENTITY}', {_PIN_COLUMNS} FROM pins_v1;
INSERT INTO approvals (project, face, caller, server, tool, granted_at)
    SELECT project, '{UNSCOPED_FACE}', '', server, tool, granted_at FROM approvals_v1;
DROP TABLE pins_v1;
DROP TABLE approvals_v1
"""
_AUDIT_COLUMNS = (
    "id, at, face, caller, server, tool, name, args_digest, args, decision, rule, duration_ms, outcome, error,"
    " result_bytes"
)


def upgrade() -> None:
    bind = op.get_bind()
    old = set(sa.inspect(bind).get_table_names()) & {"pins", "approvals", "audit", "gateway_tokens"}
    _create()
    if old and bind.dialect.name == "sqlite":
        _adopt(bind, old)


def _create() -> None:
    op.create_table(
        "mcpmux_pins",
        sa.Column("identity", sa.String(200), primary_key=True),
        sa.Column("server", sa.String(200), primary_key=True),
        sa.Column("tool", sa.String(500), primary_key=True),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("definition", sa.Text, nullable=False),
        sa.Column("approved", sa.Boolean, nullable=False),
        sa.Column("pinned_at", sa.Float, nullable=False),
        sa.Column("pending_hash", sa.String(64), nullable=True),
        sa.Column("pending_definition", sa.Text, nullable=True),
        sa.Column("pending_reason", sa.Text, nullable=True),
    )
    op.create_table(
        "mcpmux_approvals",
        sa.Column("project", sa.Text, primary_key=True),
        sa.Column("face", sa.String(64), primary_key=True),
        sa.Column("caller", sa.String(500), primary_key=True),
        sa.Column("server", sa.String(200), primary_key=True),
        sa.Column("tool", sa.String(500), primary_key=True),
        sa.Column("granted_at", sa.Float, nullable=False),
    )
    op.create_table(
        "mcpmux_audit",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("face", sa.String(64), nullable=False),
        sa.Column("caller", sa.Text, nullable=True),
        sa.Column("server", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(500), nullable=False),
        sa.Column("name", sa.String(800), nullable=False),
        sa.Column("args_digest", sa.String(64), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("decision", sa.String(64), nullable=False),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=True),
        sa.Column("outcome", sa.String(64), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("result_bytes", sa.BigInteger, nullable=True),
    )
    op.create_index("mcpmux_audit_at", "mcpmux_audit", ["at"])
    op.create_index("mcpmux_audit_server_tool", "mcpmux_audit", ["server", "tool"])
    op.create_table(
        "mcpmux_gateway_tokens",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("can_approve", sa.Boolean, nullable=False),
        sa.Column("scopes", sa.Text, nullable=False),
        sa.Column("toolsets", sa.Text, nullable=False),
    )


def _adopt(bind: sa.Connection, old: set[str]) -> None:
    version = bind.exec_driver_sql("PRAGMA user_version").scalar()
    if version == 1:
        for statement in _V1_TO_V2.split(";"):
            if statement.strip():
                bind.exec_driver_sql(statement)
    elif version != 2:
        raise CommandError(
            f"the state database has schema version {version}; mcpmux adopts versions 1 and 2 only:"
            " was it written by another program? Move the file aside to start afresh"
        )
    if "pins" in old:
        columns = f"identity, {_PIN_COLUMNS}"
        bind.exec_driver_sql(f"INSERT INTO mcpmux_pins ({columns}) SELECT {columns} FROM pins")
    if "approvals" in old:
        columns = "project, face, caller, server, tool, granted_at"
        bind.exec_driver_sql(f"INSERT INTO mcpmux_approvals ({columns}) SELECT {columns} FROM approvals")
    if "audit" in old:
        bind.exec_driver_sql(f"INSERT INTO mcpmux_audit ({_AUDIT_COLUMNS}) SELECT {_AUDIT_COLUMNS} FROM audit")
    if "gateway_tokens" in old:
        present = {row[1] for row in bind.exec_driver_sql("PRAGMA table_info(gateway_tokens)")}
        # Tokens made before a column existed: no approving, the API's read and execute, no toolsets.
        can_approve = "can_approve" if "can_approve" in present else "0"
        scopes = "scopes" if "scopes" in present else "'read,execute'"
        toolsets = "toolsets" if "toolsets" in present else "''"
        bind.exec_driver_sql(
            "INSERT INTO mcpmux_gateway_tokens (name, hash, created_at, can_approve, scopes, toolsets)"
            f" SELECT name, hash, created_at, {can_approve}, {scopes}, {toolsets} FROM gateway_tokens"
        )
    for table in sorted(old):
        bind.exec_driver_sql(f'DROP TABLE "{table}"')
    bind.exec_driver_sql(f"PRAGMA user_version = {ADOPTED_USER_VERSION}")


def downgrade() -> None:
    op.drop_table("mcpmux_gateway_tokens")
    op.drop_index("mcpmux_audit_server_tool", "mcpmux_audit")
    op.drop_index("mcpmux_audit_at", "mcpmux_audit")
    op.drop_table("mcpmux_audit")
    op.drop_table("mcpmux_approvals")
    op.drop_table("mcpmux_pins")
