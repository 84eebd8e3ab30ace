"""The three rankings of a passage search as statements: BM25 over full text, nearest vectors
(exact, or over the HNSW graphs with their session settings), and the messages said in named
periods; each read with every message's place in the log."""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from satchel.memory.store.arrays import uuid_array
from satchel.memory.store.database import Conn
from satchel.memory.store.messages import ROLES
from satchel.memory.store.passage_hits import HitRows
from satchel.memory.store.passage_scope import (
    Scope,
    Terms,
    cosine_expression,
    full_text_match,
    share_expression,
    vector_partition,
)
from satchel.memory.store.plans import committing, generic_plans
from satchel.memory.store.vectors import Packed

K1 = 0.7  # BM25 term saturation
B = 0.4  # BM25 length normalization
# The longest HNSW candidate list. Iterative scans go on past it until the query's LIMIT is met,
# so a list as long as a large LIMIT is not needed, and it makes the slowest walks much slower.
EF_SEARCH = 100
# Up to this many messages in all are read whole. Past it, reading every one's content and
# neighbourhood costs more than the statements it saves: only places are read, and neighbours
# and hits after fusion, for the few that need them.
WHOLE_UP_TO = 64
# A message's stretch of conversation: its data subject's turns within this many of its own.
WINDOW_TURNS = 6


# Not frozen, like `MessagePlace`: made for every candidate, and a frozen dataclass is slower to
# make (each field set through object.__setattr__).
@dataclass(slots=True)
class TurnNeighbourhood:
    """What a turn's neighbours need: the log offsets of its subject's next `WINDOW_TURNS`
    turns (fewer near the end) and the ordinal of its own last message."""

    following: list[int]
    last_ordinal: int


@dataclass(slots=True)
class MessagePlace:
    """A candidate message and its place: turn, position in it, subject and log offset, and,
    when read with it, what its turn's neighbours need."""

    id: uuid.UUID
    observation_id: uuid.UUID
    ordinal: int
    project_id: int
    subject: str | None
    log_offset: int
    occurred_at: datetime
    neighbourhood: TurnNeighbourhood | None = None


Ranking = list[tuple[MessagePlace, float]]


@dataclass(frozen=True, slots=True)
class VectorRanking:
    """A vector ranking, and the messages it read whole: their place with their turn's
    neighbourhood, and their hit rows (see `ask_hits`); none when it read only places."""

    ranking: Ranking
    placed: dict[uuid.UUID, MessagePlace]
    rows: HitRows


NO_VECTOR_RANKING = VectorRanking([], {}, {})


class ScanSettings:
    """The HNSW scan settings each connection holds for its session. Settings sent outside any
    transaction last as long as the connection; known here, they are not sent again. One per
    application, shared by its searches."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: weakref.WeakKeyDictionary[Conn, str] = weakref.WeakKeyDictionary()

    def holds(self, conn: Conn, ef_search: str) -> bool:
        """Whether `conn`'s session was last given `ef_search`, outside any transaction."""
        return self._held.get(conn) == ef_search

    def held(self, conn: Conn, ef_search: str) -> None:
        """`conn`'s session now holds `ef_search`, committed."""
        self._held[conn] = ef_search


# A ranking's statement (its `id` and `score` columns) with each message's place, read in the
# same round trip: the neighbours' scores need it.
PLACED = sql.SQL(
    "SELECT r.id, r.score, m.observation_id, m.ordinal, o.project_id, o.data_subject_id,"
    " o.log_offset, m.occurred_at FROM ({}) r JOIN messages m ON m.id = r.id"
    " JOIN observations o ON o.id = m.observation_id"
)


async def _read_ranking(conn: Conn, ranking: sql.Composable, values: list[Any]) -> Ranking:
    cursor = await conn.execute(PLACED.format(ranking), values)
    return _ranking_of(await cursor.fetchall())


def _ranking_of(rows: list[tuple[Any, ...]]) -> Ranking:
    return [(MessagePlace(row[0], *row[2:]), float(row[1])) for row in rows]


