"""Rebuild statements: the sources a rebuild re-forms, their generations, the human edits that
still block claims, and the project rebuild jobs (cursor, counts, status)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store.database import Conn

LOCK_NAME = "satchel.memory.rebuild"
JOB_COLUMNS = (
    "j.id, p.name AS project, j.rebuild_key, j.extractor_version, j.through_offset,"
    " j.after_offset, j.sources_rebuilt, j.sources_skipped, j.status, j.cancel_requested,"
    " j.created_at, j.updated_at"
)


@dataclass(frozen=True, slots=True)
class Source:
    """A stored observation a rebuild may re-form."""

    id: uuid.UUID
    log_offset: int
    data_subject_id: str | None
    kind: str
    formed: bool


@dataclass(frozen=True, slots=True)
class Generation:
    """One source re-formed under one setup."""

    id: uuid.UUID
    source_observation_id: uuid.UUID
    extractor_version: str
    applied_at: datetime
    facts_admitted: int
    facts_retired: int


@dataclass(frozen=True, slots=True)
class Job:
    """A project rebuild: its setup, where the log ended when it began, its cursor and counts."""

    id: uuid.UUID
    project: str
    rebuild_key: uuid.UUID
    extractor_version: str
    through_offset: int | None
    after_offset: int | None
    sources_rebuilt: int
    sources_skipped: int
    status: str
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Blocked:
    """A claim a human edit of a source's fact still blocks: a correction blocks the subject and
    predicate (`object` None), a retraction its own triple."""

    subject: str
    predicate: str
    object: str | None


async def source(conn: Conn, project_id: int, observation_id: uuid.UUID) -> Source | None:
    """The project's observation `observation_id`, or None (unknown, or erased)."""
    async with conn.cursor(row_factory=class_row(Source)) as cursor:
        await cursor.execute(
            "SELECT id, log_offset, data_subject_id, kind, formed_at IS NOT NULL AS formed"
            " FROM observations WHERE project_id = %s AND id = %s",
            (project_id, observation_id),
        )
        return await cursor.fetchone()


async def sources_after(
    conn: Conn, project_id: int, after: int | None, through: int, limit: int
) -> list[Source]:
    """Up to `limit` of the project's observations after offset `after`, through `through`."""
    async with conn.cursor(row_factory=class_row(Source)) as cursor:
        await cursor.execute(
            "SELECT id, log_offset, data_subject_id, kind, formed_at IS NOT NULL AS formed"
            " FROM observations WHERE project_id = %s AND log_offset > %s AND log_offset <= %s"
            " ORDER BY log_offset LIMIT %s",
            (project_id, -1 if after is None else after, through, limit),
        )
        return await cursor.fetchall()


async def generation(
    conn: Conn, project_id: int, key: uuid.UUID, observation_id: uuid.UUID
) -> Generation | None:
    """The generation the rebuild `key` published for the source, if it did."""
    async with conn.cursor(row_factory=class_row(Generation)) as cursor:
        await cursor.execute(
            "SELECT id, source_observation_id, extractor_version, applied_at, facts_admitted,"
            " facts_retired FROM fact_generations"
            " WHERE project_id = %s AND rebuild_key = %s AND source_observation_id = %s",
            (project_id, key, observation_id),
        )
        return await cursor.fetchone()


async def key_sources(conn: Conn, project_id: int, key: uuid.UUID) -> list[uuid.UUID]:
    """The sources the rebuild `key` published a generation for."""
    cursor = await conn.execute(
        "SELECT source_observation_id FROM fact_generations"
        " WHERE project_id = %s AND rebuild_key = %s",
        (project_id, key),
    )
    return [row[0] for row in await cursor.fetchall()]


async def add_generation(
    conn: Conn,
    project_id: int,
    key: uuid.UUID,
    observation_id: uuid.UUID,
    version: str,
    at: datetime,
) -> uuid.UUID:
    """A new generation of the source, its counts written once it is published."""
    generation_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO fact_generations (id, project_id, source_observation_id, rebuild_key,"
        " extractor_version, applied_at, facts_admitted, facts_retired)"
        " VALUES (%s, %s, %s, %s, %s, %s, 0, 0)",
        (generation_id, project_id, observation_id, key, version, at),
    )
    return generation_id


async def count_generation(
    conn: Conn, generation_id: uuid.UUID, observation_id: uuid.UUID
) -> Generation:
    """Link the source's new current facts to the generation and write its counts."""
    cursor = await conn.execute(
        "UPDATE facts SET generation_id = %(g)s WHERE source_observation_id = %(o)s"
        " AND known_until IS NULL AND NOT authored AND generation_id IS NULL",
        {"g": generation_id, "o": observation_id},
    )
    admitted = cursor.rowcount
    async with conn.cursor(row_factory=class_row(Generation)) as rows:
        await rows.execute(
            "UPDATE fact_generations SET facts_admitted = %(a)s, facts_retired ="
            " (SELECT count(*) FROM facts WHERE reinterpreted_by = %(g)s) WHERE id = %(g)s"
            " RETURNING id, source_observation_id, extractor_version, applied_at,"
            " facts_admitted, facts_retired",
            {"a": admitted, "g": generation_id},
        )
        row = await rows.fetchone()
    assert row is not None
    return row


