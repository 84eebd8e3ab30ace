"""Entity purge: withdraw one entity and the facts standing on it, keeping the turns' words.

A purge is for the system's own mistake (a name read as an entity that is not one, two people
merged into one), not for a person's data: the observations and messages stay, so the evidence of
the mistake stays. The preview is the purge itself, run in full and rolled back, so what a caller
approves is exactly what a confirmed call does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from satchel.memory.store.database import Conn
from satchel.memory.store.facts import lock_log

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


@dataclass(frozen=True, slots=True)
class Purged:
    """What a purge did (or, previewed, would do): rows removed and left per kind, who it cost."""

    entity_id: uuid.UUID
    canonical_name: str
    previewed: bool
    removed: dict[str, int]
    residual: dict[str, int]
    contributing_subjects: int
    claims_from_unattributed_turns: int
    source_turns_kept: int
    completed_at: datetime


async def _one(conn: Conn, sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    cursor = await conn.execute(sql, params)
    row = await cursor.fetchone()
    assert row is not None
    return tuple(row)


async def purge_entity(
    conn: Conn, project_id: int, entity_id: uuid.UUID, *, confirm: bool
) -> Purged | None:
    """Purge the project's entity `entity_id` (None when it has none), committed only when
    `confirm`ed; otherwise the same transaction is rolled back."""
    params = {"p": project_id, "e": entity_id}
    async with conn.transaction(force_rollback=not confirm):
        # The project's log lock first, as erasures, corrections and appends take it, so a purge
        # waits for them (and they for it) instead of deadlocking.
        await lock_log(conn, project_id)
        cursor = await conn.execute(
            "SELECT name FROM entities WHERE project_id = %(p)s AND id = %(e)s FOR UPDATE", params
        )
        found = await cursor.fetchone()
        if found is None:
            return None
        subjects, unattributed, turns = await _one(conn, CLAIMANTS, params)
        for sql in DETACH:
            await conn.execute(sql, params)
        removed: dict[str, int] = {}
        for kind, sql in REMOVE:
            removed[kind] = (await conn.execute(sql, params)).rowcount
        residual = {kind: (await _one(conn, sql, params))[0] for kind, sql in RESIDUAL}
    return Purged(
        entity_id=entity_id,
        canonical_name=found[0],
        previewed=not confirm,
        removed=removed,
        residual=residual,
        contributing_subjects=subjects,
        claims_from_unattributed_turns=unattributed,
        source_turns_kept=turns,
        completed_at=datetime.now(UTC),
    )
