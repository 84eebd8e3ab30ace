"""Bearer tokens: `tsk_` + 43 base64url characters; only the SHA-256 and a 12-character prefix
are stored. Created, listed and revoked on the manage side, straight in the database."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg

TOKEN_PREFIX = "tsk_"
TOKEN_PATTERN = re.compile(r"tsk_[A-Za-z0-9_-]{43}")
PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


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


def create_token(url: str, project: str, *, read_only: bool = False, name: str = "") -> str:
    """Create a token (and its project when new); the token is returned once and never stored."""
    if not PROJECT_NAME.fullmatch(project):
        raise ValueError(f"project name {project!r} must be 1-128 letters, digits, '.', '_' or '-'")
    token = new_token()
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "INSERT INTO projects (name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
            "SET name = EXCLUDED.name RETURNING id",
            (project,),
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO tokens (id, project_id, name, digest, prefix, access) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (
                uuid.uuid4(),
                row[0],
                name,
                token_digest(token),
                token[:12],
                "read_only" if read_only else "read_write",
            ),
        )
    return token


def list_tokens(url: str, project: str | None = None) -> list[TokenInfo]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT t.id, p.name, t.name, t.prefix, t.access, t.created_at, t.revoked_at "
            "FROM tokens t JOIN projects p ON p.id = t.project_id "
            "WHERE %(project)s::text IS NULL OR p.name = %(project)s "
            "ORDER BY p.name, t.created_at",
            {"project": project},
        ).fetchall()
    return [TokenInfo(*row) for row in rows]


def revoke_token(url: str, token_or_prefix: str) -> int:
    """Revoke by full token, token id, or the 12-character prefix; returns how many were revoked."""
    with psycopg.connect(url) as conn:
        value: object
        if TOKEN_PATTERN.fullmatch(token_or_prefix):
            condition, value = "digest = %s", token_digest(token_or_prefix)
        elif _is_uuid(token_or_prefix):
            condition, value = "id = %s", uuid.UUID(token_or_prefix)
        else:
            condition, value = "prefix = %s", token_or_prefix
        cursor = conn.execute(
            f"UPDATE tokens SET revoked_at = now() WHERE {condition} AND revoked_at IS NULL",
            (value,),
        )
        return cursor.rowcount


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
