"""Artifacts: opaque per-subject bytes with random versions, replayable writes and tombstoned ids.

Creating an artifact writes its source observation (kind `artifact`, formed at once), which
claims a log offset. An id once used stays used: after a delete (a tombstone) or an erasure (the
retry key outlives the rows), putting it again is a conflict. A write that would take the project
past its allowance (one object's bytes, all objects' bytes, how many) is refused; one that does
not grow what the project holds never is, so a lowered allowance still lets objects shrink.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

from satchel.memory.store.database import Conn
from satchel.memory.store.log import claim_offset, recompute_formed

MAX_ARTIFACT_BYTES = 512 * 1024


class ArtifactConflict(Exception):
    """The id or version conflicts with what is stored (or was once stored)."""


class ArtifactMissing(Exception):
    """No live artifact with that id (and subject) in the project."""


class StorageCapacity(Exception):
    """The write would take the project past its artifact allowance."""


@dataclass(frozen=True, slots=True)
class Allowance:
    """What one project's artifacts may hold: bytes of one object, bytes of all, how many.
    Expired artifacts count until they are removed."""

    object_bytes: int
    total_bytes: int
    objects: int


async def _admit(
    conn: Conn, project_id: int, allowance: Allowance, before: int | None, after: int
) -> None:
    """Refuse a write that grows the project's artifacts (`before`: the object's bytes now,
    None for a new object; `after`: its bytes once written) past `allowance`. Growing writes
    of a project take turns, so two cannot both fit in the last room."""
    creating = before is None
    grown = after - (before or 0)
    if not creating and grown <= 0:
        return
    if after > allowance.object_bytes:
        raise StorageCapacity(f"one artifact may hold {allowance.object_bytes} bytes")
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"artifact-usage:{project_id}",)
    )
    cursor = await conn.execute(
        "SELECT count(*), coalesce(sum(octet_length(content)), 0) FROM artifacts"
        " WHERE project_id = %s",
        (project_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    objects, held = row
    if creating and objects + 1 > allowance.objects:
        raise StorageCapacity(f"the project may hold {allowance.objects} artifacts")
    if held + grown > allowance.total_bytes:
        raise StorageCapacity(f"the project's artifacts may hold {allowance.total_bytes} bytes")


@dataclass(frozen=True, slots=True)
class ArtifactWrite:
    """A put: `expected_version` None creates (or replays the creation)."""

    id: uuid.UUID
    subject: str
    kind: str
    name: str
    content: bytes
    expected_version: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class Metadata:
    """An artifact without its bytes."""

    id: uuid.UUID
    version: uuid.UUID
    subject: str
    kind: str
    name: str
    source_observation_id: uuid.UUID
    bytes: int
    authored_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime


_COLUMNS = (
    "id, version, data_subject_id, kind, name, source_observation_id, octet_length(content),"
    " authored_by, created_at, updated_at, expires_at"
)
_LIVE = "project_id = %(p)s AND id = %(id)s AND expires_at > now()"


def digest(write: ArtifactWrite) -> bytes:
    """SHA-256 over the length-prefixed subject, kind, name and content."""
    hasher = hashlib.sha256()
    for part in (write.subject.encode(), write.kind.encode(), write.name.encode(), write.content):
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.digest()


def retry_key(artifact_id: uuid.UUID) -> bytes:
    """The artifact's key in the project's retry keyspace (apart from observation keys)."""
    return hashlib.sha256(f"artifact/v1:{artifact_id}".encode()).digest()


async def _lock(conn: Conn, project_id: int, artifact_id: uuid.UUID) -> None:
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"artifact:{project_id}:{artifact_id}",),
    )


async def _metadata(conn: Conn, project_id: int, artifact_id: uuid.UUID) -> Metadata:
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM artifacts WHERE project_id = %s AND id = %s",
        (project_id, artifact_id),
    )
    row = await cursor.fetchone()
    assert row is not None
    return Metadata(*row)


async def _create(conn: Conn, project_id: int, principal: uuid.UUID, write: ArtifactWrite) -> None:
    cursor = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM artifact_tombstones WHERE project_id = %(p)s AND id = %(id)s)"
        " OR EXISTS (SELECT 1 FROM retry_keys WHERE project_id = %(p)s AND key_digest = %(k)s)"
        " OR EXISTS (SELECT 1 FROM artifacts WHERE project_id = %(p)s AND id = %(id)s)",
        {"p": project_id, "id": write.id, "k": retry_key(write.id)},
    )
    used = await cursor.fetchone()
    if used is None or used[0]:
        raise ArtifactConflict
    offset = await claim_offset(conn, project_id)
    source = uuid.uuid4()
    fingerprint = digest(write)
    await conn.execute(
        "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind, occurred_at,"
        " formed_at) VALUES (%s, %s, %s, %s, 'artifact', clock_timestamp(), clock_timestamp())",
        (source, project_id, offset, write.subject),
    )
    await conn.execute(
        "INSERT INTO artifacts (id, project_id, data_subject_id, kind, name, content, version,"
        " creation_digest, last_digest, source_observation_id, authored_by)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            write.id,
            project_id,
            write.subject,
            write.kind,
            write.name,
            write.content,
            uuid.uuid4(),
            fingerprint,
            fingerprint,
            source,
            principal,
        ),
    )
    await conn.execute(
        "INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
        " VALUES (%s, %s, %s, %s)",
        (project_id, retry_key(write.id), fingerprint, source),
    )
    await recompute_formed(conn, project_id)


async def put(
    conn: Conn, project_id: int, principal: uuid.UUID, write: ArtifactWrite, allowance: Allowance
) -> tuple[Metadata, bool]:
    """Create, overwrite or replay within `allowance` (else `StorageCapacity`); returns the
    stored metadata and whether it was a replay."""
    async with conn.transaction():
        await _lock(conn, project_id, write.id)
        cursor = await conn.execute(
            "SELECT data_subject_id, kind, version, previous_version, creation_digest,"
            f" last_digest, octet_length(content) FROM artifacts WHERE {_LIVE} FOR UPDATE",
            {"p": project_id, "id": write.id},
        )
        row = await cursor.fetchone()
        fingerprint = digest(write)
        replayed = False
        if row is None:
            if write.expected_version is not None:
                raise ArtifactMissing
            await _admit(conn, project_id, allowance, None, len(write.content))
            await _create(conn, project_id, principal, write)
        else:
            subject, kind, version, previous, created, last, held = row
            if subject != write.subject or kind != write.kind:
                raise ArtifactConflict
            if write.expected_version is None:
                if bytes(created) != fingerprint:
                    raise ArtifactConflict
                replayed = True
            elif write.expected_version == version:
                await _admit(conn, project_id, allowance, held, len(write.content))
                await conn.execute(
                    "UPDATE artifacts SET name = %(n)s, content = %(c)s,"
                    " previous_version = version, version = %(v)s, last_digest = %(d)s,"
                    " authored_by = %(a)s, updated_at = clock_timestamp()"
                    " WHERE project_id = %(p)s AND id = %(id)s",
                    {
                        "n": write.name,
                        "c": write.content,
                        "v": uuid.uuid4(),
                        "d": fingerprint,
                        "a": principal,
                        "p": project_id,
                        "id": write.id,
                    },
                )
            elif write.expected_version == previous and bytes(last) == fingerprint:
                replayed = True
            else:
                raise ArtifactConflict
        return await _metadata(conn, project_id, write.id), replayed


async def get(
    conn: Conn, project_id: int, artifact_id: uuid.UUID, subject: str | None
) -> tuple[Metadata, bytes] | None:
    """A live artifact and its bytes, if it exists (and belongs to `subject` when named)."""
    cursor = await conn.execute(
        f"SELECT {_COLUMNS}, content FROM artifacts WHERE {_LIVE}"
        " AND (%(s)s::text IS NULL OR data_subject_id = %(s)s)",
        {"p": project_id, "id": artifact_id, "s": subject},
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    return Metadata(*row[:-1]), bytes(row[-1])


async def page(
    conn: Conn,
    project_id: int,
    *,
    subject: str | None,
    kind: str | None,
    name_prefix: str | None,
    after: uuid.UUID | None,
    limit: int,
) -> list[Metadata]:
    """Up to `limit + 1` live artifacts ordered by id, after the cursor, filtered."""
    pattern = None
    if name_prefix:
        escaped = name_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = escaped + "%"
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM artifacts WHERE project_id = %(p)s AND expires_at > now()"
        " AND (%(after)s::uuid IS NULL OR id > %(after)s)"
        " AND (%(s)s::text IS NULL OR data_subject_id = %(s)s)"
        " AND (%(k)s::text IS NULL OR kind = %(k)s)"
        " AND (%(like)s::text IS NULL OR name LIKE %(like)s ESCAPE '\\')"
        " ORDER BY id LIMIT %(n)s",
        {
            "p": project_id,
            "after": after,
            "s": subject,
            "k": kind,
            "like": pattern,
            "n": limit + 1,
        },
    )
    return [Metadata(*row) for row in await cursor.fetchall()]


async def delete(
    conn: Conn,
    project_id: int,
    artifact_id: uuid.UUID,
    version: uuid.UUID,
    subject: str | None,
) -> None:
    """Delete a live artifact at `version` with its source observation; its id stays used."""
    async with conn.transaction():
        await _lock(conn, project_id, artifact_id)
        cursor = await conn.execute(
            f"SELECT version, source_observation_id FROM artifacts WHERE {_LIVE}"
            " AND (%(s)s::text IS NULL OR data_subject_id = %(s)s) FOR UPDATE",
            {"p": project_id, "id": artifact_id, "s": subject},
        )
        row = await cursor.fetchone()
        if row is None:
            raise ArtifactMissing
        if row[0] != version:
            raise ArtifactConflict
        await conn.execute(
            "DELETE FROM artifacts WHERE project_id = %s AND id = %s", (project_id, artifact_id)
        )
        await conn.execute(
            "DELETE FROM observations WHERE project_id = %s AND id = %s", (project_id, row[1])
        )
        await conn.execute(
            "INSERT INTO artifact_tombstones (project_id, id) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (project_id, artifact_id),
        )
        await conn.execute(
            "UPDATE retry_keys SET observation_id = NULL WHERE project_id = %s AND key_digest = %s",
            (project_id, retry_key(artifact_id)),
        )
