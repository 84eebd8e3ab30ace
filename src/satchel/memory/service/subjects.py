"""The subject registry: optional bookkeeping mapping random subject ids to external references.

A registration is keyed by the caller's idempotency key; its key also goes into the project's
retry keyspace, so after the subject is erased a delayed retry cannot recreate the mapping.
"""

from __future__ import annotations

import hashlib
import json
import uuid

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Conflict, NotFound, RegisteredSubject
from satchel.memory.store import subjects
from satchel.memory.store.subjects import Fields


def _conflict() -> Conflict:
    return Conflict(
        "subject reference, retry or version conflicts; inspect the current entry",
        "subject_conflict",
    )


def _missing() -> NotFound:
    return NotFound("subject not found")


def _fingerprint(fields: Fields) -> bytes:
    """What a retry must repeat: SHA-256 of the fields under the registry's namespace."""
    document = json.dumps(["subject/v1", fields.external_reference, fields.label])
    return hashlib.sha256(document.encode()).digest()


def _key_digest(key: uuid.UUID) -> bytes:
    """The registration key's digest (its own namespace in the retry keyspace)."""
    return hashlib.sha256(f"subject-registration/v1:{key}".encode()).digest()


async def register(
    pool: AsyncConnectionPool,
    project_id: int,
    principal: uuid.UUID,
    key: uuid.UUID,
    *,
    external_reference: str,
    label: str,
) -> tuple[RegisteredSubject, bool]:
    """A new subject, or the one this key registered before (a replay); else a conflict."""
    fields = Fields(external_reference, label)
    digest = _fingerprint(fields)
    keyed = _key_digest(key)
    async with pool.connection() as conn, conn.transaction():
        await subjects.lock_registration(conn, project_id, key)
        found = await subjects.registered(conn, project_id, keyed)
        if found is not None:
            requested, subject = found
            if requested != digest:
                raise _conflict()
            return subject, True
        if await subjects.key_kept(conn, project_id, keyed):
            raise _conflict()
        subject_id = uuid.uuid4()
        if not await subjects.insert(
            conn, project_id, principal, subject_id, keyed, fields, digest
        ):
            raise _conflict()
        await subjects.keep_key(conn, project_id, keyed, digest)
        created = await subjects.by_id(conn, project_id, subject_id)
        assert created is not None
        return created, False


async def get(
    pool: AsyncConnectionPool, project_id: int, subject_id: uuid.UUID | None, reference: str
) -> RegisteredSubject:
    """The subject with id `subject_id`, or else with external reference `reference`."""
    async with pool.connection() as conn:
        if subject_id is not None:
            found = await subjects.by_id(conn, project_id, subject_id)
        else:
            found = await subjects.by_reference(conn, project_id, reference)
    if found is None:
        raise _missing()
    return found


async def page(
    pool: AsyncConnectionPool, project_id: int, after: uuid.UUID | None, limit: int
) -> list[RegisteredSubject]:
    """Up to `limit + 1` subjects ordered by id, after the cursor (one more than a page tells
    there is a next)."""
    async with pool.connection() as conn:
        return await subjects.page(conn, project_id, after, limit)


async def update(
    pool: AsyncConnectionPool,
    project_id: int,
    principal: uuid.UUID,
    subject_id: uuid.UUID,
    expected_version: uuid.UUID,
    *,
    external_reference: str,
    label: str,
) -> tuple[RegisteredSubject, bool]:
    """Replace the fields at `expected_version`; an identical retry of the last update replays."""
    fields = Fields(external_reference, label)
    digest = _fingerprint(fields)
    async with pool.connection() as conn, conn.transaction():
        found = await subjects.versions(conn, project_id, subject_id)
        if found is None:
            raise _missing()
        version, previous, last = found
        if version != expected_version:
            if previous != expected_version or last != digest:
                raise _conflict()
            replayed = True
        else:
            replayed = False
            if not await subjects.overwrite(
                conn, project_id, principal, subject_id, fields, digest
            ):
                raise _conflict()
        current = await subjects.by_id(conn, project_id, subject_id)
        assert current is not None
        return current, replayed
