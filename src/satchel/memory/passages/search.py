"""Hybrid passage search: BM25 over the full-text index fused with vector similarity.

Words common to much of the scope (speakers' names, mostly) are left out of the question the
embedder reads; a day or month the question names draws in the messages stored around it.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import math
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from psycopg import sql

from satchel.memory.passages.embedder import Embedder, EmbedderUnavailable
from satchel.memory.passages.periods import Period, named_periods, shifted
from satchel.memory.store.arrays import int_array, text_array, uuid_array
from satchel.memory.store.database import Conn
from satchel.memory.store.messages import ROLES
from satchel.memory.store.plans import committing, generic_plans
from satchel.memory.store.terms import frequencies, tsquery_lexeme
from satchel.memory.store.vectors import Packed, packed

NO_OFFSET = -1
DEFAULT_CANDIDATES = 200
PREVIEW_CHARACTERS = 512
K1 = 0.7  # BM25 term saturation
B = 0.4  # BM25 length normalization
TEXT_WEIGHT = 0.35  # share of the best-normalized BM25 score; the rest is cosine similarity
COSINE_FLOOR = 0.1  # cosine similarity below this counts as unrelated
SPECULATED = 3  # read this many times `limit` of the best messages beside their neighbours
NEIGHBOUR_WEIGHT = 0.3  # share of the previous and next messages' scores a message inherits
SESSION_WEIGHT = 1.0  # share of its session's score (the best messages said at the same time)
SESSION_TOP = 4  # how many of a session's best messages its score averages
COMMON_SHARE = 0.2  # a word in more of the scope's messages than this is not embedded
MAX_TEXT_MATCHES = 5_000  # messages full text reads for a question (see `_seeking`)
PERIOD_WEIGHT = 0.2  # what being said in a period the question names adds
PERIOD_SLACK = timedelta(days=3)  # how far around a named period still counts
RECENT_QUESTIONS = 256  # question vectors remembered, newest last
COMMON_SCOPES = 1024  # scopes whose common words are remembered, for `likely_focus`
# The HNSW candidate list. Iterative scans go on past it until the query's LIMIT is met; a list
# as long as a 200-row LIMIT made one query in twenty 10 to 40 times slower at 100k vectors.
EF_SEARCH = 100

_recent: OrderedDict[tuple[str, str], Packed] = OrderedDict()
_common: OrderedDict[Scope, set[str]] = OrderedDict()
_scan_settings: weakref.WeakKeyDictionary[Conn, str] = weakref.WeakKeyDictionary()  # ef_search set


@dataclass(frozen=True, slots=True)
class Scope:
    """Where to look: a project, optionally one data subject, some roles, observed turns only."""

    project_id: int
    subject: str = ""
    roles: tuple[str, ...] = ()
    turns_only: bool = False

    def where(
        self, table: str = "m", kind: bool = True, roles: bool = True
    ) -> tuple[sql.Composable, list[Any]]:
        """The scope as a condition over `table` (`messages m`, or `message_vectors v`, which
        carries the message's scope columns); `kind=False` leaves turns-only to the caller,
        `roles=False` the roles."""
        name = sql.Identifier(table)
        clause: sql.Composable = sql.SQL("{}.project_id = %s").format(name)
        params: list[Any] = [self.project_id]
        if self.subject:
            clause = sql.SQL("{} AND {}.data_subject_id = %s").format(clause, name)
            params.append(self.subject)
        if self.roles and roles:
            clause = sql.SQL("{} AND {}.role = ANY(%s)").format(clause, name)
            params.append(list(self.roles))
        if self.turns_only and kind:
            clause = sql.SQL("{} AND {}.turn").format(clause, name)
        return clause, params


@dataclass(frozen=True, slots=True)
class Hit:
    """One found message, its place in the log, and its similarity to the question: the cosine
    similarity (-1..1) of the two as the embedder reads them, or without an embedder the share of
    the question's term weight the message holds (0..1)."""

    chunk_id: uuid.UUID
    source_id: uuid.UUID
    ordinal: int
    role: str
    content: str
    occurred_at: datetime
    similarity: float

    def preview(self, limit: int = PREVIEW_CHARACTERS) -> str:
        return self.content[:limit]

    @property
    def message_bytes(self) -> int:
        return len(self.content.encode("utf-8"))

    @property
    def content_digest(self) -> str:
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Coverage:
    """How far the indexes are built: the generation, the log's end, what its vectors cover and
    how far its lexeme counts reach."""

    generation_id: str
    embedder: str
    through_offset: int
    covered_through_offset: int
    counted_through_offset: int


@dataclass(frozen=True, slots=True)
class Found:
    """A search's hits and how complete the index behind them is; `embedded`: an embedder read
    the question, so every similarity is a cosine (otherwise the ranking was full text alone)."""

    generation_id: str
    through_offset: int
    covered_through_offset: int
    build_state: str
    approximate: bool
    hits: list[Hit]
    embedded: bool = True


# The project's coverage and each word's lexemes, in one statement (one round trip, no pipeline).
COVERAGE_AND_LEXEMES = (
    "SELECT p.stored, g.id, g.embedder, coalesce(r.vectors_through, -1),"
    " coalesce(r.terms_through, -1),"
    " (SELECT json_agg(tsvector_to_array(to_tsvector('english', w)) ORDER BY n)"
    "  FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n))"
    " FROM (SELECT %s::bigint AS id) q LEFT JOIN projects p ON p.id = q.id"
    " LEFT JOIN passage_generations g ON g.project_id = p.id"
    " LEFT JOIN passage_progress r ON r.project_id = p.id"
)
WORD_LEXEMES = (
    "SELECT tsvector_to_array(to_tsvector('english', w))"
    " FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n) ORDER BY n"
)


def _coverage(row: tuple[Any, ...] | None) -> Coverage:
    if row is None or row[0] is None:
        return Coverage("", "", NO_OFFSET, NO_OFFSET, NO_OFFSET)
    stored, generation, embedder, covered, counted = row
    if generation is None:
        return Coverage("", "", stored, NO_OFFSET, counted)
    return Coverage(str(generation), embedder, stored, min(covered, stored), counted)


async def coverage_and_lexemes(
    conn: Conn, project_id: int, words: list[str]
) -> tuple[Coverage, list[list[str]]]:
    """The project's coverage and each word's lexemes, asked in one statement."""
    cursor = await conn.execute(COVERAGE_AND_LEXEMES, (words, project_id))
    row = await cursor.fetchone()
    assert row is not None
    return _coverage(row[:5]), [list(found) for found in row[5] or []]


# Not frozen, like `Placed`: made for every candidate, and a frozen dataclass takes four times
# as long to make (each field set through object.__setattr__).
@dataclass(slots=True)
class Around:
    """What a turn's neighbours need: the log offset of its subject's next turn (None when it
    is the last) and the ordinal of its own last message."""

    next_offset: int | None
    last_ordinal: int


@dataclass(slots=True)
class Placed:
    """A candidate message and its place: turn, position in it, subject and log offset, and,
    when read with it, what its turn's neighbours need."""

    id: uuid.UUID
    observation_id: uuid.UUID
    ordinal: int
    project_id: int
    subject: str | None
    log_offset: int
    occurred_at: datetime
    around: Around | None = None


Ranking = list[tuple[Placed, float]]

# A ranking's statement (its `id` and `score` columns) with each message's place, read in the
# same round trip: the neighbours' scores need it.
PLACED = sql.SQL(
    "SELECT r.id, r.score, m.observation_id, m.ordinal, o.project_id, o.data_subject_id,"
    " o.log_offset, m.occurred_at FROM ({}) r JOIN messages m ON m.id = r.id"
    " JOIN observations o ON o.id = m.observation_id"
)


async def _ranked(conn: Conn, ranking: sql.Composable, values: list[Any]) -> Ranking:
    cursor = await conn.execute(PLACED.format(ranking), values)
    return _ranking_of(await cursor.fetchall())


def _ranking_of(rows: list[tuple[Any, ...]]) -> Ranking:
    return [(Placed(row[0], *row[2:]), float(row[1])) for row in rows]


@dataclass(frozen=True, slots=True)
class Terms:
    """The question's lexemes with their BM25 weights, and the question without common words."""

    weights: list[tuple[str, float]]
    focused: str
    matches: list[int] = field(default_factory=list)  # each weighted lexeme's scope count


async def question_terms(conn: Conn, scope: Scope, question: str, counted: int) -> Terms:
    """Weigh the question's lexemes over the scope (see `weigh`)."""
    cursor = await conn.execute(WORD_LEXEMES, (question.split(),))
    per_word = [list(row[0]) for row in await cursor.fetchall()]
    return await weigh(conn, scope, question, per_word, counted)


async def weigh(
    conn: Conn, scope: Scope, question: str, per_word: list[list[str]], counted: int
) -> Terms:
    """Weigh the question's lexemes (`per_word`: each word's) over the scope, and drop from the
    text the embedder reads every word whose lexemes are all in more than `COMMON_SHARE` of the
    scope's messages (`counted`: how far the project's lexeme counts reach)."""
    words = question.split()
    lexemes = list(dict.fromkeys(lexeme for found in per_word for lexeme in found))
    if not lexemes:
        return Terms([], question)
    where, params = scope.where()
    found = await frequencies(
        conn,
        scope.project_id,
        scope.subject,
        scope.roles,
        scope.turns_only,
        lexemes,
        where,
        params,
        counted,
    )
    total, holding = found.total, found.frequencies
    weights, matches = [], []
    for lexeme, frequency in zip(lexemes, holding, strict=True):
        idf = _idf(total, frequency)
        if frequency and idf > 0:
            weights.append((tsquery_lexeme(lexeme), idf))
            matches.append(frequency)
    common = {x for x, f in zip(lexemes, holding, strict=True) if f > COMMON_SHARE * total}
    kept = [w for w, found in zip(words, per_word, strict=True) if not found or set(found) - common]
    _learn(scope, set(words) - set(kept), kept)
    return Terms(weights, " ".join(kept) or question, matches)


def likely_focus(scope: Scope, question: str) -> str:
    """The question without the words earlier questions found common in `scope`: what
    `question_terms` will most likely leave for the embedder, known before the database is
    asked (so the embedding can start at once)."""
    common = _common.get(scope, set())
    return " ".join(w for w in question.split() if w not in common) or question


def _learn(scope: Scope, dropped: set[str], kept: list[str]) -> None:
    known = _common.setdefault(scope, set())
    _common.move_to_end(scope)
    known.difference_update(kept)
    known.update(dropped)
    if len(_common) > COMMON_SCOPES:
        _common.popitem(last=False)


async def text_ranking(
    conn: Conn, scope: Scope, terms: Terms, count: int, vectored: bool = False
) -> Ranking:
    """Up to `count` messages and their BM25 scores over full-text lexemes (any term matches);
    `vectored`: a vector ranking joins this one (see `_seeking`)."""
    weights = terms.weights
    seeking = _seeking(terms, vectored)
    if not seeking:
        return []
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
        "  FROM messages m WHERE {where} AND {found}) s),"
        # Only the best `count` scores and their ties need their place in the log.
        " cut AS (SELECT score FROM scored ORDER BY score DESC OFFSET %s LIMIT 1)"
        " SELECT s.id, s.score FROM scored s"
        " WHERE s.score >= coalesce((SELECT score FROM cut), '-infinity')"
        " ORDER BY s.score DESC,"
        " (SELECT o.log_offset FROM observations o WHERE o.id = s.observation_id) DESC,"
        " s.ordinal LIMIT %s"
    ).format(matched=matched, where=where, found=_found(scope))
    any_term = " | ".join(seeking)
    values: list[Any] = [K1 + 1, K1, B, B]
    values += [value for pair in weights for value in pair]
    values += [*params, *[any_term] * (1 if scope.turns_only else 2), max(count - 1, 0), count]
    return await _ranked(conn, query, values)


