"""Formation in the store: claiming unformed turns, failures and parking, admitted facts."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from satchel.memory.formation.extraction import Candidate, Refusal, Said
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import ensure_entity, normalize
from satchel.memory.store.facts import _supersede, lock_log
from satchel.memory.store.log import recompute_formed

LOCK_NAME = "satchel.memory.formation"


@dataclass(frozen=True, slots=True)
class Turn:
    """An observation waiting to be formed."""

    id: uuid.UUID
    log_offset: int
    data_subject_id: str | None
    kind: str
    attempts: int


@dataclass(frozen=True, slots=True)
class Identity:
    """The extractor that formed a turn: model (None without one), prompt and code versions."""

    model: str | None
    prompt: str | None
    code: str

    def version(self) -> str:
        return f"{self.model or '-'}|{self.prompt or '-'}|{self.code}"


@dataclass(frozen=True, slots=True)
class Formed:
    """What forming one turn wrote (`done` is false when the turn was gone or formed already)."""

    done: bool
    facts: int = 0
    refused: int = 0


async def try_lock(conn: Conn, project_id: int) -> bool:
    """Take the project's formation lock for this session, if no other worker holds it."""
    cursor = await conn.execute(
        "SELECT pg_try_advisory_lock(%s::int, hashtext(%s))", (project_id, LOCK_NAME)
    )
    row = await cursor.fetchone()
    return bool(row and row[0])


async def unlock(conn: Conn, project_id: int) -> None:
    await conn.execute("SELECT pg_advisory_unlock(%s::int, hashtext(%s))", (project_id, LOCK_NAME))


async def project_ids(conn: Conn) -> list[int]:
    """Every project not suspended, oldest first."""
    cursor = await conn.execute("SELECT id FROM projects WHERE suspended_at IS NULL ORDER BY id")
    return [row[0] for row in await cursor.fetchall()]


async def due_turns(conn: Conn, project_id: int, limit: int) -> list[Turn]:
    """Up to `limit` of the project's turns neither formed nor parked nor waiting out a backoff,
    oldest first."""
    async with conn.cursor(row_factory=class_row(Turn)) as cursor:
        await cursor.execute(
            "SELECT id, log_offset, data_subject_id, kind, attempts FROM observations"
            " WHERE project_id = %s AND formed_at IS NULL AND parked_at IS NULL"
            " AND (next_attempt_at IS NULL OR next_attempt_at <= now())"
            " ORDER BY log_offset LIMIT %s",
            (project_id, limit),
        )
        return await cursor.fetchall()


async def said_in(conn: Conn, observation_id: uuid.UUID) -> list[Said]:
    """The turn's messages in order."""
    async with conn.cursor(row_factory=class_row(Said)) as cursor:
        await cursor.execute(
            "SELECT id, ordinal, role, content, occurred_at FROM messages"
            " WHERE observation_id = %s ORDER BY ordinal",
            (observation_id,),
        )
        return await cursor.fetchall()


async def vocabulary(conn: Conn) -> dict[str, str]:
    """The admitted predicates with their cardinality."""
    cursor = await conn.execute("SELECT name, cardinality FROM predicates")
    return {name: cardinality for name, cardinality in await cursor.fetchall()}


async def _claim(conn: Conn, project_id: int, turn: Turn) -> datetime | None:
    """Inside a transaction: lock the log, then the turn (one round trip in a pipeline); the
    transaction's time, or None when the turn is gone or formed."""
    await lock_log(conn, project_id)
    cursor = await conn.execute(
        "SELECT now() FROM observations WHERE id = %s AND formed_at IS NULL"
        " AND parked_at IS NULL FOR UPDATE",
        (turn.id,),
    )
    row = await cursor.fetchone()
    return None if row is None else row[0]


async def record_failure(
    conn: Conn,
    project_id: int,
    turn: Turn,
    error: str,
    *,
    backoff: float,
    max_backoff: float,
    attempts: int,
) -> bool:
    """Store a failed attempt on the turn: the error, the count and the next try (doubling from
    `backoff` seconds), or park it after `attempts` failures. True when it was parked."""
    async with conn.transaction():
        if not await _claim(conn, project_id, turn):
            return False
        cursor = await conn.execute(
            "UPDATE observations SET attempts = attempts + 1, last_error = %(e)s,"
            " parked_at = CASE WHEN attempts + 1 >= %(max)s THEN now() END,"
            " next_attempt_at = CASE WHEN attempts + 1 < %(max)s THEN now()"
            "  + make_interval(secs => least(%(cap)s, %(base)s * power(2, attempts))) END"
            " WHERE id = %(id)s RETURNING parked_at IS NOT NULL",
            {"e": error, "max": attempts, "cap": max_backoff, "base": backoff, "id": turn.id},
        )
        row = await cursor.fetchone()
        await recompute_formed(conn, project_id)
    return bool(row and row[0])


