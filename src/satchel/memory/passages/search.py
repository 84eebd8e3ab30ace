"""Hybrid passage search: BM25 over the full-text index fused with vector similarity.

The question is embedded in a thread while the database weighs its words and ranks by full
text; with a spare connection the vector ranking runs beside the full-text one. Words common to
much of the scope (speakers' names, mostly) are left out of the question the embedder reads; a
day or month the question names draws in the messages stored around it. The maths is in
`ranking`, the statements in the store's `passage_*` modules.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import uuid
from dataclasses import dataclass
from datetime import datetime

from satchel.memory.passages.caches import CommonWords, QuestionKey, QuestionVectors, SearchCaches
from satchel.memory.passages.embedder import Embedder, EmbedderUnavailable
from satchel.memory.passages.neighbours import with_neighbours
from satchel.memory.passages.periods import named_periods
from satchel.memory.passages.ranking import (
    MAX_TEXT_MATCHES,
    common_lexemes,
    fuse,
    idf,
    lexemes_to_read,
    period_window,
    places,
)
from satchel.memory.store.database import Conn
from satchel.memory.store.passage_hits import HitRows, ask_hits
from satchel.memory.store.passage_rankings import (
    NO_VECTOR_RANKING,
    WHOLE_UP_TO,
    MessagePlace,
    Ranking,
    ScanSettings,
    VectorRanking,
    period_ranking,
    text_ranking,
    vector_ranking,
)
from satchel.memory.store.passage_scope import (
    NO_OFFSET,
    Coverage,
    Scope,
    Terms,
    coverage_and_lexemes,
    word_lexemes,
)
from satchel.memory.store.plans import generic_plans
from satchel.memory.store.terms import frequencies, tsquery_lexeme
from satchel.memory.store.vectors import Packed, packed

DEFAULT_CANDIDATES = 200
PREVIEW_CHARACTERS = 512
SPECULATED = 3  # read this many times `limit` of the best messages beside their neighbours


@dataclass(frozen=True, slots=True)
class SearchLimits:
    """How much a search reads: `text_matches`, the messages full text reads for a question (see
    `lexemes_to_read`); `speculated`, how many times `limit` of the best messages before the
    neighbours' shares have their rows read beside the neighbours (see `ranked_hits`)."""

    text_matches: int = MAX_TEXT_MATCHES
    speculated: int = SPECULATED


LIMITS = SearchLimits()


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
class SearchAnswer:
    """A search's hits and how complete the index behind them is; `embedded`: an embedder read
    the question, so every similarity is a cosine (otherwise the ranking was full text alone)."""

    generation_id: str
    through_offset: int
    covered_through_offset: int
    build_state: str
    approximate: bool
    hits: list[Hit]
    embedded: bool = True


async def question_terms(
    conn: Conn, scope: Scope, question: str, counted: int, common_words: CommonWords
) -> Terms:
    """Weigh the question's lexemes over the scope (see `weigh`)."""
    per_word = await word_lexemes(conn, question.split())
    return await weigh(conn, scope, question, per_word, counted, common_words)


async def weigh(
    conn: Conn,
    scope: Scope,
    question: str,
    per_word: list[list[str]],
    counted: int,
    common_words: CommonWords,
) -> Terms:
    """Weigh the question's lexemes (`per_word`: each word's) over the scope, and drop from the
    text the embedder reads every word whose lexemes are all common in the scope's messages
    (`counted`: how far the project's lexeme counts reach); `common_words` learns which."""
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
        weight = idf(total, frequency)
        if frequency and weight > 0:
            weights.append((tsquery_lexeme(lexeme), weight))
            matches.append(frequency)
    common = common_lexemes(lexemes, holding, total)
    kept = [w for w, found in zip(words, per_word, strict=True) if not found or set(found) - common]
    common_words.learn(scope, set(words) - set(kept), kept)
    return Terms(weights, " ".join(kept) or question, matches)


def embed_question(
    embedder: Embedder | None, question: str, questions: QuestionVectors
) -> asyncio.Future[Packed | None]:
    """The question's vector in pgvector's binary form, or None when no embedder can answer; the
    embedding starts in a thread at once, unless `questions` remembers it (a retried or repeated
    question is not embedded again)."""
    loop = asyncio.get_running_loop()
    if embedder is None:
        return _settled(loop, None)
    key = (embedder.identity, question)
    known = questions.get(key)
    if known is not None:
        return _settled(loop, known)
    embedding = loop.run_in_executor(None, _packed, embedder, question)
    embedding.add_done_callback(lambda done: _remember(questions, key, done))
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


