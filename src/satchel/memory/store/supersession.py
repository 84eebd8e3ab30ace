"""How a fact changes once written: its present version kept in its history and a new version
made; and where a fact of a single-valued predicate (one value at a time) ends when another for
the same subject begins."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from satchel.memory.store.database import Conn

__all__ = ["RecordConflict", "change", "reinterpret", "settle", "supersede", "superseded"]


class RecordConflict(Exception):
    """A single-valued fact would overlap one still believed that it cannot supersede."""


async def change(
    conn: Conn,
    fact_id: uuid.UUID,
    at: datetime,
    ended_by: uuid.UUID | None,
    assignments: str,
    params: dict[str, Any],
) -> uuid.UUID:
    """Keep the fact's present version in its history, then apply `assignments` and re-version."""
    await conn.execute(
        "INSERT INTO fact_history (id, fact_id, valid_from, valid_until, known_from, known_until,"
        " ended_by_observation_id) SELECT %(h)s, f.id, f.valid_from, f.valid_until,"
        " COALESCE((SELECT max(h.known_until) FROM fact_history h WHERE h.fact_id = f.id),"
        " f.known_from), %(at)s, %(by)s FROM facts f WHERE f.id = %(id)s",
        {"h": uuid.uuid4(), "at": at, "by": ended_by, "id": fact_id},
    )
    version = uuid.uuid4()
    await conn.execute(
        f"UPDATE facts SET {assignments}, version = %(v)s WHERE id = %(id)s",
        {**params, "v": version, "id": fact_id, "at": at},
    )
    return version


async def _overlapping(
    conn: Conn, project_id: int, fact_id: uuid.UUID
) -> tuple[datetime, list[tuple[uuid.UUID, datetime, datetime | None]]]:
    """`fact_id`'s start, and the facts still believed of its subject and single-valued
    predicate whose validity overlaps it (id, start, end), in order of start; they are locked,
    behind a lock on the subject and predicate."""
    cursor = await conn.execute(
        "SELECT subject_entity_id, predicate, valid_from FROM facts WHERE id = %s", (fact_id,)
    )
    row = await cursor.fetchone()
    assert row is not None
    entity_id, predicate, valid_from = row
    await conn.execute(
        "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (project_id, f"{entity_id}/{predicate}")
    )
    cursor = await conn.execute(
        "SELECT o.id, o.valid_from, o.valid_until FROM facts o JOIN facts n ON n.id = %(n)s"
        " WHERE o.project_id = n.project_id AND o.subject_entity_id = n.subject_entity_id"
        " AND o.predicate = n.predicate AND o.data_subject_id IS NOT DISTINCT FROM"
        " n.data_subject_id AND o.id <> n.id AND o.known_until IS NULL"
        " AND (o.valid_until IS NULL OR o.valid_until > n.valid_from)"
        " ORDER BY o.valid_from, o.id FOR UPDATE OF o",
        {"n": fact_id},
    )
    return valid_from, list(await cursor.fetchall())


async def supersede(
    conn: Conn, project_id: int, fact_id: uuid.UUID, observation_id: uuid.UUID, at: datetime
) -> None:
    """Close the validity of the current fact of a single-valued predicate for the same subject
    where the new fact begins, when it began earlier and is still open.

    Any other fact still believed whose validity overlaps the new one's (one that begins at the
    same time or later, or an already closed range reaching past the new start) is out of order:
    `RecordConflict` before any of them changes (the caller's transaction must roll back).
    """
    valid_from, overlapping = await _overlapping(conn, project_id, fact_id)
    if any(until is not None or begun >= valid_from for _, begun, until in overlapping):
        raise RecordConflict
    for old_id, _, _ in overlapping:
        await superseded(conn, old_id, fact_id, valid_from, observation_id, at)


async def superseded(
    conn: Conn,
    fact_id: uuid.UUID,
    by: uuid.UUID,
    valid_until: datetime,
    observation_id: uuid.UUID,
    at: datetime,
) -> None:
    """Close the validity of `fact_id` at `valid_until`, superseded by `by` (a change at `at`
    that `observation_id` made)."""
    await change(
        conn,
        fact_id,
        at,
        observation_id,
        "valid_until = %(from)s, superseded_by = %(by)s",
        {"by": by, "from": valid_until},
    )


async def settle(
    conn: Conn, project_id: int, fact_id: uuid.UUID, observation_id: uuid.UUID, at: datetime
) -> None:
    """Place a re-formed fact of a single-valued predicate among the facts still believed: an
    earlier one overlapping it ends where it begins (as `supersede` does); when one begins at
    the same time or later, the re-formed fact ends where the first of those begins."""
    valid_from, overlapping = await _overlapping(conn, project_id, fact_id)
    later = [(begun, other) for other, begun, _ in overlapping if begun >= valid_from]
    for other, begun, _ in overlapping:
        if begun < valid_from:
            await superseded(conn, other, fact_id, valid_from, observation_id, at)
    if later:
        begun, other = later[0]
        await conn.execute(
            "UPDATE facts SET valid_until = %s, superseded_by = %s WHERE id = %s",
            (begun, other, fact_id),
        )


async def reinterpret(
    conn: Conn, fact_id: uuid.UUID, generation_id: uuid.UUID, at: datetime
) -> None:
    """Retire a formed fact a rebuild replaced: close what is known of it now (its validity and
    its history are kept, so earlier knowledge still reads it) and link the generation."""
    await change(
        conn,
        fact_id,
        at,
        None,
        "known_until = %(at)s, reinterpreted_by = %(g)s",
        {"g": generation_id},
    )
