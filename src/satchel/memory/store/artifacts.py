"""Artifacts' statements: the rows of opaque per-subject objects, their source observations,
retry keys and tombstones, and the project's usage. Each runs inside the caller's transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from satchel.memory.domain import StoredArtifact
from satchel.memory.store.database import Conn
from satchel.memory.store.log import claim_offset, recompute_formed


@dataclass(frozen=True, slots=True)
class ArtifactWrite:
    """A put's values: `expected_version` None creates (or replays the creation)."""

    id: uuid.UUID
    subject: str
    kind: str
    name: str
    content: bytes
    expected_version: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class Current:
    """A live artifact as a put finds it, locked: its owner, kind, versions, the digests of its
    creation and of its last write, and how many bytes it holds."""

    subject: str
    kind: str
    version: uuid.UUID
    previous_version: uuid.UUID | None
    creation_digest: bytes
    last_digest: bytes
    bytes: int


_COLUMNS = (
    "id, version, data_subject_id, kind, name, source_observation_id, octet_length(content),"
    " authored_by, created_at, updated_at, expires_at"
)
_LIVE = "project_id = %(p)s AND id = %(id)s AND expires_at > now()"


async def lock(conn: Conn, project_id: int, artifact_id: uuid.UUID) -> None:
    """Take the artifact's transaction lock (held by a put or delete of the same id)."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"artifact:{project_id}:{artifact_id}",),
    )


async def current(conn: Conn, project_id: int, artifact_id: uuid.UUID) -> Current | None:
    """The live artifact `artifact_id`, its row locked, or None."""
    cursor = await conn.execute(
        "SELECT data_subject_id, kind, version, previous_version, creation_digest,"
        f" last_digest, octet_length(content) FROM artifacts WHERE {_LIVE} FOR UPDATE",
        {"p": project_id, "id": artifact_id},
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    subject, kind, version, previous, created, last, held = row
    return Current(subject, kind, version, previous, bytes(created), bytes(last), held)


async def usage(conn: Conn, project_id: int) -> tuple[int, int]:
    """How many live artifacts the project holds and their bytes, after taking the project's
    usage lock (so growing writes take turns) and deleting its expired artifacts."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"artifact-usage:{project_id}",)
    )
    await remove_expired(conn, project_id)
    cursor = await conn.execute(
        "SELECT count(*), coalesce(sum(octet_length(content)), 0) FROM artifacts"
        " WHERE project_id = %s AND expires_at > now()",
        (project_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    objects, held = row
    return objects, held


async def remove_expired(conn: Conn, project_id: int, at: datetime | None = None) -> int:
    """Delete the project's artifacts expired at `at` (default: the transaction's start) as
    `remove` deletes one: with their source observations, their ids tombstoned, their retry keys
    kept. Rows another transaction holds are skipped, never waited for; a later put or sweep
    removes them. Returns how many went."""
    cursor = await conn.execute(
        "SELECT a.id, a.source_observation_id FROM artifacts a"
        " JOIN observations o ON o.id = a.source_observation_id"
        " WHERE a.project_id = %s AND a.expires_at <= coalesce(%s::timestamptz, now())"
        " FOR UPDATE SKIP LOCKED",
        (project_id, at),
    )
    expired = await cursor.fetchall()
    if not expired:
        return 0
    ids = [artifact_id for artifact_id, _ in expired]
    sources = [source for _, source in expired]
    # The artifacts' rows go with their sources (ON DELETE CASCADE).
    await conn.execute(
        "DELETE FROM observations WHERE project_id = %s AND id = ANY(%s)", (project_id, sources)
    )
    await conn.execute(
        "INSERT INTO artifact_tombstones (project_id, id) SELECT %s, unnest(%s::uuid[])"
        " ON CONFLICT DO NOTHING",
        (project_id, ids),
    )
    await conn.execute(
        "UPDATE retry_keys SET observation_id = NULL"
        " WHERE project_id = %s AND observation_id = ANY(%s)",
        (project_id, sources),
    )
    return len(expired)


async def metadata(conn: Conn, project_id: int, artifact_id: uuid.UUID) -> StoredArtifact:
    """The artifact `artifact_id` (which exists) without its bytes."""
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM artifacts WHERE project_id = %s AND id = %s",
        (project_id, artifact_id),
    )
    row = await cursor.fetchone()
    assert row is not None
    return StoredArtifact(*row)


async def used(conn: Conn, project_id: int, artifact_id: uuid.UUID, key: bytes) -> bool:
    """Whether the id was ever used: tombstoned, its retry key `key` kept, or a row (expired
    ones included)."""
    cursor = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM artifact_tombstones WHERE project_id = %(p)s AND id = %(id)s)"
        " OR EXISTS (SELECT 1 FROM retry_keys WHERE project_id = %(p)s AND key_digest = %(k)s)"
        " OR EXISTS (SELECT 1 FROM artifacts WHERE project_id = %(p)s AND id = %(id)s)",
        {"p": project_id, "id": artifact_id, "k": key},
    )
    row = await cursor.fetchone()
    return row is None or bool(row[0])