def _seeking(terms: Terms, vectored: bool) -> list[str]:
    """The lexemes whose messages are read: the rarest first, while they hold at most
    `MAX_TEXT_MATCHES` messages together. A message holding only the commoner ones scores too
    little to rank, and reading them all would cost a scan of the scope. Without vectors the
    rarest is read whatever it holds (full text is all there is); with them, a lexeme held by
    more messages than that adds too little to be worth reading."""
    order = sorted(range(len(terms.weights)), key=lambda i: (terms.matches[i], i))
    chosen: list[str] = []
    seen = 0
    for index in order:
        if (chosen or vectored) and seen + terms.matches[index] > MAX_TEXT_MATCHES:
            break
        chosen.append(terms.weights[index][0])
        seen += terms.matches[index]
    return chosen


def _found(scope: Scope) -> sql.Composable:
    """The full-text match, written so each of the two indexes (turns, the rest) can serve it."""
    if scope.turns_only:
        return sql.SQL("m.search_text @@ %s::tsquery")
    return sql.SQL(
        "((m.turn AND m.search_text @@ %s::tsquery)"
        " OR (NOT m.turn AND m.search_text @@ %s::tsquery))"
    )


def _idf(total: int, frequency: int) -> float:
    return math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))


def vectors(project_id: int) -> sql.Identifier:
    """The project's own partition of `message_vectors` (migration 0013), named so that a
    statement plans, opens and locks no other project's: a generic plan of the parent holds
    and locks every partition, however many its pruning leaves out."""
    return sql.Identifier(f"message_vectors_{project_id}")


