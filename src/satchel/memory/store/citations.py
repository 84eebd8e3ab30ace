"""Citations: a fact's record and its evidence, each quote with a window of its message."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields, replace
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store.database import Conn
from satchel.memory.store.facts import STATUS
from satchel.memory.store.hops import TOUCHING_NOW, TOUCHING_THEN, HopRow

CONTEXT_BYTES = 256  # of the message on each side of a quote


@dataclass(frozen=True, slots=True)
class Window:
    """Part of a message around a quote: its text and UTF-8 byte range."""

    text: str
    start: int
    end: int
    complete: bool


def context_window(content: str | None, start: int, end: int) -> Window:
    """The quote's bytes widened by `CONTEXT_BYTES` on each side, on character boundaries.

    An absent message (gone with its source) gives an empty, incomplete window.
    """
    if content is None:
        return Window("", 0, 0, False)
    data = content.encode("utf-8")
    low = max(0, min(start, len(data)) - CONTEXT_BYTES)
    high = min(len(data), max(end, start) + CONTEXT_BYTES)
    while low > 0 and data[low] & 0xC0 == 0x80:
        low -= 1
    while high < len(data) and data[high] & 0xC0 == 0x80:
        high += 1
    return Window(data[low:high].decode("utf-8"), low, high, low == 0 and high == len(data))


@dataclass(slots=True)  # not frozen: made for every row a walk reads, and cheaper so
class Evidence:
    """A quote supporting a fact, located in one message of a source observation."""

    fact_id: uuid.UUID
    observation_id: uuid.UUID
    source_ordinal: int
    log_offset: int
    role: str | None
    occurred_at: datetime
    quote: str
    byte_start: int
    byte_end: int
    authored_by: uuid.UUID | None
    extractor_version: str | None
    content: str | None

    def window(self) -> Window:
        return context_window(self.content, self.byte_start, self.byte_end)


@dataclass(frozen=True, slots=True)
class Cited:
    """A fact as a citation resolves it."""

    id: uuid.UUID
    version: uuid.UUID
    scope: str
    superseded_by: uuid.UUID | None
    supersession_source_observation_id: uuid.UUID | None
    subject_entity_id: uuid.UUID | None
    object_entity_id: uuid.UUID | None
    predicate: str
    statement: str
    confidence: float
    source_role: str
    recorded_at: datetime
    valid_from: datetime
    valid_until: datetime | None
    known_from: datetime
    known_until: datetime | None
    status: str
    generation: Lineage | None = None
    reinterpreted_by: Lineage | None = None


@dataclass(frozen=True, slots=True)
class Lineage:
    """A rebuild generation as a citation links it: the one that admitted or retired a fact."""

    id: uuid.UUID
    extractor_version: str
    applied_at: datetime


_EVIDENCE = (
    "SELECT e.fact_id, e.observation_id, e.source_ordinal, o.log_offset, m.role,"
    " COALESCE(m.occurred_at, o.occurred_at) AS occurred_at, e.quote, e.byte_start, e.byte_end,"
    " e.authored_by, e.extractor_version, m.content"
    " FROM fact_evidence e JOIN observations o ON o.id = e.observation_id"
    " LEFT JOIN messages m ON m.observation_id = e.observation_id AND m.ordinal = e.source_ordinal"
)


async def cited(conn: Conn, project_id: int, fact_id: uuid.UUID) -> Cited | None:
    """The project's fact `fact_id`, or None (unknown, another project's, or erased)."""
    async with conn.cursor(row_factory=class_row(Cited)) as cursor:
        await cursor.execute(
            "SELECT f.id, f.version, p.name AS scope, f.superseded_by,"
            " n.source_observation_id AS supersession_source_observation_id,"
            " f.subject_entity_id, f.object_entity_id, f.predicate, f.statement, f.confidence,"
            " f.source_role, f.recorded_at, f.valid_from, f.valid_until, f.known_from,"
            f" f.known_until, {STATUS} AS status FROM facts f"
            " JOIN projects p ON p.id = f.project_id"
            " LEFT JOIN facts n ON n.id = f.superseded_by AND n.project_id = f.project_id"
            " WHERE f.project_id = %s AND f.id = %s",
            (project_id, fact_id),
        )
        found = await cursor.fetchone()
    if found is None:
        return None
    links = await conn.execute(
        "SELECT f.generation_id, g.extractor_version, g.applied_at, f.reinterpreted_by,"
        " r.extractor_version, r.applied_at FROM facts f"
        " LEFT JOIN fact_generations g ON g.id = f.generation_id"
        " LEFT JOIN fact_generations r ON r.id = f.reinterpreted_by WHERE f.id = %s",
        (fact_id,),
    )
    row = await links.fetchone()
    assert row is not None
    return replace(
        found,
        generation=None if row[0] is None else Lineage(*row[0:3]),
        reinterpreted_by=None if row[3] is None else Lineage(*row[3:6]),
    )


async def largest_source(conn: Conn, fact_id: uuid.UUID) -> int:
    """The most UTF-8 bytes of text any one source observation of the fact holds."""
    cursor = await conn.execute(
        "SELECT COALESCE(max(s.total), 0) FROM (SELECT sum(octet_length(m.content)) AS total"
        " FROM fact_evidence e JOIN messages m ON m.observation_id = e.observation_id"
        " WHERE e.fact_id = %s GROUP BY e.observation_id) s",
        (fact_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    total: int = row[0]
    return total


async def evidence_page(
    conn: Conn, fact_id: uuid.UUID, after: tuple[uuid.UUID, int, int] | None, limit: int
) -> list[Evidence]:
    """Up to `limit` pieces of a fact's evidence in (source, ordinal, byte_start) order."""
    async with conn.cursor(row_factory=class_row(Evidence)) as cursor:
        await cursor.execute(
            f"{_EVIDENCE} WHERE e.fact_id = %(f)s AND (%(o)s::uuid IS NULL"
            " OR (e.observation_id, e.source_ordinal, e.byte_start) > (%(o)s, %(i)s, %(b)s))"
            " ORDER BY e.observation_id, e.source_ordinal, e.byte_start LIMIT %(n)s",
            {
                "f": fact_id,
                "o": after[0] if after else None,
                "i": after[1] if after else None,
                "b": after[2] if after else None,
                "n": limit,
            },
        )
        return await cursor.fetchall()


