"""The tables of the state database (SQLAlchemy Core), the same on SQLite and PostgreSQL.

Tool pins, remembered approvals, the audit log and the gateway's tokens; and what gateway replicas
sharing one database need (:mod:`mcpmux.serve.cluster`): who is up, the key they seal stateless
clients' ``requestState`` with, and the calls held for a person's approval. Alembic migrations
(:mod:`mcpmux.policy.migrations`) create and change them; this module is what the code reads and
writes through.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

__all__ = [
    "approvals", "audit", "cluster_keys", "gateway_tokens", "held_approvals", "metadata", "pins", "replicas",
    "server_switches",
]  # fmt: skip

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

replicas = Table(
    "mcpmux_replicas",
    metadata,
    Column("id", String(63), primary_key=True),
    Column("advertise", Text, nullable=False),  # the URL other replicas forward to
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),  # the database's clock (epoch seconds)
    Column("sessions", Integer, nullable=False),
    Column("in_flight", Integer, nullable=False),
)

cluster_keys = Table(
    "mcpmux_cluster_keys",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("secret", String(128), nullable=False),  # hex; the row is as secret as the tokens' table
    Column("created_at", Float, nullable=False),
)

held_approvals = Table(
    "mcpmux_held_approvals",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("replica", String(63), nullable=False),  # where the call waits
    Column("summary", Text, nullable=False),  # JSON as the console shows it (arguments redacted)
    Column("held_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("answer", String(16), nullable=True),
    Column("answered_by", Text, nullable=True),
    Index("mcpmux_held_approvals_expires", "expires_at"),
)

server_switches = Table(
    "mcpmux_server_switches",
    metadata,
    # A server disabled at run time (console, REST API, chat) stays disabled across restarts and on
    # every replica until enabled again; enabling deletes the row (the configuration decides again).
    Column("identity", String(200), primary_key=True),  # policy.pins.server_identity
    Column("server", String(200), primary_key=True),
    Column("reason", Text, nullable=False),
    Column("changed_at", Float, nullable=False),
    Column("changed_by", Text, nullable=True),
)
