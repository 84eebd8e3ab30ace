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
from typing import Any

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import VERBATIM, Invalid
from satchel.memory.store import contexts as store
from satchel.memory.store.contexts import Segment, Turn
from satchel.memory.store.database import Conn
from satchel.memory.store.log import freshness

PAGE = 64  # older turns read per query while walking a stretch no segment covers


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
    texts: dict[uuid.UUID, list[tuple[str, str]]] = {}
    if turn_ids:
        texts = await store.message_texts(conn, turn_ids)
    summaries: dict[uuid.UUID, str] = {}
    if assembly.segments:
        summaries = await store.summaries(conn, project_id, [s.id for s in assembly.segments])
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


async def assemble(conn: Conn, project_id: int, subject: str, budget: int) -> Assembly:
    """One subject's context under `budget` characters (an unknown subject is an empty one)."""
    kept = Assembly()
    allowance = _Budget(budget)
    newest = await store.formed_turns(conn, project_id, subject, None, -1, VERBATIM)
    for turn in newest:
        if not allowance.take(turn.size):
            break
        kept.turns.append(turn)
    if len(newest) == VERBATIM and not allowance.full:
        limit = newest[-1].offset
        segments = await store.segments_below(conn, project_id, subject, limit)
        candidates = choose(segments, limit)
        holding = await store.holding(conn, project_id, subject, [parts for _, parts in candidates])
        shown = [segment for index, (segment, _) in enumerate(candidates) if index in holding]
        for region in regions(shown, gaps(segments, limit)):
            if isinstance(region, Segment):
                if not allowance.take(region.size):
                    break
                kept.segments.append(region)
                continue
            below = region.end + 1
            while not allowance.full:
                page = await store.formed_turns(
                    conn, project_id, subject, below, region.start - 1, PAGE
                )
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


async def context(
    pool: AsyncConnectionPool,
    project_id: int,
    subject: str,
    max_characters: int | None,
    budget: int,
) -> tuple[Assembly, dict[str, Any]]:
    """One subject's context under `max_characters` (at most the server's `budget`, which is the
    default), read as one snapshot, with the project's freshness at that snapshot."""
    if max_characters is not None:
        if max_characters > budget:
            raise Invalid(
                f"max_characters: must be at most the server's budget, {budget}", "invalid_context"
            )
        budget = max_characters
    async with pool.connection() as conn, conn.transaction():
        await store.read_only_snapshot(conn)
        assembly = await assemble(conn, project_id, subject, budget)
        watermark = await freshness(conn, project_id)
    return assembly, watermark
