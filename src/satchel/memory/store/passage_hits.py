"""The rows a passage search answers with and how far apart its candidates' turns are: the two
statements read after the rankings, for the candidates the rankings did not read whole."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import sql

from satchel.memory.store.arrays import int_array, text_array, uuid_array
from satchel.memory.store.database import Conn
from satchel.memory.store.passage_scope import Terms, cosine_expression, share_expression
from satchel.memory.store.vectors import Packed

# Each message's row: id, observation id, ordinal, role, content, occurred at, cosine, share.
HitRows = dict[uuid.UUID, tuple[Any, ...]]
TurnPair = tuple[str, int, int]  # a data subject and two of its turns' log offsets, lower first


async def ask_hits(
    conn: Conn, project_id: int, chunks: list[uuid.UUID], vector: Packed | None, terms: Terms
) -> Callable[[], Awaitable[HitRows]]:
    """Send the statement that reads `chunks` with the cosine similarity of their vectors to
    `vector` (NULL without one, or without `vector`) and the share of the question's term weight
    they hold; the returned call reads its rows. In a pipeline, the statement travels with the
    next one sent."""
    cosine, values = (
        cosine_expression(vector, project_id)
        if vector is not None
        else (sql.SQL("NULL::float8"), [])
    )
    share, share_values = share_expression(terms)
    values += share_values
    query = sql.SQL(
        "SELECT m.id, m.observation_id, m.ordinal, m.role, m.content, m.occurred_at, {}, {}"
        " FROM messages m WHERE m.id = ANY(%s::uuid[])"
    ).format(cosine, share)
    cursor = await conn.execute(query, [*values, uuid_array(chunks)])

    async def rows() -> HitRows:
        return {row[0]: row for row in await cursor.fetchall()}

    return rows


async def turn_distances(
    conn: Conn, project_id: int, pairs: list[TurnPair], reach: int
) -> list[tuple[str, int, int, int, int | None]]:
    """For each of `pairs` (subject, lower and higher log offset), how many turns of its
    subject apart the two are, counted up to `reach` + 1 (anything further counts as that);
    and, for two adjacent turns, the lower one's last ordinal (None otherwise)."""
    cursor = await conn.execute(
        "SELECT p.s, p.lo, p.hi, d.apart, CASE WHEN d.apart = 1 THEN"
        "  (SELECT max(m.ordinal) FROM observations l JOIN messages m ON m.observation_id = l.id"
        "  WHERE l.project_id = %s AND l.data_subject_id = p.s AND l.log_offset = p.lo) END"
        " FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS p(s, lo, hi),"
        " LATERAL (SELECT count(*) + 1 AS apart FROM (SELECT 1 FROM observations o"
        "  WHERE o.project_id = %s AND o.data_subject_id = p.s"
        "  AND o.log_offset > p.lo AND o.log_offset < p.hi LIMIT %s) b) d",
        (
            project_id,
            text_array(pair[0] for pair in pairs),
            int_array(pair[1] for pair in pairs),
            int_array(pair[2] for pair in pairs),
            project_id,
            reach,
        ),
    )
    return list(await cursor.fetchall())
