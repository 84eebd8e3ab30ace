"""Erasure and export: every row derived from a data subject or from chosen observations,
deleted in one transaction, or read out in one snapshot."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import errors
from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Invalid, TooLargeToAnswer
from satchel.memory.store import erasure, export
from satchel.memory.store.derived import Scope
from satchel.memory.store.erasure import Erased

ATTEMPTS = 3
MAX_EXPORT_ROWS = 50_000


def _scope_of(project_id: int, subject: str | None, ids: list[str] | None, code: str) -> Scope:
    """Exactly one of a subject (blank counts as none) or observation ids, else `Invalid`:
    `no_subject` for neither, `code` for both."""
    subject = subject if subject and subject.strip() else None
    if subject is None and not ids:
        raise Invalid("data_subject_id or source_observation_ids: one is required", "no_subject")
    if subject is not None and ids:
        raise Invalid(
            "data_subject_id and source_observation_ids: give one of them, not both", code
        )
    if ids:
        return Scope(project_id, None, tuple(dict.fromkeys(uuid.UUID(text) for text in ids)))
    return Scope(project_id, subject)


async def erase(
    pool: AsyncConnectionPool,
    project_id: int,
    subject: str | None,
    ids: list[str] | None,
    reason: str | None,
) -> tuple[Scope, Erased]:
    """Erase a subject or the observations `ids` in one transaction; idempotency keys of erased
    turns stay as tombstones.

    A change that locked a fact of the scope before asking for the project's row (a correction)
    can deadlock with the erasure; PostgreSQL then aborts one side, and the erasure starts over.
    """
    scope = _scope_of(project_id, subject, ids, "invalid_erasure")
    async with pool.connection() as conn:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                async with conn.transaction():
                    return scope, await erasure.erase(conn, scope, reason)
            except errors.DeadlockDetected:
                if attempt == ATTEMPTS:
                    raise
    raise AssertionError("unreachable")


async def export_rows(
    pool: AsyncConnectionPool, project_id: int, subject: str | None, ids: list[str] | None
) -> tuple[Scope, dict[str, list[Any]]]:
    """A subject's or the observations `ids`' rows per kind, read in one snapshot; refused past
    `MAX_EXPORT_ROWS`."""
    scope = _scope_of(project_id, subject, ids, "invalid_export")
    async with pool.connection() as conn, conn.transaction():
        kinds = await export.snapshot(conn, scope)
        if await export.row_count(conn, scope, kinds) > MAX_EXPORT_ROWS:
            raise TooLargeToAnswer(
                "the export holds more rows than one answer may carry", "export_too_large"
            )
        return scope, await export.sections(conn, scope, kinds)
