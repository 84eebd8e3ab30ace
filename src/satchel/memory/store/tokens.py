"""Credentials' statements: projects and tokens written, listed and revoked (on the manage side,
over a plain connection), and the grant a token digest stands for (on the request path)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from satchel.memory.store.database import Conn

ManageConn = psycopg.Connection[Any]


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What `tokens list` shows: never the token itself."""

    id: uuid.UUID
    project: str
    name: str
    prefix: str
    access: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """The project a live token acts for, the token's id, its access, and whether the project
    has a retention policy."""

    project_id: int
    project: str
    token_id: uuid.UUID
    access: str
    retained: bool = False


def ensure_project(conn: ManageConn, project: str) -> int:
    """The project's id, created when new."""
    row = conn.execute(
        "INSERT INTO projects (name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
        "SET name = EXCLUDED.name RETURNING id",
        (project,),
    ).fetchone()
    assert row is not None
    project_id: int = row[0]
    return project_id


def insert_token(
    conn: ManageConn, project_id: int, name: str, digest: bytes, prefix: str, access: str
) -> None:
    conn.execute(
        "INSERT INTO tokens (id, project_id, name, digest, prefix, access) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (uuid.uuid4(), project_id, name, digest, prefix, access),
    )


def token_rows(conn: ManageConn, project: str | None) -> list[TokenInfo]:
    """The tokens of one project (by name) or of all, by project then age."""
    rows = conn.execute(
        "SELECT t.id, p.name, t.name, t.prefix, t.access, t.created_at, t.revoked_at "
        "FROM tokens t JOIN projects p ON p.id = t.project_id "
        "WHERE %(project)s::text IS NULL OR p.name = %(project)s "
        "ORDER BY p.name, t.created_at",
        {"project": project},
    ).fetchall()
    return [TokenInfo(*row) for row in rows]


def revoke(conn: ManageConn, column: str, value: object) -> int:
    """Revoke the live tokens whose `column` (digest, id or prefix) is `value`; how many."""
    assert column in ("digest", "id", "prefix")
    cursor = conn.execute(
        f"UPDATE tokens SET revoked_at = now() WHERE {column} = %s AND revoked_at IS NULL",
        (value,),
    )
    return cursor.rowcount


async def grant_of(conn: Conn, digest: bytes) -> TokenGrant | None:
    """The grant of the live token with `digest` in a project not suspended, if any."""
    cursor = await conn.execute(
        "SELECT p.id, p.name, t.id, t.access,"
        " EXISTS (SELECT 1 FROM retention_policies r WHERE r.project_id = p.id) FROM tokens t "
        "JOIN projects p ON p.id = t.project_id "
        "WHERE t.digest = %s AND t.revoked_at IS NULL AND p.suspended_at IS NULL",
        (digest,),
    )
    row = await cursor.fetchone()
    return None if row is None else TokenGrant(*row)
