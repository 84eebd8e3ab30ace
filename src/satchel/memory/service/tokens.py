"""Bearer tokens: `tsk_` + 43 base64url characters; only the SHA-256 and a 12-character prefix
are stored. Created, listed and revoked on the manage side, straight in the database; looked up
by digest on the request path."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import uuid

import psycopg
from psycopg_pool import AsyncConnectionPool

from satchel.memory.store import tokens as store
from satchel.memory.store.database import autocommitting
from satchel.memory.store.tokens import TokenGrant, TokenInfo

TOKEN_PREFIX = "tsk_"
TOKEN_PATTERN = re.compile(r"tsk_[A-Za-z0-9_-]{43}")
PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def create_token(url: str, project: str, *, read_only: bool = False, name: str = "") -> str:
    """Create a token (and its project when new); the token is returned once and never stored."""
    if not PROJECT_NAME.fullmatch(project):
        raise ValueError(f"project name {project!r} must be 1-128 letters, digits, '.', '_' or '-'")
    token = new_token()
    with psycopg.connect(url) as conn:
        project_id = store.ensure_project(conn, project)
        store.insert_token(
            conn,
            project_id,
            name,
            token_digest(token),
            token[:12],
            "read_only" if read_only else "read_write",
        )
    return token


def list_tokens(url: str, project: str | None = None) -> list[TokenInfo]:
    with psycopg.connect(url) as conn:
        return store.token_rows(conn, project)


def revoke_token(url: str, token_or_prefix: str) -> int:
    """Revoke by full token, token id, or the 12-character prefix; returns how many were revoked."""
    with psycopg.connect(url) as conn:
        if TOKEN_PATTERN.fullmatch(token_or_prefix):
            return store.revoke(conn, "digest", token_digest(token_or_prefix))
        if _is_uuid(token_or_prefix):
            return store.revoke(conn, "id", uuid.UUID(token_or_prefix))
        return store.revoke(conn, "prefix", token_or_prefix)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


async def grant_of(pool: AsyncConnectionPool, digest: bytes, timeout: float) -> TokenGrant | None:
    """The grant a token digest stands for, read on a connection the pool lends within
    `timeout` seconds."""
    async with autocommitting(pool, timeout) as conn:
        return await store.grant_of(conn, digest)
