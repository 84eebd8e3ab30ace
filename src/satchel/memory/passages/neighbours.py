"""Which candidates of a passage search were said next to which: within a turn from their
places, across a data subject's turns from what the candidates were read with or, failing that,
from one statement; then each candidate's share of its neighbours' and session's scores."""

from __future__ import annotations

import itertools
import uuid

from satchel.memory.passages.ranking import Links, with_shares
from satchel.memory.store.database import Conn
from satchel.memory.store.passage_hits import TurnPair, adjacent_turns
from satchel.memory.store.passage_rankings import MessagePlace


async def with_neighbours(
    conn: Conn, scores: dict[uuid.UUID, float], place_of: dict[uuid.UUID, MessagePlace]
) -> list[tuple[uuid.UUID, float]]:
    """Each message also scores a share of the messages said just before and after it (same
    data subject), since an answer often spans a question and its reply; best first.
    `place_of`: where each scored message is."""
    found = [place_of[chunk] for chunk in scores]
    before, after = await _adjacent(conn, found)
    return with_shares(scores, found, before, after)


async def _adjacent(conn: Conn, found: list[MessagePlace]) -> tuple[Links, Links]:
    """For each candidate, the candidate said just before and just after it, where there is
    one: the next message of its turn, or across turns, the last message of its subject's
    previous turn and the first of the next. Only candidates carry a score, so only pairs of
    candidates are looked at, with one statement for whether two turns are adjacent."""
    before: Links = {}
    after: Links = {}
    at = {(p.observation_id.int, p.ordinal): p.id for p in found}
    for p in found:
        if (earlier := at.get((p.observation_id.int, p.ordinal - 1))) is not None:
            before[p.id] = earlier
            after[earlier] = p.id
    turns: dict[tuple[str, int], list[MessagePlace]] = {}
    for p in found:
        if p.subject is not None:
            turns.setdefault((p.subject, p.log_offset), []).append(p)
    offsets: dict[str, list[int]] = {}
    for subject, offset in sorted(turns):
        offsets.setdefault(subject, []).append(offset)
    pairs = [
        (subject, low, high)
        for subject, line in offsets.items()
        for low, high in itertools.pairwise(line)
    ]
    if not pairs:
        return before, after
    for subject, low, high, last in await _bordering(conn, found, turns, pairs):
        ending = [p for p in turns[(subject, low)] if p.ordinal == last]
        opening = [p for p in turns[(subject, high)] if p.ordinal == 0]
        if ending and opening:
            before[opening[0].id] = ending[0].id
            after[ending[0].id] = opening[0].id
    return before, after


async def _bordering(
    conn: Conn,
    found: list[MessagePlace],
    turns: dict[tuple[str, int], list[MessagePlace]],
    pairs: list[TurnPair],
) -> list[tuple[str, int, int, int]]:
    """The pairs of turns (subject, lower and higher offset) with no turn of their subject
    between them, each with the lower's last ordinal: from what the candidates were read with,
    or when some were read without it, asked of the database."""
    neighbourhoods = [turns[(subject, low)][0].neighbourhood for subject, low, _ in pairs]
    if all(known is not None for known in neighbourhoods):
        return [
            (subject, low, high, known.last_ordinal)
            for (subject, low, high), known in zip(pairs, neighbourhoods, strict=True)
            if known is not None and known.next_offset == high
        ]
    return await adjacent_turns(conn, found[0].project_id, pairs)
