"""Entity purge's statements: withdraw one entity and the facts standing on it, keeping the
turns' words (observations and messages stay). Each runs inside the caller's transaction."""

from __future__ import annotations

import uuid
from typing import Any

from satchel.memory.store import receipts
from satchel.memory.store.database import Conn

# The facts whose subject or object is the entity.
ON_ENTITY = (
    "(SELECT f.id FROM facts f WHERE f.project_id = %(p)s"
    " AND (f.subject_entity_id = %(e)s OR f.object_entity_id = %(e)s))"
)

# What goes, in order: what refers to a fact before the fact, the facts before their entity.
REMOVE = (
    ("fact_evidence", f"DELETE FROM fact_evidence WHERE fact_id IN {ON_ENTITY}"),
    ("fact_history", f"DELETE FROM fact_history WHERE fact_id IN {ON_ENTITY}"),
    ("record_retraction", f"DELETE FROM fact_retractions WHERE fact_id IN {ON_ENTITY}"),
    ("fact", f"DELETE FROM facts WHERE id IN {ON_ENTITY}"),
    ("entity_source", "DELETE FROM entity_sources WHERE entity_id = %(e)s"),
    ("entity", "DELETE FROM entities WHERE project_id = %(p)s AND id = %(e)s"),
)
# References surviving rows hold to the facts that go, cut before they go.
DETACH = (
    f"UPDATE facts SET superseded_by = NULL WHERE superseded_by IN {ON_ENTITY}",
    f"UPDATE fact_retractions SET replacement_record_id = NULL"
    f" WHERE replacement_record_id IN {ON_ENTITY}",
)
# What still refers to the entity afterwards, counted in the same transaction.
RESIDUAL = (
    ("fact", f"SELECT count(*) FROM {ON_ENTITY} x"),
    ("fact_evidence", f"SELECT count(*) FROM fact_evidence WHERE fact_id IN {ON_ENTITY}"),
    ("entity_source", "SELECT count(*) FROM entity_sources WHERE entity_id = %(e)s"),
    ("entity", "SELECT count(*) FROM entities WHERE project_id = %(p)s AND id = %(e)s"),
)
# Whom the purge costs: distinct people behind the facts, facts from turns of nobody, the turns.
CLAIMANTS = (
    "SELECT count(DISTINCT o.data_subject_id), count(DISTINCT f.id) FILTER"
    " (WHERE o.data_subject_id IS NULL), count(DISTINCT o.id)"
    " FROM facts f JOIN fact_evidence v ON v.fact_id = f.id"
    " JOIN observations o ON o.id = v.observation_id"
    f" WHERE f.id IN {ON_ENTITY}"
)


async def _one(conn: Conn, sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    cursor = await conn.execute(sql, params)
    row = await cursor.fetchone()
    assert row is not None
    return tuple(row)


async def lock_entity(conn: Conn, project_id: int, entity_id: uuid.UUID) -> str | None:
    """The name of the project's entity `entity_id`, its row locked; None when it has none."""
    cursor = await conn.execute(
        "SELECT name FROM entities WHERE project_id = %(p)s AND id = %(e)s FOR UPDATE",
        {"p": project_id, "e": entity_id},
    )
    found = await cursor.fetchone()
    return None if found is None else str(found[0])


async def claimants(conn: Conn, project_id: int, entity_id: uuid.UUID) -> tuple[int, int, int]:
    """Whom withdrawing the entity costs: distinct people behind its facts, its facts from turns
    of nobody, and the turns its facts came from."""
    subjects, unattributed, turns = await _one(conn, CLAIMANTS, {"p": project_id, "e": entity_id})
    return subjects, unattributed, turns


async def withdraw(
    conn: Conn, project_id: int, entity_id: uuid.UUID
) -> tuple[dict[str, int], dict[str, int]]:
    """Delete the entity and the facts standing on it (cutting what refers to them first, and
    marking them withdrawn in their receipts);
    the rows removed per kind, and those still referring to it afterwards."""
    params = {"p": project_id, "e": entity_id}
    await receipts.withdraw(conn, ON_ENTITY, params)
    for sql in DETACH:
        await conn.execute(sql, params)
    removed: dict[str, int] = {}
    for kind, sql in REMOVE:
        removed[kind] = (await conn.execute(sql, params)).rowcount
    residual = {kind: (await _one(conn, sql, params))[0] for kind, sql in RESIDUAL}
    return removed, residual
