"""Context assembly's reads: a subject's formed turns by offset, the segments that can stand in for
older turns, which offset ranges hold a turn, and the texts of what was kept."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from satchel.memory.domain import MAX_LEVEL
from satchel.memory.store.database import Conn

_FORMED_TURNS = (
    "SELECT o.id, o.log_offset, o.occurred_at,"
    " (SELECT COALESCE(sum(length(m.role) + length(m.content)), 0) FROM messages m"
    "  WHERE m.observation_id = o.id)::int"
    " FROM observations o"
    " WHERE o.project_id = %(p)s AND o.data_subject_id = %(s)s AND o.kind = 'turn'"
    " AND o.formed_at IS NOT NULL AND o.parked_at IS NULL"
)


@dataclass(frozen=True, slots=True)
class Turn:
    """A formed turn: its source, offset, time, size and (once chosen) its messages."""

    id: uuid.UUID
    offset: int
    occurred_at: datetime
    size: int
    messages: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Segment:
    """A summary covering the offsets `start..end` (inclusive) of one subject's history."""

    id: uuid.UUID
    level: int
    start: int
    end: int
    covered: int
    size: int
    summary: str = ""


async def formed_turns(
    conn: Conn, project_id: int, subject: str, below: int | None, above: int, limit: int
) -> list[Turn]:
    """Formed turns of the subject with offsets in (above, below), newest first."""
    cursor = await conn.execute(
        _FORMED_TURNS + " AND o.log_offset > %(a)s"
        " AND (%(b)s::bigint IS NULL OR o.log_offset < %(b)s)"
        " ORDER BY o.log_offset DESC LIMIT %(n)s",
        {"p": project_id, "s": subject, "a": above, "b": below, "n": limit},
    )
    return [Turn(row[0], row[1], row[2], row[3]) for row in await cursor.fetchall()]


async def segments_below(conn: Conn, project_id: int, subject: str, below: int) -> list[Segment]:
    """The subject's segments that can stand in for turns older than `below`.

    Only segments starting below it can cover an older turn, and a segment whose older part
    lies inside a single higher-level segment is never shown (nor changes what is covered), so
    it is left in the database: a rolled-up history reads a handful of rows, not all of them.
    """
    cursor = await conn.execute(
        "SELECT id, level, from_offset, to_offset, covered, characters FROM ("
        " SELECT *, CASE level"
        + "".join(
            f" WHEN {level} THEN max(to_offset) FILTER (WHERE level > {level}) OVER w"
            for level in range(1, MAX_LEVEL)
        )
        + " END AS above FROM segments"
        " WHERE project_id = %(p)s AND data_subject_id = %(s)s AND from_offset < %(b)s"
        " WINDOW w AS (ORDER BY from_offset, level DESC ROWS UNBOUNDED PRECEDING)"
        ") s WHERE above IS NULL OR above < LEAST(to_offset, %(b)s - 1)",
        {"p": project_id, "s": subject, "b": below},
    )
    return [Segment(*row) for row in await cursor.fetchall()]


async def holding(
    conn: Conn, project_id: int, subject: str, parts: list[list[tuple[int, int]]]
) -> set[int]:
    """Indexes of the part lists that hold at least one formed turn of the subject."""
    flat = [(index, low, high) for index, spans in enumerate(parts) for low, high in spans]
    if not flat:
        return set()
    cursor = await conn.execute(
        "SELECT DISTINCT r.i FROM unnest(%(i)s::int[], %(l)s::bigint[], %(h)s::bigint[])"
        " AS r(i, lo, hi) WHERE EXISTS (SELECT 1 FROM observations o"
        "  WHERE o.project_id = %(p)s AND o.data_subject_id = %(s)s AND o.kind = 'turn'"
        "  AND o.formed_at IS NOT NULL AND o.parked_at IS NULL"
        "  AND o.log_offset BETWEEN r.lo AND r.hi)",
        {
            "i": [item[0] for item in flat],
            "l": [item[1] for item in flat],
            "h": [item[2] for item in flat],
            "p": project_id,
            "s": subject,
        },
    )
    return {row[0] for row in await cursor.fetchall()}


async def message_texts(
    conn: Conn, turn_ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[tuple[str, str]]]:
    """Each turn's messages as (role, content), in order."""
    texts: dict[uuid.UUID, list[tuple[str, str]]] = {turn_id: [] for turn_id in turn_ids}
    cursor = await conn.execute(
        "SELECT observation_id, role, content FROM messages"
        " WHERE observation_id = ANY(%s) ORDER BY observation_id, ordinal",
        (turn_ids,),
    )
    for observation_id, role, content in await cursor.fetchall():
        texts[observation_id].append((role, content))
    return texts


async def summaries(conn: Conn, project_id: int, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The summaries of the project's segments among `ids`."""
    cursor = await conn.execute(
        "SELECT id, summary FROM segments WHERE project_id = %s AND id = ANY(%s)",
        (project_id, ids),
    )
    return dict(await cursor.fetchall())


async def read_only_snapshot(conn: Conn) -> None:
    """Make the caller's transaction one read-only snapshot (an assembly reads several times)."""
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
