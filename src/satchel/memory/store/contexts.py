"""Context assembly: a subject's newest formed turns verbatim, older history as segments, budgeted.

The unit of the budget is the character (Unicode code point): a turn costs the characters of its
messages' roles and contents, a segment the characters of its summary. Items are taken from the
newest end and the walk stops at the first item that does not fit. Only the turns the walk
reaches and the segments not inside a higher-level one are read, so a long, rolled-up history
costs a few dozen rows.
"""

from __future__ import annotations

import uuid
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from satchel.memory.store.database import Conn

VERBATIM = 8  # the newest formed turns, always candidates as they were said
PAGE = 64  # older turns read per query while walking a stretch no segment covers
MAX_LEVEL = 6  # segments sit at levels 1..6

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


@dataclass(slots=True)
class Assembly:
    """What a context hands back: oldest first, with the characters kept and whether it was cut."""

    segments: list[Segment] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    characters: int = 0
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch of older offsets `start..end` that no segment covers: its turns stay loose."""

    start: int
    end: int


class Cover:
    """Disjoint inclusive offset intervals, kept merged and sorted."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def outside(self, low: int, high: int) -> list[tuple[int, int]]:
        """The parts of `low..high` not yet covered."""
        parts = []
        index = bisect_left(self.ends, low)
        cursor = low
        while index < len(self.starts) and self.starts[index] <= high:
            if self.starts[index] > cursor:
                parts.append((cursor, self.starts[index] - 1))
            cursor = max(cursor, self.ends[index] + 1)
            index += 1
        if cursor <= high:
            parts.append((cursor, high))
        return parts

    def add(self, low: int, high: int) -> None:
        first = bisect_left(self.ends, low - 1)
        last = first
        while last < len(self.starts) and self.starts[last] <= high + 1:
            low = min(low, self.starts[last])
            high = max(high, self.ends[last])
            last += 1
        self.starts[first:last] = [low]
        self.ends[first:last] = [high]


def choose(segments: list[Segment], limit: int) -> list[tuple[Segment, list[tuple[int, int]]]]:
    """Each segment with the older offsets (below `limit`) for which it is the highest cover.

    Highest level first, then lowest start: an offset belongs to the first segment covering it.
    A segment whose parts are empty stands under a higher one and is never shown.
    """
    cover = Cover()
    chosen = []
    for segment in sorted(segments, key=lambda s: (-s.level, s.start)):
        high = min(segment.end, limit - 1)
        if high < segment.start:
            continue
        parts = cover.outside(segment.start, high)
        if parts:
            chosen.append((segment, parts))
        cover.add(segment.start, high)
    return chosen


def gaps(segments: list[Segment], limit: int) -> list[Gap]:
    """The stretches below `limit` covered by no segment, newest first."""
    covered = sorted((s.start, min(s.end, limit - 1)) for s in segments if s.start < limit)
    found: list[Gap] = []
    floor = -1  # offsets start at 0
    for start, end in covered:
        if start > floor + 1:
            found.append(Gap(floor + 1, start - 1))
        floor = max(floor, end)
    if floor + 1 <= limit - 1:
        found.append(Gap(floor + 1, limit - 1))
    return found[::-1]


def regions(chosen: list[Segment], open_gaps: list[Gap]) -> Iterator[Segment | Gap]:
    """Segments and gaps interleaved newest first (no segment overlaps a gap)."""
    items: list[Segment | Gap] = [*chosen, *open_gaps]
    yield from sorted(items, key=lambda item: item.start, reverse=True)


async def _turns(
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


async def _segments(conn: Conn, project_id: int, subject: str, below: int) -> list[Segment]:
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


async def _holding(
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


class _Budget:
    """Items taken newest first until the first one that does not fit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self.full = False

    def take(self, size: int) -> bool:
        if self.full or self.spent + size > self.limit:
            self.full = True
            return False
        self.spent += size
        return True


async def _fill(conn: Conn, project_id: int, assembly: Assembly) -> Assembly:
    """Read the text of what was kept and put everything oldest first."""
    turn_ids = [turn.id for turn in assembly.turns]
    texts: dict[uuid.UUID, list[tuple[str, str]]] = {turn_id: [] for turn_id in turn_ids}
    if turn_ids:
        cursor = await conn.execute(
            "SELECT observation_id, role, content FROM messages"
            " WHERE observation_id = ANY(%s) ORDER BY observation_id, ordinal",
            (turn_ids,),
        )
        for observation_id, role, content in await cursor.fetchall():
            texts[observation_id].append((role, content))
    summaries: dict[uuid.UUID, str] = {}
    if assembly.segments:
        cursor = await conn.execute(
            "SELECT id, summary FROM segments WHERE project_id = %s AND id = ANY(%s)",
            (project_id, [segment.id for segment in assembly.segments]),
        )
        summaries = dict(await cursor.fetchall())
    return Assembly(
        segments=sorted(
            (
                Segment(s.id, s.level, s.start, s.end, s.covered, s.size, summaries[s.id])
                for s in assembly.segments
            ),
            key=lambda s: s.start,
        ),
        turns=sorted(
            (Turn(t.id, t.offset, t.occurred_at, t.size, texts[t.id]) for t in assembly.turns),
            key=lambda t: t.offset,
        ),
        characters=assembly.characters,
        truncated=assembly.truncated,
    )


async def read_only_snapshot(conn: Conn) -> None:
    """Make the caller's transaction one read-only snapshot (an assembly reads several times)."""
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")


async def assemble(conn: Conn, project_id: int, subject: str, budget: int) -> Assembly:
    """One subject's context under `budget` characters (an unknown subject is an empty one)."""
    kept = Assembly()
    allowance = _Budget(budget)
    newest = await _turns(conn, project_id, subject, None, -1, VERBATIM)
    for turn in newest:
        if not allowance.take(turn.size):
            break
        kept.turns.append(turn)
    if len(newest) == VERBATIM and not allowance.full:
        limit = newest[-1].offset
        segments = await _segments(conn, project_id, subject, limit)
        candidates = choose(segments, limit)
        holding = await _holding(conn, project_id, subject, [parts for _, parts in candidates])
        shown = [segment for index, (segment, _) in enumerate(candidates) if index in holding]
        for region in regions(shown, gaps(segments, limit)):
            if isinstance(region, Segment):
                if not allowance.take(region.size):
                    break
                kept.segments.append(region)
                continue
            below = region.end + 1
            while not allowance.full:
                page = await _turns(conn, project_id, subject, below, region.start - 1, PAGE)
                for turn in page:
                    if not allowance.take(turn.size):
                        break
                    kept.turns.append(turn)
                if len(page) < PAGE:
                    break
                below = page[-1].offset
            if allowance.full:
                break
    kept.characters = allowance.spent
    kept.truncated = allowance.full
    return await _fill(conn, project_id, kept)
