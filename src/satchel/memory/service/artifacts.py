"""Artifacts: opaque per-subject bytes with random versions, replayable writes and tombstoned ids.

Creating an artifact writes its source observation, which claims a log offset. An id once used
stays used: after a delete (a tombstone) or an erasure (the retry key outlives the rows), putting
it again is a conflict. A write that would take the project past its allowance (one object's
bytes, all objects' bytes, how many) is refused; one that does not grow what the project holds
never is, so a lowered allowance still lets objects shrink. Expired artifacts hold no room: a
growing write deletes them, as a delete would, before it counts.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from satchel.memory.config import MemorySettings
from satchel.memory.domain import AllowanceFull, Conflict, NotFound, StoredArtifact
from satchel.memory.store import artifacts
from satchel.memory.store.artifacts import ArtifactWrite
from satchel.memory.store.database import Conn


@dataclass(frozen=True, slots=True)
class Allowance:
    """What one project's live artifacts may hold: bytes of one object, bytes of all, how many."""

    object_bytes: int
    total_bytes: int
    objects: int

    @classmethod
    def of(cls, settings: MemorySettings) -> Allowance:
        return cls(
            settings.artifact_object_bytes, settings.artifact_bytes, settings.artifact_objects
        )


def _conflict() -> Conflict:
    return Conflict(
        "artifact identity or version conflicts; inspect the current object", "artifact_conflict"
    )


def _missing() -> NotFound:
    return NotFound("artifact not found")


def _full(reason: str) -> AllowanceFull:
    # No Retry-After: waiting frees nothing; deleting artifacts or a larger allowance does.
    return AllowanceFull(f"artifact allowance is full: {reason}", "storage_capacity")


def _digest(write: ArtifactWrite) -> bytes:
    """The write's fingerprint: SHA-256 over the length-prefixed subject, kind, name and content."""
    hasher = hashlib.sha256()
    for part in (write.subject.encode(), write.kind.encode(), write.name.encode(), write.content):
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.digest()


def _retry_key(artifact_id: uuid.UUID) -> bytes:
    """The artifact's key in the project's retry keyspace (apart from observation keys)."""
    return hashlib.sha256(f"artifact/v1:{artifact_id}".encode()).digest()


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
        raise _full(f"one artifact may hold {allowance.object_bytes} bytes")
    objects, held = await artifacts.usage(conn, project_id)
    if creating and objects + 1 > allowance.objects:
        raise _full(f"the project may hold {allowance.objects} artifacts")
    if held + grown > allowance.total_bytes:
        raise _full(f"the project's artifacts may hold {allowance.total_bytes} bytes")


async def put(
    pool: AsyncConnectionPool,
    settings: MemorySettings,
    project_id: int,
    principal: uuid.UUID,
    artifact_id: uuid.UUID,
    *,
    subject: str,
    kind: str,
    name: str,
    content: bytes,
    expected_version: uuid.UUID | None,
) -> tuple[StoredArtifact, bool]:
    """Create (`expected_version` None), overwrite or replay within the project's allowance;
    the stored artifact and whether the put was a replay."""
    write = ArtifactWrite(artifact_id, subject, kind, name, content, expected_version)
    allowance = Allowance.of(settings)
    async with pool.connection() as conn, conn.transaction():
        await artifacts.lock(conn, project_id, write.id)
        found = await artifacts.current(conn, project_id, write.id)
        fingerprint = _digest(write)
        replayed = False
        if found is None:
            if write.expected_version is not None:
                raise _missing()
            await _admit(conn, project_id, allowance, None, len(write.content))
            key = _retry_key(write.id)
            if await artifacts.used(conn, project_id, write.id, key):
                raise _conflict()
            await artifacts.create(conn, project_id, principal, write, fingerprint, key)
        elif found.subject != write.subject or found.kind != write.kind:
            raise _conflict()
        elif write.expected_version is None:
            if found.creation_digest != fingerprint:
                raise _conflict()
            replayed = True
        elif write.expected_version == found.version:
            await _admit(conn, project_id, allowance, found.bytes, len(write.content))
            await artifacts.overwrite(conn, project_id, principal, write, fingerprint)
        elif write.expected_version == found.previous_version and found.last_digest == fingerprint:
            replayed = True
        else:
            raise _conflict()
        return await artifacts.metadata(conn, project_id, write.id), replayed


async def get(
    pool: AsyncConnectionPool, project_id: int, artifact_id: uuid.UUID, subject: str | None
) -> tuple[StoredArtifact, bytes]:
    """A live artifact and its bytes (it must belong to `subject` when one is named)."""
    async with pool.connection() as conn:
        found = await artifacts.get(conn, project_id, artifact_id, subject)
    if found is None:
        raise _missing()
    return found


async def page(
    pool: AsyncConnectionPool,
    project_id: int,
    *,
    subject: str | None,
    kind: str | None,
    name_prefix: str | None,
    after: uuid.UUID | None,
    limit: int,
) -> list[StoredArtifact]:
    """Up to `limit + 1` live artifacts ordered by id, after the cursor, filtered (one more than
    a page tells there is a next)."""
    async with pool.connection() as conn:
        return await artifacts.page(
            conn,
            project_id,
            subject=subject,
            kind=kind,
            name_prefix=name_prefix,
            after=after,
            limit=limit,
        )


async def delete(
    pool: AsyncConnectionPool,
    project_id: int,
    artifact_id: uuid.UUID,
    version: uuid.UUID,
    subject: str | None,
) -> None:
    """Delete a live artifact at `version` with its source observation; its id stays used."""
    async with pool.connection() as conn, conn.transaction():
        await artifacts.lock(conn, project_id, artifact_id)
        found = await artifacts.live_version(conn, project_id, artifact_id, subject)
        if found is None:
            raise _missing()
        stored, source = found
        if stored != version:
            raise _conflict()
        await artifacts.remove(conn, project_id, artifact_id, source, _retry_key(artifact_id))
