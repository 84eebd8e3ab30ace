"""The worker: per project under an advisory lock, form turns, then write segments, passages and
theme reports."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import psycopg

from satchel.memory.config import MemorySettings
from satchel.memory.domain import Candidate, Extractor, RejectedClaim, StoredMessage
from satchel.memory.formation.extraction import (
    CODE_VERSION,
    MAX_CLAIMS,
    PROMPT_ID,
    SCHEMA_NAME,
    bounded,
    claim_limit,
    claims_of,
    claims_schema,
    output_tokens,
    prompt,
    screen,
)
from satchel.memory.formation.model import ChatModel, ModelError
from satchel.memory.formation.reports import Reporter
from satchel.memory.formation.segments import (
    ModelSummarizer,
    Summarizer,
    extractive_summary,
    write_segments,
)
from satchel.memory.passages.embedder import (
    Embedder,
    EmbedderUnavailable,
    Vectors,
    load_embedder,
)
from satchel.memory.passages.index import PassageBatch, next_passages, store_passages
from satchel.memory.service.formation import form, form_without_claims, record_failure
from satchel.memory.service.retention import sweep
from satchel.memory.store import formation as store
from satchel.memory.store import workers
from satchel.memory.store.database import Conn
from satchel.memory.store.log import TurnState, turn_state
from satchel.memory.store.terms import count_terms

log = logging.getLogger("satchel.memory.worker")

BEAT_EVERY = 5.0  # seconds: a worker at work reports in at most this often, and once a pass
# With no model a pass forms this many times `formation_batch` turns: forming them is one update,
# and the segment walk after it is what a pass costs, so fewer passes do the same work.
UNREAD_BATCHES = 4
# While more turns wait to be formed than a pass forms, the segment walk waits for the backlog to
# drain (a walk in the middle of it reads what the walk after it reads again), but at most this
# many passes in a row.
WALK_WAITS = 16


@dataclass(slots=True)
class Tally:
    """What one pass did, summed over projects."""

    formed: int = 0
    failed: int = 0
    parked: int = 0
    facts: int = 0
    refused: int = 0
    segments: int = 0
    passages: int = 0
    reports: int = 0
    stopped: int = 0  # report passes stopped for new turns
    embedding: int = 0  # messages still being embedded, handed on to the next pass to store
    busy: list[int] = field(default_factory=list)

    @property
    def work(self) -> int:
        done = self.formed + self.failed + self.segments + self.passages + self.reports
        return done + self.embedding + self.stopped


@dataclass(frozen=True, slots=True)
class Embedding:
    """A batch of passages and the task embedding it in a thread."""

    batch: PassageBatch
    vectors: asyncio.Task[Vectors]


async def extract(
    model: ChatModel, messages: list[StoredMessage], vocabulary: dict[str, str]
) -> list[Candidate | RejectedClaim]:
    """Ask the model for the turn's claims (the prompt and schema allow the turn's claim limit,
    the output limit is sized to it) and screen each, up to `MAX_CLAIMS`; a bad, cut or late
    reply is a `ModelError`."""
    limit = claim_limit(messages)
    reply = await model.complete_json(
        prompt(messages, list(vocabulary), limit),
        schema=claims_schema(list(vocabulary), limit),
        name=SCHEMA_NAME,
        max_tokens=output_tokens(limit),
    )
    claims = claims_of(reply)
    if claims is None:
        raise ModelError("reply has no claims list")
    outcome: list[Candidate | RejectedClaim] = [
        screen(claim, messages, vocabulary) for claim in claims[:MAX_CLAIMS]
    ]
    outcome += [RejectedClaim("too_many_claims", bounded(claim)) for claim in claims[MAX_CLAIMS:]]
    return outcome


def _default_embedder(threads: int) -> Embedder | None:
    try:
        return load_embedder(threads=threads)
    except EmbedderUnavailable as exc:
        log.warning("passages will not be indexed: %s", exc)
        return None


class Worker:
    """Forms the turns of every project of one database, one project at a time.

    Several workers (and API replicas) may share the database: a project is worked on only by
    the worker holding its advisory lock, and each turn is formed in one transaction that first
    checks it is still unformed.
    """

    def __init__(
        self, url: str, settings: MemorySettings, embedder: Embedder | None = None
    ) -> None:
        """`embedder`: the passages' embedder (default: `load_embedder()`, from the
        environment, on `settings.embedding_threads`; without one the passages are left
        unindexed)."""
        self.url = url
        self.settings = settings
        self.model = ChatModel(settings.formation) if settings.formation else None
        self.summarizer: Summarizer = (
            ModelSummarizer(self.model) if self.model else extractive_summary
        )
        self.embedder = embedder or _default_embedder(settings.embedding_threads)
        self.reporter = Reporter(self.model, self.embedder)
        self.extractor = Extractor(
            self.model.model if self.model else None,
            PROMPT_ID if self.model else None,
            CODE_VERSION,
        )
        self.conn: Conn | None = None
        self.segmented: dict[int, TurnState] = {}  # each project's, at its last segment pass
        self.walk_waited: dict[int, int] = {}  # each project's passes in a row without a walk
        self.next_sweep = 0.0  # when the next retention sweep is due, on the monotonic clock
        self.id = uuid.uuid4()
        self.totals = workers.WorkerTotals()
        self.beaten = float("-inf")  # when this worker last reported in (monotonic clock)
        self.handed: dict[int, Embedding] = {}  # each project's batch for its next pass to store

    async def _connection(self) -> Conn:
        if self.conn is None or self.conn.closed:
            self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        return self.conn

    async def close(self) -> None:
        """Write the worker's last totals and that it stopped, and let go of the connection and
        the model (a batch still handed on is dropped once embedded: the next worker reads it
        again)."""
        handed = [embedding.vectors for embedding in self.handed.values()]
        self.handed.clear()
        if handed:
            await asyncio.gather(*handed, return_exceptions=True)
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._beat(self.conn, now=True)
                await workers.stopped(self.conn, self.id)
            await self.conn.close()
            self.conn = None
        if self.model is not None:
            await self.model.aclose()

    async def run_once(self) -> Tally:
        """One pass over every project whose lock is free, after a retention sweep when one is
        due (every `retention_interval` seconds): form, segments, passages; and only when none of
        that found work anywhere, theme reports (derived from formed facts, and the costliest
        to keep current, they wait for the rest, and stop for new turns)."""
        conn = await self._connection()
        tally = Tally()
        if time.monotonic() >= self.next_sweep:
            self.next_sweep = time.monotonic() + self.settings.retention_interval
            for receipt in await sweep(conn):
                log.info(
                    "retention sweep of project %s deleted %s", receipt.project, receipt.deleted
                )
        await self._beat(conn, now=True)
        projects = await store.project_ids(conn)
        for project_id in projects:
            if not await store.try_lock(conn, project_id):
                tally.busy.append(project_id)
                continue
            try:
                await self._project(conn, project_id, tally)
            finally:
                await store.unlock(conn, project_id)
            await self._beat(conn)
        if tally.work == 0:  # nothing more urgent anywhere: theme reports
            await self._reports(conn, projects, tally)
        return tally

    async def _reports(self, conn: Conn, projects: list[int], tally: Tally) -> None:
        """Theme reports, project after project, until new turns are stored anywhere: the pass
        stops for them (the next one forms and embeds them first)."""
        stored = await store.stored_offsets(conn)

        async def waiting() -> bool:
            return await store.stored_offsets(conn) != stored

        for project_id in projects:
            if await store.try_lock(conn, project_id):
                try:
                    tally.reports += len(await self.reporter.run(conn, project_id, None, waiting))
                finally:
                    await store.unlock(conn, project_id)
                await self._beat(conn)
            if await waiting():
                tally.stopped += 1
                return

    async def _beat(self, conn: Conn, *, now: bool = False) -> None:
        """Report in (host, pid, totals), `now` or when `BEAT_EVERY` seconds have passed."""
        if not now and time.monotonic() - self.beaten < BEAT_EVERY:
            return
        await workers.beat(conn, self.id, socket.gethostname(), os.getpid(), self.totals)
        self.beaten = time.monotonic()

    def _failed(self, what: str) -> None:
        """Note what failed last (a category: model, summary, embedder, database)."""
        self.totals.last_failure = what
        self.totals.last_failure_at = datetime.now(UTC)

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until `stop` is set, resting `worker_poll` seconds after an idle pass;
        after a database error the connection is reopened on the next pass."""
        try:
            while not stop.is_set():
                try:
                    tally = await self.run_once()
                except psycopg.Error as exc:
                    log.warning("worker pass failed: %s", type(exc).__name__)
                    self._failed("database")
                    await self._drop_connection()
                    tally = Tally()
                if tally.work == 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.settings.worker_poll)
        finally:
            await self.close()

    async def _drop_connection(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self.conn.close()
            self.conn = None

    async def _project(self, conn: Conn, project_id: int, tally: Tally) -> None:
        """Store the vectors the last pass handed on and form turns, write segments and count
        terms, while the embedder embeds the next passages in a thread (the model and the
        database work overlap on two cores); hand those vectors on to the next pass, or store
        them now when they reach the last stored turn."""
        handed = self.handed.pop(project_id, None)
        vectors = await self._vectors_of(project_id, handed)
        follows = handed.batch.through if handed is not None and vectors is not None else None
        if self.embedder is not None:
            await self._one_at_a_time()
            batch = await next_passages(conn, project_id, self.embedder, after=follows)
        else:
            batch = None
        embedding = Embedding(batch, asyncio.create_task(self._embedded(batch))) if batch else None
        try:
            stored = True
            if handed is not None and vectors is not None:
                stored = await self._store(conn, handed.batch, vectors, tally)
            await self._form_and_count(conn, project_id, tally)
        except BaseException:
            if embedding is not None:
                self.handed[project_id] = embedding  # awaited on the next pass or at close
            raise
        if embedding is None:
            return
        if not stored:  # the batch before it was not stored: it follows nothing, drop it
            await self._vectors_of(project_id, embedding)
            return
        if not embedding.batch.last:
            self.handed[project_id] = embedding
            tally.embedding += len(embedding.batch.rows)
            return
        vectors = await self._vectors_of(project_id, embedding)
        if vectors is not None:
            await self._store(conn, embedding.batch, vectors, tally)

    async def _one_at_a_time(self) -> None:
        """Wait for the embeddings handed on by other projects: the model runs one at a time."""
        running = [e.vectors for e in self.handed.values() if not e.vectors.done()]
        if running:
            await asyncio.wait(running)

    async def _vectors_of(self, project_id: int, embedding: Embedding | None) -> Vectors | None:
        """The embedding's vectors once the model is done (None without a batch, or when the
        embedder failed: logged, and the batch is read again on a later pass)."""
        if embedding is None:
            return None
        try:
            return await embedding.vectors
        except EmbedderUnavailable as exc:
            log.warning("passage indexing failed for project %d: %s", project_id, exc)
            self._failed("embedder")
            return None

    async def _store(self, conn: Conn, batch: PassageBatch, vectors: Vectors, tally: Tally) -> bool:
        """Store the batch's vectors; whether the project's progress moved past it."""
        assert self.embedder is not None
        try:
            embedded = await store_passages(conn, self.embedder, batch, vectors)
        except EmbedderUnavailable as exc:
            log.warning("passage indexing failed for project %d: %s", batch.project_id, exc)
            self._failed("embedder")
            return False
        if embedded is None:
            return False
        tally.passages += embedded
        self.totals.embedded += embedded
        return True

    async def _embedded(self, batch: PassageBatch | None) -> Vectors:
        """The batch's vectors, the model run in a thread (an empty array when there is no
        text)."""
        if batch is None or not batch.texts or self.embedder is None:
            return np.zeros((0, 0), dtype=np.float32)
        return await asyncio.to_thread(self.embedder.embed, batch.texts)

    async def _form_and_count(self, conn: Conn, project_id: int, tally: Tally) -> None:
        await self._form(conn, project_id, tally)
        await self._segments(conn, project_id, tally)
        async with conn.transaction():
            await count_terms(conn, project_id)

    def _formed_a_pass(self) -> int:
        """The most turns a pass forms in a project."""
        batch = self.settings.formation_batch
        return batch if self.model else batch * UNREAD_BATCHES

    async def _form(self, conn: Conn, project_id: int, tally: Tally) -> None:
        if self.model is None:  # no claims to extract: a larger batch, formed at once
            turns = await store.due_turns(conn, project_id, self._formed_a_pass())
            count = await form_without_claims(conn, project_id, turns, self.extractor)
            tally.formed += count
            self.totals.formed += count
            await self._beat(conn)
            return
        turns = await store.due_turns(conn, project_id, self.settings.formation_batch)
        vocabulary = await store.vocabulary(conn) if turns else {}
        for turn in turns:
            outcome: list[Candidate | RejectedClaim] = []
            if turn.kind == "turn":
                try:
                    outcome = await extract(
                        self.model, await store.messages_of(conn, turn.id), vocabulary
                    )
                except ModelError as exc:
                    parked = await record_failure(
                        conn,
                        project_id,
                        turn,
                        str(exc),
                        backoff=self.settings.formation_backoff,
                        max_backoff=self.settings.formation_max_backoff,
                        attempts=self.settings.formation_attempts,
                    )
                    tally.failed += 1
                    tally.parked += parked
                    self.totals.failed += 1
                    self._failed("model")
                    log.warning(
                        "formation failed for offset %d of project %d (attempt %d): %s",
                        turn.log_offset,
                        project_id,
                        turn.attempts + 1,
                        exc,
                    )
                    continue
            formed = await form(conn, project_id, turn, outcome, self.extractor)
            if formed.done:
                tally.formed += 1
                tally.facts += formed.facts
                tally.refused += formed.refused
                self.totals.formed += 1
            await self._beat(conn)

    async def _segments(self, conn: Conn, project_id: int, tally: Tally) -> None:
        """Write the segments the project's turns call for, each committed as it is written, so
        a long backlog shows as it goes and a stop loses at most the segment at hand. A project
        whose turns are as they were at its last complete pass is not walked again, and one with
        more turns to form than a pass forms waits (`WALK_WAITS` passes at most)."""
        state = await turn_state(conn, project_id)
        if self.segmented.get(project_id) == state:
            return
        stored, formed, _ = state
        waiting = (-1 if stored is None else stored) - (-1 if formed is None else formed)
        waited = self.walk_waited.get(project_id, 0)
        if waiting > self._formed_a_pass() and waited < WALK_WAITS:
            self.walk_waited[project_id] = waited + 1
            return
        self.walk_waited[project_id] = 0
        try:
            tally.segments += await write_segments(conn, project_id, self.summarizer)
        except ModelError as exc:
            log.warning("summaries failed for project %d: %s", project_id, exc)
            self._failed("summary")
            return
        self.segmented[project_id] = state