async def text_ranking(
    conn: Conn, scope: Scope, terms: Terms, lexemes: list[str], count: int
) -> Ranking:
    """Up to `count` messages and their BM25 scores over the weighed `terms`, read from the
    messages holding any of `lexemes` (none: no statement, no messages)."""
    if not lexemes:
        return []
    weights = terms.weights
    where, params = scope.where()
    matched = sql.SQL(" + ").join(
        sql.SQL("(CASE WHEN m.search_text @@ %s::tsquery THEN %s ELSE 0 END)") for _ in weights
    )
    query = sql.SQL(
        "WITH scored AS (SELECT id, observation_id, ordinal,"
        "  weight * %s / (1 + %s * (1 - %s + %s * dl / avgdl)) AS score"
        "  FROM (SELECT m.id, m.observation_id, m.ordinal, ({matched}) AS weight,"
        "  greatest(length(m.search_text), 1) AS dl,"
        "  avg(greatest(length(m.search_text), 1)) OVER () AS avgdl"
        "  FROM messages m WHERE {where} AND {match}) s),"
        # Only the best `count` scores and their ties need their place in the log.
        " cut AS (SELECT score FROM scored ORDER BY score DESC OFFSET %s LIMIT 1)"
        " SELECT s.id, s.score FROM scored s"
        " WHERE s.score >= coalesce((SELECT score FROM cut), '-infinity')"
        " ORDER BY s.score DESC,"
        " (SELECT o.log_offset FROM observations o WHERE o.id = s.observation_id) DESC,"
        " s.ordinal LIMIT %s"
    ).format(matched=matched, where=where, match=full_text_match(scope))
    any_term = " | ".join(lexemes)
    values: list[Any] = [K1 + 1, K1, B, B]
    values += [value for pair in weights for value in pair]
    values += [*params, *[any_term] * (1 if scope.turns_only else 2), max(count - 1, 0), count]
    return await _read_ranking(conn, query, values)


async def period_ranking(
    conn: Conn,
    scope: Scope,
    windows: list[tuple[datetime, datetime]],
    vector: Packed | None,
    count: int,
) -> Ranking:
    """Up to `count` messages stored within `windows` (each from its start to before its end),
    most similar to `vector` first."""
    where, params = scope.where()
    bounds = sql.SQL(" OR ").join(
        sql.SQL("(m.occurred_at >= %s AND m.occurred_at < %s)") for _ in windows
    )
    values: list[Any] = []
    similarity: sql.Composable = sql.SQL("0.0")
    if vector is not None:
        similarity = sql.SQL(
            "coalesce((SELECT 1 - (v.embedding <=> %s::vector) FROM {} v"
            " WHERE v.message_id = m.id), 0.0)"
        ).format(vector_partition(scope.project_id))
        values.append(vector)
    values += params
    for start, end in windows:
        values += [start, end]
    values.append(count)
    query = sql.SQL(
        "SELECT m.id, {similarity} AS score FROM messages m WHERE {where} AND ({bounds})"
        " ORDER BY score DESC, m.id LIMIT %s"
    ).format(similarity=similarity, where=where, bounds=bounds)
    return await _read_ranking(conn, query, values)


EXACT_NEAREST = sql.SQL(
    # Materialized, so the planner cannot answer the ordering from an HNSW graph instead.
    "WITH s AS MATERIALIZED (SELECT v.message_id AS id, v.embedding <=> %s::vector AS distance"
    " FROM {vectors} v WHERE {where}) SELECT id, 1 - distance AS score FROM s"
    " ORDER BY distance, id LIMIT %s"
)

# A ranking's messages (its `id` and `score` columns) and those `also` names (score NULL), each
# read whole in the same round trip: place, hit row and, for a message whose subject has another
# of them in a later turn, its turn's neighbourhood (only such turns can border another's or
# share its stretch).
# Neighbours and hits then need no statement of their own.
READ_WHOLE = sql.SQL(
    "SELECT w.id, w.score, w.observation_id, w.ordinal, w.project_id, w.data_subject_id,"
    " w.log_offset, w.occurred_at,"
    " CASE WHEN w.followed THEN ARRAY(SELECT n.log_offset FROM observations n"
    "  WHERE n.project_id = w.project_id AND n.data_subject_id = w.data_subject_id"
    "  AND n.log_offset > w.log_offset ORDER BY n.log_offset LIMIT {reach}) END,"
    " CASE WHEN w.followed THEN (SELECT max(t.ordinal) FROM messages t"
    "  WHERE t.observation_id = w.observation_id) END,"
    " w.role, w.content, w.similarity, w.share"
    " FROM (SELECT r.id, r.score, m.observation_id, m.ordinal, o.project_id, o.data_subject_id,"
    "  o.log_offset, m.occurred_at, m.role, m.content, coalesce(r.score, {cosine}) AS similarity,"
    "  {share} AS share, o.data_subject_id IS NOT NULL"
    "  AND o.log_offset < max(o.log_offset) OVER (PARTITION BY o.data_subject_id) AS followed"
    "  FROM (SELECT a.id, a.score FROM ({ranking}) a"
    "  UNION ALL SELECT x, NULL FROM unnest(%s::uuid[]) AS x) r"
    "  JOIN messages m ON m.id = r.id JOIN observations o ON o.id = m.observation_id) w"
)


