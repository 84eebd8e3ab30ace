"""Formation's statements: the formation lock, due turns, claiming a turn, failures and parking,
admitted facts and rejected claims."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from satchel.memory.domain import Candidate, Extractor, RejectedClaim, StoredMessage
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import ensure_entity, normalize
from satchel.memory.store.facts import lock_log
from satchel.memory.store.supersession import supersede

LOCK_NAME = "satchel.memory.formation"


@dataclass(frozen=True, slots=True)
class DueTurn:
    """An observation waiting to be formed."""

    id: uuid.UUID
    log_offset: int
    data_subject_id: str | None
    kind: str
    attempts: int


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


async def stored_offsets(conn: Conn) -> dict[int, int | None]:
    """Each project's highest claimed offset (None before its first turn)."""
    cursor = await conn.execute("SELECT id, stored FROM projects")
    return {row[0]: row[1] for row in await cursor.fetchall()}


async def due_turns(conn: Conn, project_id: int, limit: int) -> list[DueTurn]:
    """Up to `limit` of the project's turns neither formed nor parked nor waiting out a backoff,
    oldest first."""
    async with conn.cursor(row_factory=class_row(DueTurn)) as cursor:
        await cursor.execute(
            "SELECT id, log_offset, data_subject_id, kind, attempts FROM observations"
            " WHERE project_id = %s AND formed_at IS NULL AND parked_at IS NULL"
            " AND (next_attempt_at IS NULL OR next_attempt_at <= now())"
            " ORDER BY log_offset LIMIT %s",
            (project_id, limit),
        )
        return await cursor.fetchall()


async def messages_of(conn: Conn, observation_id: uuid.UUID) -> list[StoredMessage]:
    """The turn's messages in order."""
    async with conn.cursor(row_factory=class_row(StoredMessage)) as cursor:
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


# The first turn formed with no extraction model of a project (of one person), in the order of
# their partial index `observations_formed_without_model` (migration 0022): ordered so and cut at
# one row, the statement has no cheaper plan than that index, whatever the statistics say. As an
# EXISTS it was planned as a scan of the table stopping at the first match, which read every row
# of the table when the matches the statistics counted were another project's.
_FIRST_WITHOUT_MODEL = (
    "SELECT 1 FROM observations WHERE project_id = %(p)s{subject} AND kind = 'turn'"
    " AND formed_at IS NOT NULL AND extractor_model IS NULL"
    " ORDER BY project_id, data_subject_id, log_offset LIMIT 1"
)
_WITHOUT_MODEL = _FIRST_WITHOUT_MODEL.format(subject="")
_WITHOUT_MODEL_OF = _FIRST_WITHOUT_MODEL.format(subject=" AND data_subject_id = %(s)s")


async def formed_without_model(conn: Conn, project_id: int, subject: str | None) -> bool:
    """Whether an observed turn of the project (of `subject`, when given) was formed with no
    extraction model, so that no facts were formed from it."""
    cursor = await conn.execute(
        _WITHOUT_MODEL if subject is None else _WITHOUT_MODEL_OF,
        {"p": project_id, "s": subject},
    )
    return await cursor.fetchone() is not None


async def claim_turn(conn: Conn, project_id: int, turn: DueTurn) -> datetime | None:
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


async def fail_attempt(
    conn: Conn, turn: DueTurn, error: str, *, backoff: float, max_backoff: float, attempts: int
) -> bool:
    """Store a failed attempt on the claimed turn: the error, the count and the next try
    (doubling from `backoff` seconds), or park it after `attempts` failures. True when parked."""
    cursor = await conn.execute(
        "UPDATE observations SET attempts = attempts + 1, last_error = %(e)s,"
        " parked_at = CASE WHEN attempts + 1 >= %(max)s THEN now() END,"
        " next_attempt_at = CASE WHEN attempts + 1 < %(max)s THEN now()"
        "  + make_interval(secs => least(%(cap)s, %(base)s * power(2, attempts))) END"
        " WHERE id = %(id)s RETURNING parked_at IS NOT NULL",
        {"e": error, "max": attempts, "cap": max_backoff, "base": backoff, "id": turn.id},
    )
    row = await cursor.fetchone()
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


async def write_fact(
    conn: Conn, project_id: int, turn: DueTurn, claim: Candidate, extractor: Extractor, at: datetime
) -> uuid.UUID | None:
    """Admit one claim as a fact citing its span: its id, or None when it duplicates a current
    fact."""
    subject = turn.data_subject_id
    subject_id = await ensure_entity(conn, project_id, subject, claim.subject, turn.id)
    if await _duplicate(conn, project_id, subject, subject_id, claim):
        return None
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
            extractor.version(),
        ),
    )
    if claim.cardinality == "one":
        await supersede(conn, project_id, fact_id, turn.id, at)
    return fact_id