async def create(
    conn: Conn,
    project_id: int,
    principal: uuid.UUID,
    write: ArtifactWrite,
    fingerprint: bytes,
    key: bytes,
) -> None:
    """Write a new artifact with its source observation (kind `artifact`, formed at once, which
    claims a log offset) and its retry key `key`."""
    offset = await claim_offset(conn, project_id)
    source = uuid.uuid4()
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
        (project_id, key, fingerprint, source),
    )
    await recompute_formed(conn, project_id)


async def overwrite(
    conn: Conn, project_id: int, principal: uuid.UUID, write: ArtifactWrite, fingerprint: bytes
) -> None:
    """Replace the artifact's name and bytes under a new version, keeping the one replaced."""
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


async def get(
    conn: Conn, project_id: int, artifact_id: uuid.UUID, subject: str | None
) -> tuple[StoredArtifact, bytes] | None:
    """A live artifact and its bytes, if it exists (and belongs to `subject` when named)."""
    cursor = await conn.execute(
        f"SELECT {_COLUMNS}, content FROM artifacts WHERE {_LIVE}"
        " AND (%(s)s::text IS NULL OR data_subject_id = %(s)s)",
        {"p": project_id, "id": artifact_id, "s": subject},
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    return StoredArtifact(*row[:-1]), bytes(row[-1])


async def page(
    conn: Conn,
    project_id: int,
    *,
    subject: str | None,
    kind: str | None,
    name_prefix: str | None,
    after: uuid.UUID | None,
    limit: int,
) -> list[StoredArtifact]:
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
    return [StoredArtifact(*row) for row in await cursor.fetchall()]


async def live_version(
    conn: Conn, project_id: int, artifact_id: uuid.UUID, subject: str | None
) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The live artifact's version and source observation, its row locked (None when there is
    no such artifact, or it is not `subject`'s when one is named)."""
    cursor = await conn.execute(
        f"SELECT version, source_observation_id FROM artifacts WHERE {_LIVE}"
        " AND (%(s)s::text IS NULL OR data_subject_id = %(s)s) FOR UPDATE",
        {"p": project_id, "id": artifact_id, "s": subject},
    )
    row = await cursor.fetchone()
    return None if row is None else (row[0], row[1])


async def remove(
    conn: Conn, project_id: int, artifact_id: uuid.UUID, source: uuid.UUID, key: bytes
) -> None:
    """Delete the artifact and its source observation, tombstone its id and keep its retry key
    `key` without the observation."""
    await conn.execute(
        "DELETE FROM artifacts WHERE project_id = %s AND id = %s", (project_id, artifact_id)
    )
    await conn.execute(
        "DELETE FROM observations WHERE project_id = %s AND id = %s", (project_id, source)
    )
    await conn.execute(
        "INSERT INTO artifact_tombstones (project_id, id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (project_id, artifact_id),
    )
    await conn.execute(
        "UPDATE retry_keys SET observation_id = NULL WHERE project_id = %s AND key_digest = %s",
        (project_id, key),
    )