EXACT_NEAREST = sql.SQL(
    # Materialized, so the planner cannot answer the ordering from an HNSW graph instead.
    "WITH s AS MATERIALIZED (SELECT v.message_id AS id, v.embedding <=> %s::vector AS distance"
    " FROM {vectors} v WHERE {where}) SELECT id, 1 - distance AS score FROM s"
    " ORDER BY distance, id LIMIT %s"
)


@dataclass(frozen=True, slots=True)
class Nearest:
    """A vector ranking, and the messages it read whole: their place with their turn's
    neighbourhood, and their hit rows (see `ask_hits`); none when it read only places."""

    ranking: Ranking
    placed: dict[uuid.UUID, Placed]
    rows: HitRows


NO_NEAREST = Nearest([], {}, {})

# A ranking's messages (its `id` and `score` columns) and those `also` names (score NULL), each
# read whole in the same round trip: place, hit row and, for a message whose subject has another
# of them in a later turn, its turn's neighbourhood (only such turns can border another's).
# Neighbours and hits then need no statement of their own.
READ_WHOLE = sql.SQL(
    "SELECT w.id, w.score, w.observation_id, w.ordinal, w.project_id, w.data_subject_id,"
    " w.log_offset, w.occurred_at,"
    " CASE WHEN w.followed THEN (SELECT min(n.log_offset) FROM observations n"
    "  WHERE n.project_id = w.project_id AND n.data_subject_id = w.data_subject_id"
    "  AND n.log_offset > w.log_offset) END,"
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
# Up to this many messages in all are read whole. Past it, reading every one's content and
# neighbourhood costs more than the statements it saves: only places are read, and neighbours
# and hits after fusion, for the few that need them (see `ranked_hits`).
WHOLE_UP_TO = 64


async def _ask_nearest(
    conn: Conn,
    ranking: sql.Composable,
    values: list[Any],
    vector: Packed,
    terms: Terms,
    also: list[uuid.UUID],
    count: int,
    project_id: int,
) -> Callable[[], Awaitable[Nearest]]:
    """Send a vector ranking's statement; the returned call reads its answer. In a pipeline,
    the statement's rows arrive with the pipeline's end, in the same round trip."""
    if count + len(also) > WHOLE_UP_TO:
        bare = await conn.execute(PLACED.format(ranking), values)

        async def places_only() -> Nearest:
            return Nearest(_ranking_of(await bare.fetchall()), {}, {})

        return places_only
    cosine, cosine_values = _cosine(vector, project_id)
    share, share_values = _share(terms)
    query = READ_WHOLE.format(cosine=cosine, share=share, ranking=ranking)
    cursor = await conn.execute(query, [*cosine_values, *share_values, *values, uuid_array(also)])

    async def whole() -> Nearest:
        ranked: Ranking = []
        placed: dict[uuid.UUID, Placed] = {}
        rows: HitRows = {}
        for row in await cursor.fetchall():
            chunk, score, source, ordinal, project, subject, offset, occurred = row[:8]
            after, last = row[8:10]
            around = None if last is None else Around(after, last)
            place = Placed(chunk, source, ordinal, project, subject, offset, occurred, around)
            if score is not None:
                ranked.append((place, float(score)))
            placed[chunk] = place
            rows.setdefault(chunk, (chunk, source, ordinal, *row[10:12], occurred, *row[12:]))
        return Nearest(ranked, placed, rows)

    return whole


async def vector_ranking(
    conn: Conn,
    scope: Scope,
    vector: Packed,
    count: int,
    exact: bool = False,
    *,
    terms: Terms | None = None,
    also: list[uuid.UUID] | None = None,
) -> Nearest:
    """Up to `count` embedded messages nearest to `vector`, with their cosine similarity: over
    HNSW, or with `exact`, by comparing the question with every embedded message in scope.
    When they and the messages `also` names (another ranking's) are `WHOLE_UP_TO` at most, each
    is read whole (see `READ_WHOLE`; the share of the weight of `terms` beside its cosine)."""
    weighed = terms or Terms([], "")
    also = also or []
    if exact:
        where, params = scope.where("v")
        ranking = EXACT_NEAREST.format(vectors=vectors(scope.project_id), where=where)
        compared = [vector, *params, count]
        asked = _ask_nearest(
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
    ranking = sql.SQL(
        "SELECT id, 1 - distance AS score FROM ({}) s ORDER BY distance LIMIT %s"
    ).format(
        sql.SQL(" UNION ALL ").join(
            nearest.format(vectors(scope.project_id), where, kind, role) for kind, role in graphs
        )
    )
    values: list[Any] = []
    for _ in graphs:
        values += [vector, *params, count]
    values.append(count)
    wanted = str(min(EF_SEARCH, max(40, count)))
    unset = _scan_settings.get(conn) != wanted or not committing(conn)
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
        read = await _ask_nearest(
            conn, ranking, values, vector, weighed, also, count, scope.project_id
        )
    found = await read()
    if unset and committing(conn):
        _scan_settings[conn] = wanted
    return found


async def period_ranking(
    conn: Conn, scope: Scope, periods: list[Period], vector: Packed | None, count: int
) -> Ranking:
    """Up to `count` messages stored in the named periods (with slack), most similar first."""
    where, params = scope.where()
    bounds = sql.SQL(" OR ").join(
        sql.SQL("(m.occurred_at >= %s AND m.occurred_at < %s)") for _ in periods
    )
    values: list[Any] = []
    similarity: sql.Composable = sql.SQL("0.0")
    if vector is not None:
        similarity = sql.SQL(
            "coalesce((SELECT 1 - (v.embedding <=> %s::vector) FROM {} v"
            " WHERE v.message_id = m.id), 0.0)"
        ).format(vectors(scope.project_id))
        values.append(vector)
    values += params
    for start, end in periods:
        values += [shifted(start, -PERIOD_SLACK), shifted(end, PERIOD_SLACK)]
    values.append(count)
    query = sql.SQL(
        "SELECT m.id, {similarity} AS score FROM messages m WHERE {where} AND ({bounds})"
        " ORDER BY score DESC, m.id LIMIT %s"
    ).format(similarity=similarity, where=where, bounds=bounds)
    return await _ranked(conn, query, values)


def fuse(text: Ranking, vector: Ranking, dated: Ranking | None = None) -> dict[uuid.UUID, float]:
    """A weighted sum: BM25 over its best score, cosine similarity above the floor, and a bonus
    for being said in a period the question names (a message found only that way is scored by
    its similarity)."""
    scores: dict[uuid.UUID, float] = {}
    best = max((score for _, score in text), default=0.0) or 1.0
    for placed, score in text:
        scores[placed.id] = scores.get(placed.id, 0.0) + TEXT_WEIGHT * score / best
    for placed, similarity in vector:
        if similarity > COSINE_FLOOR:
            chunk = placed.id
            scores[chunk] = scores.get(chunk, 0.0) + (1 - TEXT_WEIGHT) * _related(similarity)
    for placed, similarity in dated or []:
        chunk = placed.id
        if chunk not in scores:
            scores[chunk] = (1 - TEXT_WEIGHT) * _related(similarity)
        scores[chunk] += PERIOD_WEIGHT
    return scores


def _related(similarity: float) -> float:
    return max(0.0, similarity - COSINE_FLOOR)


def places(*rankings: Ranking) -> dict[uuid.UUID, Placed]:
    """Where each ranked message is."""
    return {placed.id: placed for ranking in rankings for placed, _ in ranking}


async def with_neighbours(
    conn: Conn, scores: dict[uuid.UUID, float], place_of: dict[uuid.UUID, Placed]
) -> list[tuple[uuid.UUID, float]]:
    """Each message also scores a share of the messages said just before and after it (same
    data subject), since an answer often spans a question and its reply; best first.
    `place_of`: where each scored message is."""
    found = [place_of[chunk] for chunk in scores]
    before, after = await _adjacent(conn, found)
    # Hundreds of candidates in a passage search: each id is looked up as few times as can be
    # (a UUID hashes in Python), the rest goes by position.
    smoothed: list[float] = []
    sessions: dict[tuple[Any, Any], list[float]] = {}
    session_of: list[tuple[Any, Any]] = []
    for placed, score in zip(found, scores.values(), strict=True):
        chunk = placed.id
        around = 0.0
        if (earlier := before.get(chunk)) is not None:
            around += scores[earlier]
        if (later := after.get(chunk)) is not None:
            around += scores[later]
        smoothed.append(score + NEIGHBOUR_WEIGHT * around)
        key = (placed.subject, placed.occurred_at)
        session_of.append(key)
        sessions.setdefault(key, []).append(score)
    if SESSION_WEIGHT:
        session_score = {
            key: sum(sorted(values, reverse=True)[:SESSION_TOP]) / SESSION_TOP
            for key, values in sessions.items()
        }
        smoothed = [
            value + SESSION_WEIGHT * session_score[key]
            for value, key in zip(smoothed, session_of, strict=True)
        ]
    # Ties in the order of the ids' text, which is the order of their 128-bit values.
    return sorted(zip(scores, smoothed, strict=True), key=lambda item: (-item[1], item[0].int))


Links = dict[uuid.UUID, uuid.UUID]


async def _adjacent(conn: Conn, found: list[Placed]) -> tuple[Links, Links]:
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
    turns: dict[tuple[str, int], list[Placed]] = {}
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
    for subject, low, high, last in await _adjacent_turns(conn, found, turns, pairs):
        ending = [p for p in turns[(subject, low)] if p.ordinal == last]
        opening = [p for p in turns[(subject, high)] if p.ordinal == 0]
        if ending and opening:
            before[opening[0].id] = ending[0].id
            after[ending[0].id] = opening[0].id
    return before, after


Pair = tuple[str, int, int]


async def _adjacent_turns(
    conn: Conn,
    found: list[Placed],
    turns: dict[tuple[str, int], list[Placed]],
    pairs: list[Pair],
) -> list[tuple[str, int, int, int]]:
    """The pairs of turns (subject, lower and higher offset) with no turn of their subject
    between them, each with the lower's last ordinal: from what the candidates were read with,
    or when some were read without it, asked of the database."""
    arounds = [turns[(subject, low)][0].around for subject, low, _ in pairs]
    if all(around is not None for around in arounds):
        return [
            (subject, low, high, around.last_ordinal)
            for (subject, low, high), around in zip(pairs, arounds, strict=True)
            if around is not None and around.next_offset == high
        ]
    cursor = await conn.execute(
        "SELECT p.s, p.lo, p.hi, (SELECT max(m.ordinal) FROM observations l"
        "  JOIN messages m ON m.observation_id = l.id"
        "  WHERE l.project_id = %s AND l.data_subject_id = p.s AND l.log_offset = p.lo)"
        " FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS p(s, lo, hi)"
        " WHERE NOT EXISTS (SELECT 1 FROM observations o WHERE o.project_id = %s"
        "  AND o.data_subject_id = p.s AND o.log_offset > p.lo AND o.log_offset < p.hi)",
        (
            found[0].project_id,
            text_array(pair[0] for pair in pairs),
            int_array(pair[1] for pair in pairs),
            int_array(pair[2] for pair in pairs),
            found[0].project_id,
        ),
    )
    return list(await cursor.fetchall())


HitRows = dict[uuid.UUID, tuple[Any, ...]]


def _cosine(vector: Packed, project_id: int) -> tuple[sql.Composable, list[Any]]:
    """The cosine similarity of `m`'s vector (of project `project_id`) to `vector` (NULL when it
    has none)."""
    expression = sql.SQL(
        "(SELECT 1 - (v.embedding <=> %s::vector) FROM {} v WHERE v.message_id = m.id)"
    ).format(vectors(project_id))
    return expression, [vector]


def _share(terms: Terms) -> tuple[sql.Composable, list[Any]]:
    """The share of the question's term weight `m` holds (0.0 when the terms weigh nothing)."""
    weight = sum(idf for _, idf in terms.weights)
    if not weight:
        return sql.SQL("0.0"), []
    held = sql.SQL(" + ").join(
        sql.SQL("(CASE WHEN m.search_text @@ %s::tsquery THEN %s ELSE 0 END)")
        for _ in terms.weights
    )
    return sql.SQL("({}) / %s").format(held), [*(v for pair in terms.weights for v in pair), weight]


async def ask_hits(
    conn: Conn, project_id: int, chunks: list[uuid.UUID], vector: Packed | None, terms: Terms
) -> Callable[[], Awaitable[HitRows]]:
    """Send the statement that reads `chunks` with the cosine similarity of their vectors to
    `vector` (NULL without one, or without `vector`) and the share of the question's term weight
    they hold; the returned call reads its rows. In a pipeline, the statement travels with the
    next one sent."""
    cosine, values = (
        _cosine(vector, project_id) if vector is not None else (sql.SQL("NULL::float8"), [])
    )
    share, share_values = _share(terms)
    values += share_values
    query = sql.SQL(
        "SELECT m.id, m.observation_id, m.ordinal, m.role, m.content, m.occurred_at, {}, {}"
        " FROM messages m WHERE m.id = ANY(%s::uuid[])"
    ).format(cosine, share)
    cursor = await conn.execute(query, [*values, uuid_array(chunks)])

    async def rows() -> HitRows:
        return {row[0]: row for row in await cursor.fetchall()}

    return rows


def hits_in(ranked: list[tuple[uuid.UUID, float]], rows: HitRows) -> list[Hit]:
    """The ranked messages that `rows` hold, in order, each with its cosine similarity, or,
    when the worker has not embedded it yet, its share of the question's term weight."""
    hits = []
    for chunk, _ in ranked:
        if chunk in rows:
            _, source, ordinal, role, content, occurred_at, cosine, share = rows[chunk]
            close: float = share if cosine is None else cosine
            hits.append(Hit(chunk, source, ordinal, role, content, occurred_at, min(1.0, close)))
    return hits


async def ranked_hits(
    conn: Conn,
    project_id: int,
    scores: dict[uuid.UUID, float],
    place_of: dict[uuid.UUID, Placed],
    vector: Packed | None,
    terms: Terms,
    limit: int,
    known: HitRows | None = None,
) -> tuple[list[tuple[uuid.UUID, float]], HitRows]:
    """The `limit` best messages after their neighbours' shares (`with_neighbours`), and their
    rows (`ask_hits`; `known`: rows read already). Of the best `SPECULATED` x `limit` before
    those shares, the rows not known are read in the same round trip as the neighbours; a
    message the shares lift from further down is read after."""
    rows = dict(known or {})
    best = heapq.nlargest(limit * SPECULATED, scores, key=scores.__getitem__)
    likely = [chunk for chunk in best if chunk not in rows]
    if likely:
        async with generic_plans(conn):
            read = await ask_hits(conn, project_id, likely, vector, terms)
            ranked = (await with_neighbours(conn, scores, place_of))[:limit]
            rows.update(await read())
    else:
        ranked = (await with_neighbours(conn, scores, place_of))[:limit]
    missing = [chunk for chunk, _ in ranked if chunk not in rows and chunk not in likely]
    if missing:
        rows.update(await (await ask_hits(conn, project_id, missing, vector, terms))())
    chosen = {chunk for chunk, _ in ranked}
    return ranked, {chunk: row for chunk, row in rows.items() if chunk in chosen}


def embed_question(embedder: Embedder | None, question: str) -> asyncio.Future[Packed | None]:
    """The question's vector in pgvector's binary form, or None when no embedder can answer; the
    embedding starts in a thread at once. The last `RECENT_QUESTIONS` questions are remembered
    (a retried or repeated question is not embedded again)."""
    loop = asyncio.get_running_loop()
    if embedder is None:
        return _settled(loop, None)
    key = (embedder.identity, question)
    if key in _recent:
        _recent.move_to_end(key)
        return _settled(loop, _recent[key])
    embedding = loop.run_in_executor(None, _packed, embedder, question)
    embedding.add_done_callback(lambda done: _remember(key, done))
    return embedding


def _settled(
    loop: asyncio.AbstractEventLoop, vector: Packed | None
) -> asyncio.Future[Packed | None]:
    settled: asyncio.Future[Packed | None] = loop.create_future()
    settled.set_result(vector)
    return settled


def _packed(embedder: Embedder, question: str) -> Packed | None:
    try:
        return packed(embedder.embed([question])[0])
    except EmbedderUnavailable:
        return None


def _remember(key: tuple[str, str], done: asyncio.Future[Packed | None]) -> None:
    if done.cancelled() or done.exception() is not None or (vector := done.result()) is None:
        return
    _recent[key] = vector
    if len(_recent) > RECENT_QUESTIONS:
        _recent.popitem(last=False)


def _build_state(state: Coverage, usable: bool) -> str:
    """`ready` when the configured embedder's vectors cover the whole log, else `building`: the
    worker has newer messages to embed, or a generation for this embedder to build."""
    covered = usable and state.covered_through_offset >= state.through_offset
    return "ready" if covered or state.through_offset == NO_OFFSET else "building"


async def _side_by_side(
    conn: Conn,
    spare: Conn,
    scope: Scope,
    terms: Terms,
    count: int,
    exact: bool,
    embedding: asyncio.Future[Packed | None],
) -> tuple[Ranking, Nearest]:
    """The full-text ranking on `conn` and, beside it on `spare` once the question is embedded,
    the vector ranking: two connections, so the database runs both at once."""
    loop = asyncio.get_running_loop()
    text = asyncio.Task(text_ranking(conn, scope, terms, count, True), loop=loop, eager_start=True)
    try:
        vector = await asyncio.shield(embedding)
        nearest = NO_NEAREST
        if vector is not None:
            nearest = await vector_ranking(spare, scope, vector, count, exact, terms=terms)
    finally:
        await asyncio.wait([text])  # neither statement outlives the call
        if not text.cancelled():
            text.exception()  # a failure of the vector ranking's is the one raised
    return text.result(), nearest


async def search_passages(
    conn: Conn,
    scope: Scope,
    question: str,
    *,
    limit: int,
    candidates: int = 0,
    exact: bool = False,
    embedder: Embedder | None,
    spare: Conn | None = None,
) -> Found:
    """The `limit` best messages for `question`, and how complete the index behind them is.

    `candidates` (default `DEFAULT_CANDIDATES`) bounds each ranking; `exact` compares the
    question with every embedded message in scope instead of walking the HNSW graph. Messages
    without a vector of the embedder's generation are ranked by full text, their similarity
    their share of the question's term weight (nothing is embedded here but the question). With
    no embedder that can run, the ranking is full text
    alone and the answer says `embedded` is false. With a `spare` connection, a vector ranking
    of more than `WHOLE_UP_TO` candidates runs on it beside the full-text ranking.
    """
    pool = max(candidates or DEFAULT_CANDIDATES, limit)
    # The embedder starts on the likely focus at once, in a thread, while the database weighs
    # the question's words and ranks by full text; if the focus turns out otherwise, the real
    # one is embedded instead.
    guess = likely_focus(scope, question)
    early = embed_question(embedder, guess)
    embedding = early
    try:
        state, per_word = await coverage_and_lexemes(conn, scope.project_id, question.split())
        usable = embedder is not None and state.embedder == embedder.identity
        terms = await weigh(conn, scope, question, per_word, state.counted_through_offset)
        if terms.focused != guess:
            embedding = embed_question(embedder, terms.focused)
        # Read by places only, a ranking of so many needs nothing of the full-text one's.
        beside = spare if usable and pool > WHOLE_UP_TO else None
        if beside is not None:
            text, nearest = await _side_by_side(conn, beside, scope, terms, pool, exact, embedding)
        else:
            text = await text_ranking(conn, scope, terms, pool, vectored=usable)
    finally:
        await asyncio.wait({early, embedding})
        early.exception()  # retrieved, so an unused guess that failed stays quiet
    literal = await embedding
    # Only the project's own generation's vectors can be compared with this question's.
    vector = literal if usable else None
    if beside is None:
        nearest = NO_NEAREST
        if vector is not None:
            also = [placed.id for placed, _ in text]
            nearest = await vector_ranking(conn, scope, vector, pool, exact, terms=terms, also=also)
    periods = named_periods(question)
    dated = await period_ranking(conn, scope, periods, vector, pool) if periods else []
    scores = fuse(text, nearest.ranking, dated)
    place_of = {**places(text, nearest.ranking, dated), **nearest.placed}
    ranked, rows = await ranked_hits(
        conn, scope.project_id, scores, place_of, vector, terms, limit, nearest.rows
    )
    return Found(
        generation_id=state.generation_id if usable else "",
        through_offset=state.through_offset,
        covered_through_offset=state.covered_through_offset if usable else NO_OFFSET,
        build_state=_build_state(state, usable),
        approximate=not exact,
        hits=hits_in(ranked, rows),
        embedded=literal is not None,
    )
