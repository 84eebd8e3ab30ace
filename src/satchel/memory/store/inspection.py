"""The inspector's reads: a project's data subjects, one subject's turns with their messages and
its segments, and the project's parked turns (metadata only), each a bounded keyset page."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store.database import Conn
from satchel.memory.store.formation import ParkedTurn


@dataclass(frozen=True, slots=True)
class DataSubject:
    """A data subject as the log knows it: how many turns it has and its latest one."""

    data_subject_id: str
    turns: int
    last_occurred_at: datetime


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One stored turn of a subject, without its messages."""

    id: uuid.UUID
    log_offset: int
    occurred_at: datetime
    stored_at: datetime
    formed: bool
    parked: bool


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One message of a stored turn, in full."""

    id: uuid.UUID
    observation_id: uuid.UUID
    ordinal: int
    role: str
    occurred_at: datetime
    content: str


@dataclass(frozen=True, slots=True)
class SegmentRow:
    """One segment of a subject: its level, the turns it covers and its summary."""

    id: uuid.UUID
    level: int
    from_offset: int
    to_offset: int
    covered: int
    summary: str
    created_at: datetime


async def data_subjects(
    conn: Conn, project_id: int, after: str | None, limit: int
) -> list[DataSubject]:
    """Up to `limit` data subjects of the project's stored turns, by id, past `after`."""
    async with conn.cursor(row_factory=class_row(DataSubject)) as cursor:
        await cursor.execute(
            "SELECT data_subject_id, count(*)::int AS turns, max(occurred_at) AS last_occurred_at"
            " FROM observations WHERE project_id = %(p)s AND kind = 'turn'"
            " AND data_subject_id IS NOT NULL"
            " AND (%(after)s::text IS NULL OR data_subject_id > %(after)s)"
            " GROUP BY data_subject_id ORDER BY data_subject_id LIMIT %(limit)s",
            {"p": project_id, "after": after, "limit": limit},
        )
        return await cursor.fetchall()


async def subject_turns(
    conn: Conn, project_id: int, subject: str, after: int | None, limit: int
) -> list[TurnRow]:
    """Up to `limit` of the subject's stored turns in log order, past offset `after`."""
    async with conn.cursor(row_factory=class_row(TurnRow)) as cursor:
        await cursor.execute(
            "SELECT id, log_offset, occurred_at, stored_at, formed_at IS NOT NULL AS formed,"
            " parked_at IS NOT NULL AS parked FROM observations"
            " WHERE project_id = %(p)s AND data_subject_id = %(s)s AND kind = 'turn'"
            " AND log_offset > %(after)s ORDER BY log_offset LIMIT %(limit)s",
            {
                "p": project_id,
                "s": subject,
                "after": -1 if after is None else after,
                "limit": limit,
            },
        )
        return await cursor.fetchall()


async def turn_messages(conn: Conn, project_id: int, turns: list[uuid.UUID]) -> list[MessageRow]:
    """The messages of `turns`, turn by turn in the order given, each in its ordinal order."""
    async with conn.cursor(row_factory=class_row(MessageRow)) as cursor:
        await cursor.execute(
            "SELECT m.id, m.observation_id, m.ordinal, m.role, m.occurred_at, m.content"
            " FROM messages m JOIN unnest(%(t)s::uuid[]) WITH ORDINALITY AS t(id, n)"
            " ON t.id = m.observation_id WHERE m.project_id = %(p)s ORDER BY t.n, m.ordinal",
            {"p": project_id, "t": turns},
        )
        return await cursor.fetchall()


async def subject_segments(
    conn: Conn, project_id: int, subject: str, after: uuid.UUID | None, limit: int
) -> list[SegmentRow]:
    """Up to `limit` of the subject's segments by first turn, then level, past segment `after`."""
    async with conn.cursor(row_factory=class_row(SegmentRow)) as cursor:
        await cursor.execute(
            "SELECT id, level, from_offset, to_offset, covered, summary, created_at FROM segments"
            " WHERE project_id = %(p)s AND data_subject_id = %(s)s AND (%(after)s::uuid IS NULL"
            " OR (from_offset, level, id) > (SELECT from_offset, level, id FROM segments"
            " WHERE id = %(after)s AND project_id = %(p)s))"
            " ORDER BY from_offset, level, id LIMIT %(limit)s",
            {"p": project_id, "s": subject, "after": after, "limit": limit},
        )
        return await cursor.fetchall()


async def parked_turns(
    conn: Conn, project_id: int, after: int | None, limit: int
) -> list[ParkedTurn]:
    """Up to `limit` of the project's parked turns in log order, past offset `after`."""
    async with conn.cursor(row_factory=class_row(ParkedTurn)) as cursor:
        await cursor.execute(
            "SELECT o.id, p.name AS project, o.kind, o.log_offset, o.attempts, o.stored_at,"
            " o.parked_at, o.last_error FROM observations o JOIN projects p ON p.id = o.project_id"
            " WHERE o.project_id = %(p)s AND o.parked_at IS NOT NULL"
            " AND o.log_offset > %(after)s ORDER BY o.log_offset LIMIT %(limit)s",
            {"p": project_id, "after": -1 if after is None else after, "limit": limit},
        )
        return await cursor.fetchall()


async def running_workers(conn: Conn) -> tuple[int, float | None]:
    """How many workers run, and the seconds since the freshest beat among them (None: none)."""
    cursor = await conn.execute(
        "SELECT count(*)::int, extract(epoch FROM now() - max(beat_at))::float8 FROM workers"
        " WHERE stopped_at IS NULL"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0]), None if row[1] is None else float(row[1])
