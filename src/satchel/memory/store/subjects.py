"""The subject registry's statements: registrations by key, lookups, pages and updates. Each runs
inside the caller's transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from psycopg import errors

from satchel.memory.domain import RegisteredSubject
from satchel.memory.store.database import Conn


@dataclass(frozen=True, slots=True)
class Fields:
    """What a caller sets: an external reference ("" for none) and a label."""

    external_reference: str
    label: str


_COLUMNS = (
    "id, version, COALESCE(external_reference, ''), label, updated_by, created_at, updated_at"
)


async def _one(conn: Conn, project_id: int, where: str, value: object) -> RegisteredSubject | None:
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM subjects WHERE project_id = %s AND {where} = %s",
        (project_id, value),
    )
    row = await cursor.fetchone()
    return None if row is None else RegisteredSubject(*row)


async def lock_registration(conn: Conn, project_id: int, key: uuid.UUID) -> None:
    """Take the registration key's transaction lock (retries of one registration queue)."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"subject-registration:{project_id}:{key}",),
    )


async def registered(
    conn: Conn, project_id: int, key_digest: bytes
) -> tuple[bytes, RegisteredSubject] | None:
    """The request digest and the subject the key `key_digest` registered, if it did."""
    cursor = await conn.execute(
        f"SELECT request_digest, {_COLUMNS} FROM subjects"
        " WHERE project_id = %s AND key_digest = %s",
        (project_id, key_digest),
    )
    row = await cursor.fetchone()
    return None if row is None else (bytes(row[0]), RegisteredSubject(*row[1:]))


async def key_kept(conn: Conn, project_id: int, key_digest: bytes) -> bool:
    """Whether the project's retry keyspace holds `key_digest`."""
    cursor = await conn.execute(
        "SELECT 1 FROM retry_keys WHERE project_id = %s AND key_digest = %s",
        (project_id, key_digest),
    )
    return await cursor.fetchone() is not None


async def insert(
    conn: Conn,
    project_id: int,
    principal: uuid.UUID,
    subject_id: uuid.UUID,
    key_digest: bytes,
    fields: Fields,
    request_digest: bytes,
) -> bool:
    """Write a new subject; False (nothing written) when its reference is another's."""
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO subjects (id, project_id, key_digest, external_reference, label,"
                " version, updated_by, request_digest, last_digest)"
                " VALUES (%s, %s, %s, NULLIF(%s, ''), %s, %s, %s, %s, %s)",
                (
                    subject_id,
                    project_id,
                    key_digest,
                    fields.external_reference,
                    fields.label,
                    uuid.uuid4(),
                    principal,
                    request_digest,
                    request_digest,
                ),
            )
    except errors.UniqueViolation:
        return False
    return True


async def keep_key(conn: Conn, project_id: int, key_digest: bytes, fingerprint: bytes) -> None:
    """Put the registration's key into the project's retry keyspace."""
    await conn.execute(
        "INSERT INTO retry_keys (project_id, key_digest, fingerprint) VALUES (%s, %s, %s)",
        (project_id, key_digest, fingerprint),
    )


async def by_id(conn: Conn, project_id: int, subject_id: uuid.UUID) -> RegisteredSubject | None:
    return await _one(conn, project_id, "id", subject_id)


async def by_reference(conn: Conn, project_id: int, reference: str) -> RegisteredSubject | None:
    return await _one(conn, project_id, "external_reference", reference)


async def page(
    conn: Conn, project_id: int, after: uuid.UUID | None, limit: int
) -> list[RegisteredSubject]:
    """Up to `limit + 1` subjects ordered by id, after the cursor."""
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM subjects WHERE project_id = %(p)s"
        " AND (%(after)s::uuid IS NULL OR id > %(after)s) ORDER BY id LIMIT %(n)s",
        {"p": project_id, "after": after, "n": limit + 1},
    )
    return [RegisteredSubject(*row) for row in await cursor.fetchall()]


async def versions(
    conn: Conn, project_id: int, subject_id: uuid.UUID
) -> tuple[uuid.UUID, uuid.UUID | None, bytes] | None:
    """The subject's version, the one before it and its last update's digest, its row locked."""
    cursor = await conn.execute(
        "SELECT version, previous_version, last_digest FROM subjects"
        " WHERE project_id = %s AND id = %s FOR UPDATE",
        (project_id, subject_id),
    )
    row = await cursor.fetchone()
    return None if row is None else (row[0], row[1], bytes(row[2]))


async def overwrite(
    conn: Conn,
    project_id: int,
    principal: uuid.UUID,
    subject_id: uuid.UUID,
    fields: Fields,
    request_digest: bytes,
) -> bool:
    """Replace the subject's fields under a new version; False (nothing written) when the
    reference is another's."""
    try:
        async with conn.transaction():
            await conn.execute(
                "UPDATE subjects SET external_reference = NULLIF(%s, ''), label = %s,"
                " previous_version = version, version = %s, last_digest = %s,"
                " updated_by = %s, updated_at = clock_timestamp()"
                " WHERE project_id = %s AND id = %s",
                (
                    fields.external_reference,
                    fields.label,
                    uuid.uuid4(),
                    request_digest,
                    principal,
                    project_id,
                    subject_id,
                ),
            )
    except errors.UniqueViolation:
        return False
    return True
