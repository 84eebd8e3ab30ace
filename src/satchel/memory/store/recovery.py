"""Recovery's statements: put one fact back from its receipt (its entities, row and evidence as
they were written), then close it as formation would have. Each runs inside the caller's
transaction."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from satchel.memory.store.database import Conn
from satchel.memory.store.entities import ensure_entity
from satchel.memory.store.supersession import supersede, superseded


async def present(conn: Conn, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """The facts among `ids` that are still there."""
    cursor = await conn.execute("SELECT id FROM facts WHERE id = ANY(%s)", (ids,))
    return {row[0] for row in await cursor.fetchall()}


async def _entity(
    conn: Conn,
    project_id: int,
    subject: str | None,
    observation_id: uuid.UUID,
    entity_id: uuid.UUID,
    name: str,
) -> uuid.UUID:
    """The entity the fact named: the same one when it is still there, else the one of its name
    (created again with its former id when none has that name)."""
    cursor = await conn.execute(
        "SELECT 1 FROM entities WHERE project_id = %s AND id = %s", (project_id, entity_id)
    )
    if await cursor.fetchone() is not None:
        await conn.execute(
            "INSERT INTO entity_sources (entity_id, observation_id) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (entity_id, observation_id),
        )
        return entity_id
    return await ensure_entity(conn, project_id, subject, name, observation_id, entity_id)


async def restore(
    conn: Conn,
    project_id: int,
    subject: str | None,
    observation_id: uuid.UUID,
    fact: dict[str, Any],
) -> None:
    """Write the receipt's `fact` back: its entities, then the row as it was admitted (same id,
    statement, validity and times) and its evidence (a message gone since is left out)."""
    subject_id = await _entity(
        conn, project_id, subject, observation_id, fact["subject_entity_id"], fact["subject"]
    )
    object_id = None
    if fact["object_entity_id"] is not None and fact["object_name"] is not None:
        object_id = await _entity(
            conn, project_id, subject, observation_id, fact["object_entity_id"], fact["object_name"]
        )
    await conn.execute(
        "INSERT INTO facts (id, project_id, data_subject_id, subject_entity_id, predicate, object,"
        " object_entity_id, statement, confidence, source_role, source_observation_id, version,"
        " valid_from, known_from, recorded_at, generation_id)"
        " SELECT (x->>'id')::uuid, %(p)s, %(s)s, %(se)s, x->>'predicate', x->>'object', %(oe)s,"
        " x->>'statement', (x->>'confidence')::double precision, x->>'source_role', %(o)s,"
        " (x->>'version')::uuid, (x->>'valid_from')::timestamptz,"
        " (x->>'known_from')::timestamptz, (x->>'recorded_at')::timestamptz,"
        " (x->>'generation_id')::uuid"
        " FROM (SELECT %(x)s::jsonb AS x) given",
        {
            "p": project_id,
            "s": subject,
            "se": subject_id,
            "oe": object_id,
            "o": observation_id,
            "x": Jsonb(fact),
        },
    )
    await conn.execute(
        "INSERT INTO fact_evidence (fact_id, observation_id, message_id, source_ordinal, quote,"
        " byte_start, byte_end, authored_by, extractor_version)"
        " SELECT %(f)s, o.id, (SELECT m.id FROM messages m WHERE m.id = (e->>'message_id')::uuid),"
        " (e->>'source_ordinal')::integer, e->>'quote', (e->>'byte_start')::integer,"
        " (e->>'byte_end')::integer, (e->>'authored_by')::uuid, e->>'extractor_version'"
        " FROM jsonb_array_elements(%(e)s::jsonb) e"
        " JOIN observations o ON o.id = (e->>'observation_id')::uuid",
        {"f": fact["id"], "e": Jsonb(fact["evidence"])},
    )


async def close(
    conn: Conn, project_id: int, fact_id: uuid.UUID, observation_id: uuid.UUID, at: datetime
) -> None:
    """Close a restored single-valued fact as its formation left it: when a fact still believed
    of the same subject and predicate began later, the earliest of them supersedes it again (at
    the time that fact was admitted); else it supersedes the open ones that began earlier.
    `RecordConflict` when they overlap otherwise."""
    cursor = await conn.execute(
        "SELECT l.id, l.valid_from, l.source_observation_id, l.known_from FROM facts l"
        " JOIN facts n ON n.id = %s WHERE l.project_id = n.project_id"
        " AND l.subject_entity_id = n.subject_entity_id AND l.predicate = n.predicate"
        " AND l.data_subject_id IS NOT DISTINCT FROM n.data_subject_id AND l.id <> n.id"
        " AND l.known_until IS NULL AND l.valid_from > n.valid_from"
        " ORDER BY l.valid_from, l.id LIMIT 1",
        (fact_id,),
    )
    later = await cursor.fetchone()
    if later is None:
        await supersede(conn, project_id, fact_id, observation_id, at)
    else:
        await superseded(conn, fact_id, *later)
