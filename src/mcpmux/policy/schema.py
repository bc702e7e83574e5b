"""The tables of the state database (SQLAlchemy Core), the same on SQLite and PostgreSQL.

Tool pins, remembered approvals, the audit log and the gateway's tokens. Alembic migrations
(:mod:`mcpmux.policy.migrations`) create and change them; this module is what the code reads and
writes through.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

__all__ = ["approvals", "audit", "gateway_tokens", "metadata", "pins"]

metadata = MetaData()

pins = Table(
    "mcpmux_pins",
    metadata,
    # What the server is (policy.pins.server_identity), "" for pins from before identities.
    Column("identity", String(200), primary_key=True),
    Column("server", String(200), primary_key=True),
    Column("tool", String(500), primary_key=True),
    Column("hash", String(64), nullable=False),
    Column("definition", Text, nullable=False),
    Column("approved", Boolean, nullable=False),
    Column("pinned_at", Float, nullable=False),
    Column("pending_hash", String(64), nullable=True),
    Column("pending_definition", Text, nullable=True),
    Column("pending_reason", Text, nullable=True),
)

approvals = Table(
    "mcpmux_approvals",
    metadata,
    Column("project", Text, primary_key=True),
    Column("face", String(64), primary_key=True),
    Column("caller", String(500), primary_key=True),
    Column("server", String(200), primary_key=True),
    Column("tool", String(500), primary_key=True),
    Column("granted_at", Float, nullable=False),
)

audit = Table(
    "mcpmux_audit",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("face", String(64), nullable=False),
    Column("caller", Text, nullable=True),
    Column("server", String(200), nullable=False),
    Column("tool", String(500), nullable=False),
    Column("name", String(800), nullable=False),
    Column("args_digest", String(64), nullable=False),
    Column("args", Text, nullable=False),
    Column("decision", String(64), nullable=False),
    Column("rule", Text, nullable=False),
    Column("duration_ms", Float, nullable=True),
    Column("outcome", String(64), nullable=False),
    Column("error", Text, nullable=True),
    Column("result_bytes", BigInteger, nullable=True),
    Index("mcpmux_audit_at", "at"),
    Index("mcpmux_audit_server_tool", "server", "tool"),
)

gateway_tokens = Table(
    "mcpmux_gateway_tokens",
    metadata,
    Column("name", String(64), primary_key=True),
    # SHA-256 of the token (hex); the token itself is never stored.
    Column("hash", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("can_approve", Boolean, nullable=False),
    Column("scopes", Text, nullable=False),  # comma-separated API scopes
    Column("toolsets", Text, nullable=False),  # comma-separated toolset names, "" for none
)
