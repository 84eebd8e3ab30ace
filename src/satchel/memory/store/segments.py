"""SQL of segments: a subject's loose turns and top segments, their texts, and writing one."""

from __future__ import annotations

import bisect
import uuid
from dataclasses import dataclass

from satchel.memory.domain import MAX_LEVEL, VERBATIM
from satchel.memory.store.database import Conn


@dataclass(frozen=True, slots=True)
class Stored:
    """A segment as formation sees it: which one, its level, offsets and turns covered."""

    id: uuid.UUID
    level: int
    start: int
    end: int
    covered: int


@dataclass(frozen=True, slots=True)
class Loose:
    """A turn of the subject that no segment covers, and the subject's next turn after it."""

    id: uuid.UUID
    offset: int
    formed: bool
    next: int | None


async def sweep_orphans(conn: Conn, project_id: int) -> int:
    """Delete segments left with no source (their turns were erased while they were written)."""
    cursor = await conn.execute(
        "DELETE FROM segments s WHERE s.project_id = %s"
        " AND NOT EXISTS (SELECT 1 FROM segment_sources g WHERE g.segment_id = s.id)",
        (project_id,),
    )
    return cursor.rowcount


async def subjects(conn: Conn, project_id: int) -> list[str]:
    """The project's data subjects that have observations, by a skip scan over the subject index."""
    cursor = await conn.execute(
        "WITH RECURSIVE s(id) AS ("
        " (SELECT data_subject_id FROM observations WHERE project_id = %(p)s"
        "  AND data_subject_id IS NOT NULL ORDER BY data_subject_id LIMIT 1)"
        " UNION ALL SELECT (SELECT o.data_subject_id FROM observations o"
        "  WHERE o.project_id = %(p)s AND o.data_subject_id > s.id"
        "  ORDER BY o.data_subject_id LIMIT 1) FROM s WHERE s.id IS NOT NULL)"
        " SELECT id FROM s WHERE id IS NOT NULL",
        {"p": project_id},
    )
    return [row[0] for row in await cursor.fetchall()]