async def reject_claim(
    conn: Conn, project_id: int, turn: DueTurn, rejected: RejectedClaim, extractor: Extractor
) -> None:
    await conn.execute(
        "INSERT INTO rejected_claims (id, project_id, data_subject_id, observation_id, reason,"
        " claim, extractor_model) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (
            uuid.uuid4(),
            project_id,
            turn.data_subject_id,
            turn.id,
            rejected.reason,
            Jsonb(rejected.claim),
            extractor.model,
        ),
    )


async def mark_formed(conn: Conn, turn: DueTurn, extractor: Extractor, at: datetime) -> None:
    """The claimed turn is formed, at `at`, by `extractor`."""
    await conn.execute(
        "UPDATE observations SET formed_at = %s, last_error = NULL, next_attempt_at = NULL,"
        " extractor_model = %s, extractor_prompt = %s, extractor_code = %s WHERE id = %s",
        (at, extractor.model, extractor.prompt, extractor.code, turn.id),
    )


async def mark_all_formed(
    conn: Conn, project_id: int, turns: list[uuid.UUID], extractor: Extractor
) -> int:
    """Inside a transaction holding the log lock: each of `turns` still neither formed nor
    parked is formed now by `extractor` (its row locked by the update); how many."""
    cursor = await conn.execute(
        "UPDATE observations SET formed_at = now(), last_error = NULL, next_attempt_at = NULL,"
        " extractor_model = %s, extractor_prompt = %s, extractor_code = %s"
        " WHERE project_id = %s AND id = ANY(%s) AND formed_at IS NULL AND parked_at IS NULL"
        " RETURNING id",  # counted from the rows: in a pipeline the row count is not known yet
        (extractor.model, extractor.prompt, extractor.code, project_id, turns),
    )
    return len(await cursor.fetchall())


def candidate_fields(claim: Candidate) -> dict[str, Any]:
    """What a rejected claim keeps of a candidate that duplicated a current fact."""
    return {
        "subject": claim.subject,
        "predicate": claim.predicate,
        "object": claim.object,
        "statement": claim.statement,
        "quote": claim.span.quote,
        "message": claim.span.message.ordinal,
    }


async def lock_projects(conn: Conn, project: str | None) -> list[int]:
    """Lock the projects (one by name, or all) against appends; their ids, oldest first."""
    cursor = await conn.execute(
        "SELECT id FROM projects WHERE %(n)s::text IS NULL OR name = %(n)s ORDER BY id"
        " FOR NO KEY UPDATE",
        {"n": project},
    )
    return [row[0] for row in await cursor.fetchall()]


async def unpark_turns(conn: Conn, project_ids: list[int]) -> int:
    """Put the parked turns of the projects back in line; how many."""
    cursor = await conn.execute(
        "UPDATE observations SET parked_at = NULL, attempts = 0, next_attempt_at = NULL"
        " WHERE project_id = ANY(%s) AND parked_at IS NOT NULL",
        (project_ids,),
    )
    return cursor.rowcount


@dataclass(frozen=True, slots=True)
class ParkedTurn:
    """A parked turn's metadata: never its messages, nor its subject."""

    id: uuid.UUID
    project: str
    kind: str
    log_offset: int
    attempts: int
    stored_at: datetime
    parked_at: datetime
    last_error: str | None


async def parked_turns(conn: Conn, project: str | None, limit: int) -> list[ParkedTurn]:
    """Up to `limit` parked turns (of one project by name, or of all), longest parked first."""
    async with conn.cursor(row_factory=class_row(ParkedTurn)) as cursor:
        await cursor.execute(
            "SELECT o.id, p.name AS project, o.kind, o.log_offset, o.attempts, o.stored_at,"
            " o.parked_at, o.last_error FROM observations o JOIN projects p ON p.id = o.project_id"
            " WHERE o.parked_at IS NOT NULL AND (%(n)s::text IS NULL OR p.name = %(n)s)"
            " ORDER BY o.parked_at, p.name, o.log_offset LIMIT %(limit)s",
            {"n": project, "limit": limit},
        )
        return await cursor.fetchall()


async def project_of(conn: Conn, observation_id: uuid.UUID) -> int | None:
    """The project the observation belongs to; None when there is no such observation."""
    cursor = await conn.execute(
        "SELECT project_id FROM observations WHERE id = %s", (observation_id,)
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def unpark_turn(conn: Conn, observation_id: uuid.UUID) -> bool:
    """Put one parked turn back in line; false when it is not parked (or not there)."""
    cursor = await conn.execute(
        "UPDATE observations SET parked_at = NULL, attempts = 0, next_attempt_at = NULL"
        " WHERE id = %s AND parked_at IS NOT NULL",
        (observation_id,),
    )
    return cursor.rowcount == 1