async def believed_facts(conn: Conn, observation_id: uuid.UUID) -> list[uuid.UUID]:
    """The formed (not authored) facts of the source still believed, locked in id order."""
    cursor = await conn.execute(
        "SELECT id FROM facts WHERE source_observation_id = %s AND known_until IS NULL"
        " AND NOT authored ORDER BY id FOR UPDATE",
        (observation_id,),
    )
    return [row[0] for row in await cursor.fetchall()]


async def blocked_claims(conn: Conn, observation_id: uuid.UUID) -> list[Blocked]:
    """What the corrections and retractions of the source's facts still block."""
    async with conn.cursor(row_factory=class_row(Blocked)) as cursor:
        await cursor.execute(
            "SELECT s.normalized AS subject, f.predicate,"
            " CASE WHEN r.replacement_record_id IS NULL THEN lower(f.object) END AS object"
            " FROM facts f JOIN fact_retractions r ON r.fact_id = f.id"
            " JOIN entities s ON s.id = f.subject_entity_id"
            " WHERE f.source_observation_id = %s",
            (observation_id,),
        )
        return await cursor.fetchall()


async def forget_rejections(conn: Conn, observation_id: uuid.UUID) -> None:
    """Drop the claims an earlier setup refused for the source (the new setup writes its own)."""
    await conn.execute("DELETE FROM rejected_claims WHERE observation_id = %s", (observation_id,))


async def mark_reformed(
    conn: Conn, observation_id: uuid.UUID, model: str | None, prompt: str | None, code: str
) -> None:
    """The source is now formed by this setup."""
    await conn.execute(
        "UPDATE observations SET extractor_model = %s, extractor_prompt = %s, extractor_code = %s"
        " WHERE id = %s",
        (model, prompt, code, observation_id),
    )


async def _one_job(conn: Conn, condition: str, params: tuple[object, ...]) -> Job | None:
    """The first of the project's jobs that `condition` (on `j`, ordering included) selects."""
    async with conn.cursor(row_factory=class_row(Job)) as cursor:
        await cursor.execute(
            f"SELECT {JOB_COLUMNS} FROM rebuild_jobs j JOIN projects p ON p.id = j.project_id"
            f" WHERE j.project_id = %s AND {condition}",
            params,
        )
        return await cursor.fetchone()


async def job(conn: Conn, project_id: int, key: uuid.UUID) -> Job | None:
    return await _one_job(conn, "j.rebuild_key = %s", (project_id, key))


async def active_job(conn: Conn, project_id: int) -> Job | None:
    return await _one_job(conn, "j.status = 'active'", (project_id,))


async def latest_job(conn: Conn, project_id: int) -> Job | None:
    return await _one_job(conn, "true ORDER BY j.created_at DESC, j.id LIMIT 1", (project_id,))


async def start_job(conn: Conn, project_id: int, key: uuid.UUID, version: str) -> bool:
    """Record a new active job ending at the log's present end; false when the project already
    has an active one (the caller's transaction is then left as it was)."""
    cursor = await conn.execute(
        "INSERT INTO rebuild_jobs (id, project_id, rebuild_key, extractor_version, through_offset)"
        " SELECT %s, p.id, %s, %s, p.stored FROM projects p WHERE p.id = %s"
        " ON CONFLICT DO NOTHING",
        (uuid.uuid4(), key, version, project_id),
    )
    return cursor.rowcount == 1


async def advance(
    conn: Conn, job_id: uuid.UUID, offset: int, *, rebuilt: int, skipped: int
) -> None:
    """Move the job's cursor past `offset`, adding to its counts."""
    await conn.execute(
        "UPDATE rebuild_jobs SET after_offset = %s, sources_rebuilt = sources_rebuilt + %s,"
        " sources_skipped = sources_skipped + %s, updated_at = now() WHERE id = %s",
        (offset, rebuilt, skipped, job_id),
    )


async def finish(conn: Conn, job_id: uuid.UUID, status: str) -> None:
    """Set an active job's final status (`completed` or `cancelled`)."""
    await conn.execute(
        "UPDATE rebuild_jobs SET status = %s, updated_at = now()"
        " WHERE id = %s AND status = 'active'",
        (status, job_id),
    )


async def request_cancel(conn: Conn, job_id: uuid.UUID) -> None:
    await conn.execute(
        "UPDATE rebuild_jobs SET cancel_requested = true, updated_at = now()"
        " WHERE id = %s AND status = 'active'",
        (job_id,),
    )


async def try_lock_job(conn: Conn, project_id: int) -> bool:
    """Take the project's rebuild lock for this session, if no other runner holds it."""
    cursor = await conn.execute(
        "SELECT pg_try_advisory_lock(%s::int, hashtext(%s))", (project_id, LOCK_NAME)
    )
    row = await cursor.fetchone()
    return bool(row and row[0])


async def unlock_job(conn: Conn, project_id: int) -> None:
    await conn.execute("SELECT pg_advisory_unlock(%s::int, hashtext(%s))", (project_id, LOCK_NAME))


async def rebuild_progress(conn: Conn, project_id: int) -> dict[str, int | None] | None:
    """How far the project's active rebuild got (offsets and counts only), or None."""
    cursor = await conn.execute(
        "SELECT COALESCE(after_offset + 1, 0), through_offset, sources_rebuilt, sources_skipped"
        " FROM rebuild_jobs WHERE project_id = %s AND status = 'active'",
        (project_id,),
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    return {
        "reinterpreted_through": row[0],
        "reinterpreting_through": row[1],
        "sources_acknowledged": row[2],
        "sources_skipped": row[3],
    }