async def verbatim_start(conn: Conn, project_id: int, subject: str) -> int | None:
    """The offset of the oldest of the newest formed turns kept verbatim; None if fewer exist."""
    cursor = await conn.execute(
        "SELECT log_offset FROM observations WHERE project_id = %s AND data_subject_id = %s"
        " AND kind = 'turn' AND formed_at IS NOT NULL AND parked_at IS NULL"
        " ORDER BY log_offset DESC OFFSET %s LIMIT 1",
        (project_id, subject, VERBATIM - 1),
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def top_segments(conn: Conn, project_id: int, subject: str) -> list[Stored]:
    """The subject's segments inside no higher-level one, by first offset."""
    above = "".join(
        f" WHEN {level} THEN max(to_offset) FILTER (WHERE level > {level}) OVER w"
        for level in range(1, MAX_LEVEL)
    )
    cursor = await conn.execute(
        "SELECT id, level, from_offset, to_offset, covered FROM ("
        f" SELECT *, CASE level{above} END AS above FROM segments"
        " WHERE project_id = %s AND data_subject_id = %s"
        " WINDOW w AS (ORDER BY from_offset, level DESC ROWS UNBOUNDED PRECEDING)"
        ") s WHERE above IS NULL OR above < to_offset ORDER BY from_offset",
        (project_id, subject),
    )
    return [Stored(*row) for row in await cursor.fetchall()]


# A subject's observations from an offset on (the caller adds the condition on `o.log_offset`),
# read by the (project, subject, offset) index; the kind is tested outside (`OFFSET 0` keeps it
# there), so the partial index of the project's turns, which holds no subject, cannot be chosen
# instead. On statistics taken before a project's turns arrived, that index looked cheaper, and
# every look-up read all of the project's turns.
_SUBJECT_OBSERVATIONS = (
    "SELECT o.id, o.log_offset, o.kind, o.formed_at IS NOT NULL AND o.parked_at IS NULL AS formed"
    " FROM observations o WHERE o.project_id = %(p)s AND o.data_subject_id = %(s)s"
)


async def loose_turns(
    conn: Conn, project_id: int, subject: str, spans: list[tuple[int, int]]
) -> list[Loose]:
    """The subject's turns (formed or not) with offsets inside the inclusive `spans`, each with
    the subject's next turn after it.

    One read of the subject's observations from the first span on, each turn's next taken from
    the turn after it (`lead`), rather than a look-up a turn (see `_SUBJECT_OBSERVATIONS`;
    decision 0082).
    """
    if not spans:
        return []
    cursor = await conn.execute(
        "SELECT t.id, t.log_offset, t.formed, t.next FROM (SELECT s.id, s.log_offset,"
        " s.formed, lead(s.log_offset) OVER (ORDER BY s.log_offset) AS next FROM ("
        + _SUBJECT_OBSERVATIONS
        + " AND o.log_offset >= %(from)s OFFSET 0) s WHERE s.kind = 'turn') t"
        " WHERE EXISTS (SELECT FROM unnest(%(lo)s::bigint[], %(hi)s::bigint[]) AS r(lo, hi)"
        " WHERE t.log_offset BETWEEN r.lo AND r.hi) ORDER BY t.log_offset",
        {
            "p": project_id,
            "s": subject,
            "from": min(low for low, _ in spans),
            "lo": [low for low, _ in spans],
            "hi": [high for _, high in spans],
        },
    )
    return [Loose(*row) for row in await cursor.fetchall()]


async def next_turns(
    conn: Conn, project_id: int, subject: str, ends: list[int]
) -> list[int | None]:
    """For each offset, the subject's next turn after it (None when there is none): one read of
    the subject's observations after the first of them (see `_SUBJECT_OBSERVATIONS`)."""
    if not ends:
        return []
    cursor = await conn.execute(
        "SELECT s.log_offset FROM ("
        + _SUBJECT_OBSERVATIONS
        + " AND o.log_offset > %(after)s OFFSET 0) s WHERE s.kind = 'turn' ORDER BY s.log_offset",
        {"p": project_id, "s": subject, "after": min(ends)},
    )
    offsets = [int(row[0]) for row in await cursor.fetchall()]
    found = [bisect.bisect_right(offsets, end) for end in ends]
    return [offsets[at] if at < len(offsets) else None for at in found]


async def turn_texts(conn: Conn, turns: list[uuid.UUID]) -> list[str]:
    """Each turn's messages as `role: content` lines, in the order given."""
    cursor = await conn.execute(
        "SELECT observation_id, role, content FROM messages WHERE observation_id = ANY(%s)"
        " ORDER BY observation_id, ordinal",
        (turns,),
    )
    lines: dict[uuid.UUID, list[str]] = {turn: [] for turn in turns}
    for observation_id, role, content in await cursor.fetchall():
        lines[observation_id].append(f"{role}: {content}")
    return ["\n".join(lines[turn]) for turn in turns]


async def summaries(conn: Conn, segments: list[uuid.UUID]) -> list[str]:
    """Each segment's summary, in the order given."""
    cursor = await conn.execute("SELECT id, summary FROM segments WHERE id = ANY(%s)", (segments,))
    found: dict[uuid.UUID, str] = dict(await cursor.fetchall())
    return [found[segment] for segment in segments if segment in found]


@dataclass(frozen=True, slots=True)
class NewSegment:
    """A segment to write over `parts`: turns at level 1, segments of the level below above it."""

    project_id: int
    subject: str
    level: int
    start: int
    end: int
    covered: int
    summary: str
    parts: list[uuid.UUID]


async def insert(conn: Conn, new: NewSegment) -> Stored | None:
    """Write the segment and its sources in one transaction (a savepoint inside the caller's).

    Its parts are locked first; when one is gone or no longer formed (erased meanwhile), or the
    same segment was written by someone else, nothing is written and the answer is None.
    """
    async with conn.transaction():
        if new.level == 1:
            check = (
                "SELECT count(*) FROM (SELECT 1 FROM observations WHERE id = ANY(%s)"
                " AND formed_at IS NOT NULL AND parked_at IS NULL FOR KEY SHARE) x"
            )
        else:
            check = (
                "SELECT count(*) FROM (SELECT 1 FROM segments WHERE id = ANY(%s) FOR KEY SHARE) x"
            )
        cursor = await conn.execute(check, (new.parts,))
        row = await cursor.fetchone()
        if row is None or row[0] != len(new.parts):
            return None
        segment = uuid.uuid4()
        cursor = await conn.execute(
            "INSERT INTO segments (id, project_id, data_subject_id, level, from_offset, to_offset,"
            " covered, summary) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING RETURNING id",
            (
                segment,
                new.project_id,
                new.subject,
                new.level,
                new.start,
                new.end,
                new.covered,
                new.summary,
            ),
        )
        if await cursor.fetchone() is None:
            return None
        if new.level == 1:
            await conn.execute(
                "INSERT INTO segment_sources (segment_id, observation_id)"
                " SELECT %s, unnest(%s::uuid[])",
                (segment, new.parts),
            )
        else:
            await conn.execute(
                "INSERT INTO segment_sources (segment_id, observation_id)"
                " SELECT DISTINCT %s::uuid, observation_id FROM segment_sources"
                " WHERE segment_id = ANY(%s)",
                (segment, new.parts),
            )
    return Stored(segment, new.level, new.start, new.end, new.covered)