async def _duplicate(
    conn: Conn, project_id: int, subject: str | None, entity_id: uuid.UUID, claim: Candidate
) -> bool:
    cursor = await conn.execute(
        "SELECT 1 FROM facts WHERE project_id = %s AND data_subject_id IS NOT DISTINCT FROM %s"
        " AND subject_entity_id = %s AND predicate = %s AND lower(object) = %s"
        " AND known_until IS NULL AND valid_until IS NULL LIMIT 1",
        (project_id, subject, entity_id, claim.predicate, normalize(claim.object)),
    )
    return await cursor.fetchone() is not None


async def _write_fact(
    conn: Conn, project_id: int, turn: Turn, claim: Candidate, identity: Identity, at: datetime
) -> bool:
    """Admit one claim as a fact citing its span; false when it duplicates a current fact."""
    subject = turn.data_subject_id
    subject_id = await ensure_entity(conn, project_id, subject, claim.subject, turn.id)
    if await _duplicate(conn, project_id, subject, subject_id, claim):
        return False
    object_id = await ensure_entity(conn, project_id, subject, claim.object, turn.id)
    fact_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO facts (id, project_id, data_subject_id, subject_entity_id, predicate, object,"
        " object_entity_id, statement, confidence, source_role, source_observation_id, version,"
        " valid_from, known_from, recorded_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            fact_id,
            project_id,
            subject,
            subject_id,
            claim.predicate,
            " ".join(claim.object.split()),
            object_id,
            claim.statement,
            claim.confidence,
            claim.span.message.role,
            turn.id,
            uuid.uuid4(),
            claim.valid_from,
            at,
            at,
        ),
    )
    await conn.execute(
        "INSERT INTO fact_evidence (fact_id, observation_id, message_id, source_ordinal, quote,"
        " byte_start, byte_end, extractor_version) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            fact_id,
            turn.id,
            claim.span.message.id,
            claim.span.message.ordinal,
            claim.span.quote,
            claim.span.byte_start,
            claim.span.byte_end,
            identity.version(),
        ),
    )
    if claim.cardinality == "one":
        await _supersede(conn, project_id, fact_id, turn.id, at)
    return True


async def _refuse(
    conn: Conn, project_id: int, turn: Turn, refusal: Refusal, identity: Identity
) -> None:
    await conn.execute(
        "INSERT INTO rejected_claims (id, project_id, data_subject_id, observation_id, reason,"
        " claim, extractor_model) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (
            uuid.uuid4(),
            project_id,
            turn.data_subject_id,
            turn.id,
            refusal.reason,
            Jsonb(refusal.claim),
            identity.model,
        ),
    )


async def form(
    conn: Conn,
    project_id: int,
    turn: Turn,
    outcome: list[Candidate | Refusal],
    identity: Identity,
) -> Formed:
    """In one transaction: admit the candidates (a duplicate is refused), store every refusal,
    mark the turn formed by `identity`, recompute the watermark.

    Pipelined, so the log lock is held for one round trip per candidate written, not one per
    statement: the claim goes with the lock, and the turn's update and the commit go together."""
    facts = refused = 0
    async with conn.pipeline(), conn.transaction():
        at = await _claim(conn, project_id, turn)
        if at is None:
            return Formed(False)
        for item in outcome:
            if isinstance(item, Candidate) and await _write_fact(
                conn, project_id, turn, item, identity, at
            ):
                facts += 1
                continue
            if isinstance(item, Candidate):
                item = Refusal("duplicate", _candidate_fields(item))
            await _refuse(conn, project_id, turn, item, identity)
            refused += 1
        await conn.execute(
            "UPDATE observations SET formed_at = %s, last_error = NULL, next_attempt_at = NULL,"
            " extractor_model = %s, extractor_prompt = %s, extractor_code = %s WHERE id = %s",
            (at, identity.model, identity.prompt, identity.code, turn.id),
        )
        await recompute_formed(conn, project_id)
    return Formed(True, facts, refused)


def _candidate_fields(claim: Candidate) -> dict[str, Any]:
    return {
        "subject": claim.subject,
        "predicate": claim.predicate,
        "object": claim.object,
        "statement": claim.statement,
        "quote": claim.span.quote,
        "message": claim.span.message.ordinal,
    }


async def unpark(conn: Conn, project: str | None) -> int:
    """Put the parked turns (of one project by name, or of all) back in line; how many."""
    async with conn.transaction():
        cursor = await conn.execute(
            "SELECT id FROM projects WHERE %(n)s::text IS NULL OR name = %(n)s ORDER BY id"
            " FOR NO KEY UPDATE",
            {"n": project},
        )
        ids = [row[0] for row in await cursor.fetchall()]
        cursor = await conn.execute(
            "UPDATE observations SET parked_at = NULL, attempts = 0, next_attempt_at = NULL"
            " WHERE project_id = ANY(%s) AND parked_at IS NOT NULL",
            (ids,),
        )
        count = cursor.rowcount
        for project_id in ids:
            await recompute_formed(conn, project_id)
    return count
