"""Entities: normalized names per project and person, the observations naming them, lookup
by exact name, by spelling key and by id."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from satchel.memory.store.database import Conn


def normalize(name: str) -> str:
    """An entity's identity within a project and person: lowercase, whitespace collapsed."""
    return " ".join(name.lower().split())


@dataclass(frozen=True, slots=True)
class Entity:
    """A named thing a question can anchor on."""

    id: uuid.UUID
    name: str
    kind: str
    normalized: str


async def ensure_entity(
    conn: Conn,
    project_id: int,
    data_subject_id: str | None,
    name: str,
    observation_id: uuid.UUID,
    entity_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """The entity named `name` (created when new, with the id `entity_id` when given), recorded
    as named by `observation_id`.

    `source_observation_id` is the observation that first named it; `entity_sources` keeps
    every observation that did, so erasure can tell when none is left.
    """
    cursor = await conn.execute(
        "INSERT INTO entities (id, project_id, data_subject_id, name, normalized,"
        " source_observation_id) VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (project_id, data_subject_id, normalized)"
        " DO UPDATE SET normalized = EXCLUDED.normalized RETURNING id",
        (
            entity_id or uuid.uuid4(),
            project_id,
            data_subject_id,
            " ".join(name.split()),
            normalize(name),
            observation_id,
        ),
    )
    row = await cursor.fetchone()
    assert row is not None
    found: uuid.UUID = row[0]
    await conn.execute(
        "INSERT INTO entity_sources (entity_id, observation_id) VALUES (%s, %s) "
        "ON CONFLICT DO NOTHING",
        (found, observation_id),
    )
    return found


async def entities_named(
    conn: Conn, project_id: int, data_subject_id: str | None, names: list[str], limit: int
) -> list[Entity]:
    """Entities whose normalized name is one of `names` (already normalized), at most `limit`.

    With a person, only that person's entities; without, every entity of the project.
    """
    cursor = await conn.execute(
        "SELECT id, name, kind, normalized FROM entities "
        "WHERE project_id = %s AND normalized = ANY(%s) "
        "AND (%s::text IS NULL OR data_subject_id = %s) "
        "ORDER BY id LIMIT %s",
        (project_id, names, data_subject_id, data_subject_id, limit),
    )
    return [Entity(*row) for row in await cursor.fetchall()]


@dataclass(frozen=True, slots=True)
class Stored:
    """An entity as the inspection routes show it."""

    id: uuid.UUID
    kind: str
    name: str
    first_seen_at: datetime


async def entities_spelled_like(
    conn: Conn,
    project_id: int,
    data_subject_id: str | None,
    windows: list[str],
    per_window: int | None,
) -> list[tuple[str, Entity]]:
    """(window, entity) for entities whose spelling key is a window's, at most `per_window` of
    each window (in id order; None: all). One index probe per window (`entities_spelling`)."""
    cursor = await conn.execute(
        "SELECT w.term, e.id, e.name, e.kind, e.normalized"
        " FROM unnest(%s::text[]) AS w(term) CROSS JOIN LATERAL ("
        "  SELECT id, name, kind, normalized FROM entities"
        "  WHERE project_id = %s AND entity_name_key(normalized) = entity_name_key(w.term)"
        "  AND (%s::text IS NULL OR data_subject_id = %s) ORDER BY id LIMIT %s) e",
        (windows, project_id, data_subject_id, data_subject_id, per_window),
    )
    return [(row[0], Entity(*row[1:])) for row in await cursor.fetchall()]


async def entity_page(
    conn: Conn, project_id: int, after: uuid.UUID | None, limit: int
) -> list[Stored]:
    """The project's entities after `after`, in id order, at most `limit`."""
    cursor = await conn.execute(
        "SELECT id, kind, name, first_seen_at FROM entities"
        " WHERE project_id = %s AND (%s::uuid IS NULL OR id > %s) ORDER BY id LIMIT %s",
        (project_id, after, after, limit),
    )
    return [Stored(*row) for row in await cursor.fetchall()]


async def entity_of(conn: Conn, project_id: int, entity_id: uuid.UUID) -> Stored | None:
    """The project's entity `entity_id`, if there is one."""
    cursor = await conn.execute(
        "SELECT id, kind, name, first_seen_at FROM entities WHERE project_id = %s AND id = %s",
        (project_id, entity_id),
    )
    row = await cursor.fetchone()
    return None if row is None else Stored(*row)


async def entity_count(conn: Conn, project_id: int) -> int:
    """How many entities the project holds."""
    cursor = await conn.execute(
        "SELECT count(*) FROM entities WHERE project_id = %s", (project_id,)
    )
    row = await cursor.fetchone()
    assert row is not None
    count: int = row[0]
    return count
