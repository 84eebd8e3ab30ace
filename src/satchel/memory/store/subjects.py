"""The subject registry: optional bookkeeping mapping random subject ids to external references.

A registration is keyed by the caller's idempotency key; its key also goes into the project's
retry keyspace, so after the subject is erased a delayed retry cannot recreate the mapping.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg import errors

from satchel.memory.store.database import Conn


class SubjectConflict(Exception):
    """The key, the reference or the version conflicts with what is stored."""


class SubjectMissing(Exception):
    """No such subject in the project."""


@dataclass(frozen=True, slots=True)
class Fields:
    """What a caller sets: an external reference ("" for none) and a label."""

    external_reference: str
    label: str

    def digest(self) -> bytes:
        document = json.dumps(["subject/v1", self.external_reference, self.label])
        return hashlib.sha256(document.encode()).digest()


@dataclass(frozen=True, slots=True)
class Subject:
    """A registered subject."""

    id: uuid.UUID
    version: uuid.UUID
    external_reference: str
    label: str
    updated_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime


_COLUMNS = (
    "id, version, COALESCE(external_reference, ''), label, updated_by, created_at, updated_at"
)


def key_digest(key: uuid.UUID) -> bytes:
    """The registration key's digest (its own namespace in the retry keyspace)."""
    return hashlib.sha256(f"subject-registration/v1:{key}".encode()).digest()


async def _one(conn: Conn, project_id: int, where: str, value: object) -> Subject | None:
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM subjects WHERE project_id = %s AND {where} = %s",
        (project_id, value),
    )
    row = await cursor.fetchone()
    return None if row is None else Subject(*row)


async def register(
    conn: Conn, project_id: int, principal: uuid.UUID, key: uuid.UUID, fields: Fields
) -> tuple[Subject, bool]:
    """A new subject, or the one this key registered before (a replay); else a conflict."""
    digest = fields.digest()
    keyed = key_digest(key)
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"subject-registration:{project_id}:{key}",),
        )
        cursor = await conn.execute(
            f"SELECT request_digest, {_COLUMNS} FROM subjects"
            " WHERE project_id = %s AND key_digest = %s",
            (project_id, keyed),
        )
        row = await cursor.fetchone()
        if row is not None:
            if bytes(row[0]) != digest:
                raise SubjectConflict
            return Subject(*row[1:]), True
        cursor = await conn.execute(
            "SELECT 1 FROM retry_keys WHERE project_id = %s AND key_digest = %s",
            (project_id, keyed),
        )
        if await cursor.fetchone() is not None:
            raise SubjectConflict
        subject_id = uuid.uuid4()
        try:
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO subjects (id, project_id, key_digest, external_reference, label,"
                    " version, updated_by, request_digest, last_digest)"
                    " VALUES (%s, %s, %s, NULLIF(%s, ''), %s, %s, %s, %s, %s)",
                    (
                        subject_id,
                        project_id,
                        keyed,
                        fields.external_reference,
                        fields.label,
                        uuid.uuid4(),
                        principal,
                        digest,
                        digest,
                    ),
                )
        except errors.UniqueViolation:
            raise SubjectConflict from None
        await conn.execute(
            "INSERT INTO retry_keys (project_id, key_digest, fingerprint) VALUES (%s, %s, %s)",
            (project_id, keyed, digest),
        )
        created = await _one(conn, project_id, "id", subject_id)
        assert created is not None
        return created, False


async def by_id(conn: Conn, project_id: int, subject_id: uuid.UUID) -> Subject | None:
    return await _one(conn, project_id, "id", subject_id)


async def by_reference(conn: Conn, project_id: int, reference: str) -> Subject | None:
    return await _one(conn, project_id, "external_reference", reference)


async def page(conn: Conn, project_id: int, after: uuid.UUID | None, limit: int) -> list[Subject]:
    """Up to `limit + 1` subjects ordered by id, after the cursor."""
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM subjects WHERE project_id = %(p)s"
        " AND (%(after)s::uuid IS NULL OR id > %(after)s) ORDER BY id LIMIT %(n)s",
        {"p": project_id, "after": after, "n": limit + 1},
    )
    return [Subject(*row) for row in await cursor.fetchall()]


async def update(
    conn: Conn,
    project_id: int,
    principal: uuid.UUID,
    subject_id: uuid.UUID,
    expected_version: uuid.UUID,
    fields: Fields,
) -> tuple[Subject, bool]:
    """Replace the fields at `expected_version`; an identical retry of the last update replays."""
    digest = fields.digest()
    async with conn.transaction():
        cursor = await conn.execute(
            "SELECT version, previous_version, last_digest FROM subjects"
            " WHERE project_id = %s AND id = %s FOR UPDATE",
            (project_id, subject_id),
        )
        row = await cursor.fetchone()
        if row is None:
            raise SubjectMissing
        version, previous, last = row
        if version != expected_version:
            if previous != expected_version or bytes(last) != digest:
                raise SubjectConflict
            replayed = True
        else:
            replayed = False
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
                            digest,
                            principal,
                            project_id,
                            subject_id,
                        ),
                    )
            except errors.UniqueViolation:
                raise SubjectConflict from None
        current = await _one(conn, project_id, "id", subject_id)
        assert current is not None
        return current, replayed
