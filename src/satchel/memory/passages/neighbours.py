"""Which candidates of a passage search were said next to which, and how many turns apart: within
a turn from their places, across a data subject's turns from what the candidates were read with
or, failing that, from one statement; then each candidate's share of its neighbours' and its
stretch's scores."""

from __future__ import annotations

import itertools
import uuid

from satchel.memory.passages.ranking import Links, with_shares
from satchel.memory.store.database import Conn
from satchel.memory.store.passage_hits import TurnPair, turn_distances
from satchel.memory.store.passage_rankings import WINDOW_TURNS, MessagePlace

Turn = tuple[str, int]  # a data subject and one of its turns' log offset


async def with_neighbours(
    conn: Conn, scores: dict[uuid.UUID, float], place_of: dict[uuid.UUID, MessagePlace]
) -> list[tuple[uuid.UUID, float]]:
    """Each message also scores a share of the messages said just before and after it (same
    data subject), since an answer often spans a question and its reply, and a share of the
    best said around it; best first. `place_of`: where each scored message is."""
    found = [place_of[chunk] for chunk in scores]
    before, after, turn_of = await _lines(conn, found)
    return with_shares(scores, found, before, after, turn_of)


async def _lines(conn: Conn, found: list[MessagePlace]) -> tuple[Links, Links, list[int | None]]:
    """For each candidate, the candidate said just before and just after it, where there is
    one (the next message of its turn, or across turns, the last message of its subject's
    previous turn and the first of the next), and its turn's number in its subject's
    conversation (relative, counted only up to `WINDOW_TURNS` + 1 across a gap; None without a
    subject). Only candidates carry a score, so only consecutive candidates' turns are looked at,
    with one statement for how far apart they are."""
    before: Links = {}
    after: Links = {}
    at = {(p.observation_id.int, p.ordinal): p.id for p in found}
    for p in found:
        if (earlier := at.get((p.observation_id.int, p.ordinal - 1))) is not None:
            before[p.id] = earlier
            after[earlier] = p.id
    turns: dict[Turn, list[MessagePlace]] = {}
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
    number = {(subject, line[0]): 0 for subject, line in offsets.items()}
    for subject, low, high, apart, last in sorted(await _distances(conn, found, turns, pairs)):
        number[(subject, high)] = number[(subject, low)] + apart
        ending = [p for p in turns[(subject, low)] if p.ordinal == last]
        opening = [p for p in turns[(subject, high)] if p.ordinal == 0]
        if ending and opening:
            before[opening[0].id] = ending[0].id
            after[ending[0].id] = opening[0].id
    turn_of = [None if p.subject is None else number[(p.subject, p.log_offset)] for p in found]
    return before, after, turn_of


async def _distances(
    conn: Conn,
    found: list[MessagePlace],
    turns: dict[Turn, list[MessagePlace]],
    pairs: list[TurnPair],
) -> list[tuple[str, int, int, int, int | None]]:
    """The pairs of turns (subject, lower and higher offset), in order, each with how many
    turns of its subject apart they are (up to `WINDOW_TURNS` + 1) and, when adjacent, the
    lower's last ordinal: from what the candidates were read with, or when some were read
    without it, asked of the database."""
    if not pairs:
        return []
    neighbourhoods = [turns[(subject, low)][0].neighbourhood for subject, low, _ in pairs]
    known = [neighbourhood for neighbourhood in neighbourhoods if neighbourhood is not None]
    if len(known) < len(pairs):
        return await turn_distances(conn, found[0].project_id, pairs, WINDOW_TURNS)
    distances = []
    for (subject, low, high), neighbourhood in zip(pairs, known, strict=True):
        following = neighbourhood.following
        apart = following.index(high) + 1 if high in following else WINDOW_TURNS + 1
        last = neighbourhood.last_ordinal if apart == 1 else None
        distances.append((subject, low, high, apart, last))
    return distances