# Each step of a walk with its fact's earliest evidence (by log offset, ordinal, byte_start),
# read in the same round trip, in the walk's order.
_HOP_FIELDS = [column.name for column in fields(HopRow)]
_HOP = ", ".join(f"t.{name}" for name in _HOP_FIELDS)
_CITED = (
    f"SELECT {_HOP}, ev.* FROM ({{}}) t LEFT JOIN LATERAL ({_EVIDENCE} WHERE e.fact_id = t.id"
    " ORDER BY o.log_offset, e.source_ordinal, e.byte_start LIMIT 1) ev ON true"
    " ORDER BY t.place, t.on_subject DESC, t.recorded_at DESC, t.id"
)
CITED_NOW = _CITED.format(TOUCHING_NOW)
CITED_THEN = _CITED.format(TOUCHING_THEN)

CitedHop = tuple[HopRow, Evidence | None]


async def facts_touching(
    conn: Conn,
    project_id: int,
    ends: list[uuid.UUID],
    *,
    data_subject_id: str | None,
    roles: list[str],
    as_of: datetime,
    as_known_at: datetime | None,
    fanout: int,
    limit: int,
) -> list[CitedHop]:
    """Facts with `ends` as subject or object, valid at `as_of` and believed at `as_known_at`
    (None: now), at most `fanout` per entity and side, at most `limit` in all, in `ends` order;
    each with its earliest evidence (None when it has none)."""
    cursor = await conn.execute(
        CITED_NOW if as_known_at is None else CITED_THEN,
        {
            "p": project_id,
            "ends": ends,
            "s": data_subject_id,
            "roles": roles,
            "a": as_of,
            "k": as_known_at,
            "fan": fanout,
            "limit": limit,
        },
    )
    hop = len(_HOP_FIELDS)
    return [
        (HopRow(*row[:hop]), None if row[hop] is None else Evidence(*row[hop:]))
        for row in await cursor.fetchall()
    ]
