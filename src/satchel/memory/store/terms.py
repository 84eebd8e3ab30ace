"""Lexeme counts for passage search: how many messages of a scope hold each lexeme.

The worker counts each turn's messages once, in log order (`count_terms`), per data subject and
per project; a search reads those counts and adds the turns not yet counted (`frequencies`), so
the answer is exact while the counts lag. An erasure counts the subjects it touched again
(`recount`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from satchel.memory.store.database import Conn

MESSAGES = ""  # the pseudo-lexeme whose count is the number of messages
BATCH = 500  # observations counted in one go

_LEXEMES = (
    " lexemes AS (SELECT b.subject, b.role, b.turn, l.lexeme FROM batch b,"
    "  unnest(tsvector_to_array(b.search_text) || ARRAY['']) AS l(lexeme)),"
    " by_subject AS (INSERT INTO subject_terms AS s"
    "  (project_id, data_subject_id, role, turn, lexeme, messages)"
    "  SELECT %(p)s, subject, role, turn, lexeme, count(*) FROM lexemes GROUP BY 2, 3, 4, 5"
    "  ON CONFLICT (project_id, data_subject_id, lexeme, role, turn)"
    "  DO UPDATE SET messages = s.messages + excluded.messages)"
    " INSERT INTO project_terms AS t (project_id, role, turn, lexeme, messages)"
    " SELECT %(p)s, role, turn, lexeme, count(*) FROM lexemes GROUP BY 2, 3, 4"
    " ON CONFLICT (project_id, lexeme, role, turn)"
    " DO UPDATE SET messages = t.messages + excluded.messages"
)
_BATCH = (
    "WITH batch AS (SELECT coalesce(m.data_subject_id, '') AS subject, m.role, m.turn,"
    "  m.search_text"
    "  FROM observations o JOIN messages m ON m.observation_id = o.id"
    "  WHERE o.project_id = %(p)s AND {}),"
)
COUNT = _BATCH.format("o.log_offset > %(after)s AND o.log_offset <= %(through)s") + _LEXEMES
RECOUNT = (
    _BATCH.format("o.log_offset <= %(through)s AND coalesce(m.data_subject_id, '') = ANY(%(s)s)")
    + _LEXEMES
)
# The subjects' counts taken out of the project's, then dropped.
UNCOUNT = (
    "WITH gone AS (DELETE FROM subject_terms WHERE project_id = %(p)s"
    "  AND data_subject_id = ANY(%(s)s) RETURNING role, turn, lexeme, messages),"
    " summed AS (SELECT role, turn, lexeme, sum(messages) AS messages FROM gone"
    "  GROUP BY role, turn, lexeme)"
    " UPDATE project_terms t SET messages = t.messages - summed.messages FROM summed"
    " WHERE t.project_id = %(p)s AND t.role = summed.role AND t.turn = summed.turn"
    " AND t.lexeme = summed.lexeme"
)


async def progress(conn: Conn, project_id: int) -> tuple[int, int, int]:
    """The project's stored offset and how far vectors and counts reach, its row locked for the
    caller's transaction (one builder at a time per project)."""
    await conn.execute(
        "INSERT INTO passage_progress (project_id) VALUES (%s) ON CONFLICT DO NOTHING",
        (project_id,),
    )
    cursor = await conn.execute(
        "SELECT coalesce(p.stored, -1), g.vectors_through, g.terms_through"
        " FROM passage_progress g JOIN projects p ON p.id = g.project_id"
        " WHERE g.project_id = %s FOR UPDATE OF g",
        (project_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


async def count_terms(conn: Conn, project_id: int, limit: int = BATCH) -> int:
    """Count the lexemes of the next `limit` turns' messages in log order; how many turns.

    The caller commits. Offsets are claimed under the project's row lock, so every offset up to
    the stored one is committed (or erased) and counting never skips a turn still being written.
    """
    stored, _, after = await progress(conn, project_id)
    through = min(stored, after + limit)
    if through <= after:
        return 0
    await conn.execute(COUNT, {"p": project_id, "after": after, "through": through})
    await conn.execute(
        "UPDATE passage_progress SET terms_through = %s WHERE project_id = %s",
        (through, project_id),
    )
    return through - after


async def counted_subjects(conn: Conn, where: str, params: Any) -> list[str]:
    """The subjects ('' for none) of the messages matching `where` (over `t`)."""
    cursor = await conn.execute(
        f"SELECT DISTINCT coalesce(t.data_subject_id, '') FROM messages t WHERE {where}", params
    )
    return [row[0] for row in await cursor.fetchall()]


async def recount(conn: Conn, project_id: int, subjects: Sequence[str]) -> None:
    """Count `subjects` again from their remaining messages (after an erasure), in the caller's
    transaction; lexemes no message holds any more leave no row behind."""
    if not subjects:
        return
    _, _, through = await progress(conn, project_id)
    params = {"p": project_id, "s": list(subjects), "through": through}
    await conn.execute(UNCOUNT, params)
    await conn.execute(RECOUNT, params)
    await conn.execute(
        "DELETE FROM project_terms WHERE project_id = %s AND messages <= 0", (project_id,)
    )


@dataclass(frozen=True, slots=True)
class Counted:
    """A scope's message count and, per lexeme asked about, how many of its messages hold it."""

    total: int
    frequencies: list[int]


async def frequencies(
    conn: Conn,
    project_id: int,
    subject: str,
    roles: Sequence[str],
    turns_only: bool,
    lexemes: Sequence[str],
    tail: sql.Composable,
    tail_params: Sequence[Any],
    counted_through: int,
) -> Counted:
    """Message counts of the scope: the worker's counts plus the scope's messages not yet
    counted (`tail`: a condition over `m` selecting the scope, with `tail_params`; the counts
    reach `counted_through`, the project's `terms_through`)."""
    asked = [MESSAGES, *lexemes]
    if subject:
        table = sql.SQL("subject_terms c WHERE c.project_id = %s AND c.data_subject_id = %s")
        params: list[Any] = [project_id, subject]
    else:
        table = sql.SQL("project_terms c WHERE c.project_id = %s")
        params = [project_id]
    filters: sql.Composable = sql.SQL("")
    if roles:
        filters = sql.SQL(" AND c.role = ANY(%s)")
        params.append(list(roles))
    if turns_only:
        filters = sql.SQL("{} AND c.turn").format(filters)
    uncounted = sql.SQL(", ").join(
        sql.SQL("count(*) FILTER (WHERE m.search_text @@ %s::tsquery)") for _ in lexemes
    )
    query = sql.SQL(
        "SELECT coalesce((SELECT array_agg(coalesce(s.messages, 0) ORDER BY u.n)"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS u(lexeme, n)"
        " LEFT JOIN (SELECT c.lexeme, sum(c.messages)::bigint AS messages FROM {table}{filters}"
        "  AND c.lexeme = ANY(%s) GROUP BY c.lexeme) s ON s.lexeme = u.lexeme), '{{}}'),"
        " (SELECT ARRAY[count(*){comma}{uncounted}] FROM observations o"
        "  JOIN messages m ON m.observation_id = o.id WHERE o.project_id = %s"
        "  AND o.log_offset > %s AND {tail})"
    ).format(
        table=table,
        filters=filters,
        comma=sql.SQL(", ") if lexemes else sql.SQL(""),
        uncounted=uncounted,
        tail=tail,
    )
    quoted = [tsquery_lexeme(lexeme) for lexeme in lexemes]
    values = [asked, *params, asked, *quoted, project_id, counted_through, *tail_params]
    cursor = await conn.execute(query, values)
    row = await cursor.fetchone()
    assert row is not None
    counted, fresh = row
    summed = [int(a) + int(b) for a, b in zip(counted, fresh, strict=True)]
    return Counted(summed[0], summed[1:])


def tsquery_lexeme(lexeme: str) -> str:
    """A lexeme quoted for tsquery input, so it is taken as it is."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