def _remember(
    questions: QuestionVectors, key: QuestionKey, done: asyncio.Future[Packed | None]
) -> None:
    if done.cancelled() or done.exception() is not None or (vector := done.result()) is None:
        return
    questions.remember(key, vector)


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
    place_of: dict[uuid.UUID, MessagePlace],
    vector: Packed | None,
    terms: Terms,
    limit: int,
    known: HitRows | None = None,
    speculated: int = SPECULATED,
) -> tuple[list[tuple[uuid.UUID, float]], HitRows]:
    """The `limit` best messages after their neighbours' shares (`with_neighbours`), and their
    rows (`ask_hits`; `known`: rows read already). Of the best `speculated` x `limit` before
    those shares, the rows not known are read in the same round trip as the neighbours; a
    message the shares lift from further down is read after."""
    rows = dict(known or {})
    best = heapq.nlargest(limit * speculated, scores, key=scores.__getitem__)
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
    lexemes: list[str],
    count: int,
    exact: bool,
    embedding: asyncio.Future[Packed | None],
    scans: ScanSettings,
) -> tuple[Ranking, VectorRanking]:
    """The full-text ranking on `conn` and, beside it on `spare` once the question is embedded,
    the vector ranking: two connections, so the database runs both at once."""
    loop = asyncio.get_running_loop()
    text = asyncio.Task(
        text_ranking(conn, scope, terms, lexemes, count), loop=loop, eager_start=True
    )
    try:
        vector = await asyncio.shield(embedding)
        nearest = NO_VECTOR_RANKING
        if vector is not None:
            nearest = await vector_ranking(
                spare, scope, vector, count, exact, scans=scans, terms=terms
            )
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
    caches: SearchCaches,
    spare: Conn | None = None,
    limits: SearchLimits = LIMITS,
) -> SearchAnswer:
    """The `limit` best messages for `question`, and how complete the index behind them is.

    `candidates` (default `DEFAULT_CANDIDATES`) bounds each ranking; `exact` compares the
    question with every embedded message in scope instead of walking the HNSW graph. Messages
    without a vector of the embedder's generation are ranked by full text, their similarity
    their share of the question's term weight (nothing is embedded here but the question). With
    no embedder that can run, the ranking is full text alone and the answer says `embedded` is
    false. With a `spare` connection, a vector ranking of more than `WHOLE_UP_TO` candidates
    runs on it beside the full-text ranking. `caches`: what the application's searches keep
    between calls.
    """
    pool = max(candidates or DEFAULT_CANDIDATES, limit)
    # The embedder starts on the likely focus at once, in a thread, while the database weighs
    # the question's words and ranks by full text; if the focus turns out otherwise, the real
    # one is embedded instead.
    guess = caches.common_words.likely_focus(scope, question)
    early = embed_question(embedder, guess, caches.questions)
    embedding = early
    try:
        state, per_word = await coverage_and_lexemes(conn, scope.project_id, question.split())
        usable = embedder is not None and state.embedder == embedder.identity
        terms = await weigh(
            conn, scope, question, per_word, state.counted_through_offset, caches.common_words
        )
        if terms.focused != guess:
            embedding = embed_question(embedder, terms.focused, caches.questions)
        lexemes = lexemes_to_read(terms.weights, terms.matches, usable, limits.text_matches)
        # Read by places only, a ranking of so many needs nothing of the full-text one's.
        beside = spare if usable and pool > WHOLE_UP_TO else None
        if beside is not None:
            text, nearest = await _side_by_side(
                conn, beside, scope, terms, lexemes, pool, exact, embedding, caches.scans
            )
        else:
            text = await text_ranking(conn, scope, terms, lexemes, pool)
    finally:
        await asyncio.wait({early, embedding})
        early.exception()  # retrieved, so an unused guess that failed stays quiet
    literal = await embedding
    # Only the project's own generation's vectors can be compared with this question's.
    vector = literal if usable else None
    if beside is None:
        nearest = NO_VECTOR_RANKING
        if vector is not None:
            also = [placed.id for placed, _ in text]
            nearest = await vector_ranking(
                conn, scope, vector, pool, exact, scans=caches.scans, terms=terms, also=also
            )
    periods = named_periods(question)
    dated: Ranking = []
    if periods:
        windows = [period_window(period) for period in periods]
        dated = await period_ranking(conn, scope, windows, vector, pool)
    scores = fuse(text, nearest.ranking, dated)
    place_of = {**places(text, nearest.ranking, dated), **nearest.placed}
    ranked, rows = await ranked_hits(
        conn,
        scope.project_id,
        scores,
        place_of,
        vector,
        terms,
        limit,
        nearest.rows,
        limits.speculated,
    )
    return SearchAnswer(
        generation_id=state.generation_id if usable else "",
        through_offset=state.through_offset,
        covered_through_offset=state.covered_through_offset if usable else NO_OFFSET,
        build_state=_build_state(state, usable),
        approximate=not exact,
        hits=hits_in(ranked, rows),
        embedded=literal is not None,
    )
