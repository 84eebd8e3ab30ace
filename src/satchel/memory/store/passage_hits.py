"""The rows a passage search answers with and the adjacency of its candidates' turns: the two
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


async def adjacent_turns(
    conn: Conn, project_id: int, pairs: list[TurnPair]
) -> list[tuple[str, int, int, int]]:
    """Of `pairs` (subject, lower and higher log offset), those with no turn of their subject
    between them, each with the lower turn's last ordinal."""
    cursor = await conn.execute(
        "SELECT p.s, p.lo, p.hi, (SELECT max(m.ordinal) FROM observations l"
        "  JOIN messages m ON m.observation_id = l.id"
        "  WHERE l.project_id = %s AND l.data_subject_id = p.s AND l.log_offset = p.lo)"
        " FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS p(s, lo, hi)"
        " WHERE NOT EXISTS (SELECT 1 FROM observations o WHERE o.project_id = %s"
        "  AND o.data_subject_id = p.s AND o.log_offset > p.lo AND o.log_offset < p.hi)",
        (
            project_id,
            text_array(pair[0] for pair in pairs),
            int_array(pair[1] for pair in pairs),
            int_array(pair[2] for pair in pairs),
            project_id,
        ),
    )
    return list(await cursor.fetchall())