async def _ask_vector_ranking(
    conn: Conn,
    ranking: sql.Composable,
    values: list[Any],
    vector: Packed,
    terms: Terms,
    also: list[uuid.UUID],
    count: int,
    project_id: int,
) -> Callable[[], Awaitable[VectorRanking]]:
    """Send a vector ranking's statement; the returned call reads its answer. In a pipeline,
    the statement's rows arrive with the pipeline's end, in the same round trip."""
    if count + len(also) > WHOLE_UP_TO:
        bare = await conn.execute(PLACED.format(ranking), values)

        async def places_only() -> VectorRanking:
            return VectorRanking(_ranking_of(await bare.fetchall()), {}, {})

        return places_only
    cosine, cosine_values = cosine_expression(vector, project_id)
    share, share_values = share_expression(terms)
    query = READ_WHOLE.format(
        cosine=cosine, share=share, ranking=ranking, reach=sql.Literal(WINDOW_TURNS)
    )
    cursor = await conn.execute(query, [*cosine_values, *share_values, *values, uuid_array(also)])

    async def whole() -> VectorRanking:
        ranked: Ranking = []
        placed: dict[uuid.UUID, MessagePlace] = {}
        rows: HitRows = {}
        for row in await cursor.fetchall():
            chunk, score, source, ordinal, project, subject, offset, occurred = row[:8]
            following, last = row[8:10]
            around = None if last is None else TurnNeighbourhood(following, last)
            place = MessagePlace(chunk, source, ordinal, project, subject, offset, occurred, around)
            if score is not None:
                ranked.append((place, float(score)))
            placed[chunk] = place
            rows.setdefault(chunk, (chunk, source, ordinal, *row[10:12], occurred, *row[12:]))
        return VectorRanking(ranked, placed, rows)

    return whole


async def vector_ranking(
    conn: Conn,
    scope: Scope,
    vector: Packed,
    count: int,
    exact: bool = False,
    *,
    scans: ScanSettings,
    terms: Terms | None = None,
    also: list[uuid.UUID] | None = None,
) -> VectorRanking:
    """Up to `count` embedded messages nearest to `vector`, with their cosine similarity: over
    HNSW (its settings sent to `conn` unless `scans` knows it holds them), or with `exact`, by
    comparing the question with every embedded message in scope. When they and the messages
    `also` names (another ranking's) are `WHOLE_UP_TO` at most, each is read whole (see
    `READ_WHOLE`; the share of the weight of `terms` beside its cosine)."""
    weighed = terms or Terms([], "")
    also = also or []
    if exact:
        where, params = scope.where("v")
        ranking = EXACT_NEAREST.format(vectors=vector_partition(scope.project_id), where=where)
        compared = [vector, *params, count]
        asked = _ask_vector_ranking(
            conn, ranking, compared, vector, weighed, also, count, scope.project_id
        )
        return await (await asked)()
    where, params = scope.where("v", kind=False, roles=False)
    nearest = sql.SQL(
        "(SELECT v.message_id AS id, v.embedding <=> %s::vector AS distance"
        " FROM {} v WHERE {} AND {} AND v.role = {} ORDER BY distance LIMIT %s)"
    )
    # One graph per kind (turns, the rest) and role (see migration 0011), each walked on its
    # own: the role is written out, so the planner knows which graph holds the rows.
    kinds = [sql.SQL("v.turn")] if scope.turns_only else [sql.SQL("v.turn"), sql.SQL("NOT v.turn")]
    graphs = [(kind, sql.Literal(role)) for kind in kinds for role in scope.roles or ROLES]
    partition = vector_partition(scope.project_id)
    ranking = sql.SQL(
        "SELECT id, 1 - distance AS score FROM ({}) s ORDER BY distance LIMIT %s"
    ).format(
        sql.SQL(" UNION ALL ").join(
            nearest.format(partition, where, kind, role) for kind, role in graphs
        )
    )
    values: list[Any] = []
    for _ in graphs:
        values += [vector, *params, count]
    values.append(count)
    wanted = str(min(EF_SEARCH, max(40, count)))
    unset = not scans.holds(conn, wanted) or not committing(conn)
    async with generic_plans(conn):
        if unset:
            # Set for the session, in the same round trip. No other statement reads them; set
            # outside any transaction, they last as long as the connection, and are not sent
            # again.
            await conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, false),"
                " set_config('hnsw.iterative_scan', 'relaxed_order', false)",
                (wanted,),
            )
        read = await _ask_vector_ranking(
            conn, ranking, values, vector, weighed, also, count, scope.project_id
        )
    found = await read()
    if unset and committing(conn):
        scans.held(conn, wanted)
    return found
