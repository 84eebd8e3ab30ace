"""Facts: authored assertions, supersession, retraction, record pages and history."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store import receipts
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import ensure_entity
from satchel.memory.store.log import claim_offset, recompute_formed
from satchel.memory.store.supersession import change, supersede

CURATED_EXTRACTOR = "curated/v1"
AUTHORED_CONFIDENCE = 0.0  # no model estimated an authored fact
STATUS = (
    "CASE WHEN f.retracted_at IS NOT NULL THEN 'retracted'"
    " WHEN f.reinterpreted_by IS NOT NULL THEN 'reinterpreted'"
    " WHEN f.known_until IS NOT NULL THEN 'knowledge_closed'"
    " WHEN f.valid_until IS NOT NULL THEN 'validity_closed' ELSE 'current' END"
)


@dataclass(frozen=True, slots=True)
class Claim:
    """One authored statement: who or what, the predicate, the object, and since when."""

    data_subject_id: str | None
    subject: str
    predicate: str
    object: str
    statement: str
    valid_from: datetime | None


@dataclass(frozen=True, slots=True)
class Written:
    """A fact an authored claim produced, and the source observation holding its statement."""

    id: uuid.UUID
    source_observation_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Target:
    """A fact about to change, locked for the rest of the transaction."""

    id: uuid.UUID
    version: uuid.UUID
    data_subject_id: str | None
    subject: str
    predicate: str
    valid_from: datetime
    valid_until: datetime | None
    known_until: datetime | None
    evidence: int


@dataclass(frozen=True, slots=True)
class Retraction:
    """The record of a retraction (a correction's carries its replacement)."""

    id: uuid.UUID
    version: uuid.UUID
    operation_id: uuid.UUID
    principal_id: uuid.UUID | None
    retracted_at: datetime
    replacement_source_observation_id: uuid.UUID | None
    replacement_record_id: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One line of a record page."""

    id: uuid.UUID
    version: uuid.UUID
    subject_entity_id: uuid.UUID | None
    object_entity_id: uuid.UUID | None
    predicate: str
    statement: str
    source_role: str
    recorded_at: datetime
    status: str


@dataclass(frozen=True, slots=True)
class Head:
    """A fact's current version and time ranges."""

    id: uuid.UUID
    version: uuid.UUID
    valid_from: datetime
    valid_until: datetime | None
    known_from: datetime
    known_until: datetime | None


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """A version a fact had before a change ended it."""

    id: uuid.UUID
    valid_from: datetime | None
    valid_until: datetime | None
    known_from: datetime | None
    known_until: datetime | None
    ended_by_observation_id: uuid.UUID | None


async def cardinalities(conn: Conn, predicates: list[str]) -> dict[str, str]:
    """The admitted predicates among `predicates`, with their cardinality (one or many)."""
    cursor = await conn.execute(
        "SELECT name, cardinality FROM predicates WHERE name = ANY(%s)", (predicates,)
    )
    return {name: cardinality for name, cardinality in await cursor.fetchall()}


async def lock_log(conn: Conn, project_id: int) -> None:
    """Take the project's log lock first, as appends do, so changes cannot deadlock with them."""
    await conn.execute("SELECT 1 FROM projects WHERE id = %s FOR NO KEY UPDATE", (project_id,))


async def lock_retry_key(conn: Conn, project_id: int, key: uuid.UUID) -> None:
    """Serialize attempts with one idempotency key until the transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (project_id, str(key)))


async def retried(
    conn: Conn, project_id: int, digest: bytes
) -> tuple[bytes, uuid.UUID | None, uuid.UUID | None] | None:
    """A key seen before: its fingerprint, its fact and its source (None when erased)."""
    cursor = await conn.execute(
        "SELECT r.fingerprint, f.id, r.observation_id FROM retry_keys r "
        "LEFT JOIN facts f ON f.source_observation_id = r.observation_id "
        "WHERE r.project_id = %s AND r.key_digest = %s",
        (project_id, digest),
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    return bytes(row[0]), row[1], row[2]


async def remember_retry(
    conn: Conn, project_id: int, digest: bytes, fingerprint: bytes, observation_id: uuid.UUID
) -> None:
    await conn.execute(
        "INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
        " VALUES (%s, %s, %s, %s)",
        (project_id, digest, fingerprint, observation_id),
    )


async def versions(conn: Conn, ids: list[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
    cursor = await conn.execute("SELECT id, version FROM facts WHERE id = ANY(%s)", (ids,))
    return {fact_id: version for fact_id, version in await cursor.fetchall()}


async def _write_source(
    conn: Conn,
    project_id: int,
    data_subject_id: str | None,
    statement: str,
    at: datetime,
    observation_id: uuid.UUID | None,
) -> tuple[uuid.UUID, uuid.UUID]:
    """The curated observation holding a statement: one user message, formed at once."""
    offset = await claim_offset(conn, project_id)
    observation_id, message_id = observation_id or uuid.uuid4(), uuid.uuid4()
    await conn.execute(
        "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind,"
        " occurred_at, formed_at) VALUES (%s, %s, %s, %s, 'curated', %s, %s)",
        (observation_id, project_id, offset, data_subject_id, at, at),
    )
    await conn.execute(
        "INSERT INTO messages (id, observation_id, project_id, data_subject_id, ordinal, role,"
        " content, group_ordinal, occurred_at, turn)"
        " VALUES (%s, %s, %s, %s, 0, 'user', %s, 0, %s, false)",
        (message_id, observation_id, project_id, data_subject_id, statement, at),
    )
    return observation_id, message_id


async def assert_claim(
    conn: Conn,
    project_id: int,
    principal: uuid.UUID,
    claim: Claim,
    cardinality: str,
    at: datetime,
    ids: Written | None = None,
) -> Written:
    """Store `claim` as an authored fact with its own source observation (one log offset), with
    confidence 0 (no model estimate). A single-valued claim out of order is `RecordConflict`.

    `ids` fixes the fact's and the observation's ids in advance (a correction names them first).
    """
    fact_id, observation_id = (ids.id, ids.source_observation_id) if ids else (None, None)
    fact_id = fact_id or uuid.uuid4()
    observation_id, message_id = await _write_source(
        conn, project_id, claim.data_subject_id, claim.statement, at, observation_id
    )
    subject = claim.data_subject_id
    subject_entity_id = await ensure_entity(
        conn, project_id, subject, claim.subject, observation_id
    )
    object_entity_id = await ensure_entity(conn, project_id, subject, claim.object, observation_id)
    valid_from = claim.valid_from or at
    await conn.execute(
        "INSERT INTO facts (id, project_id, data_subject_id, subject_entity_id, predicate, object,"
        " object_entity_id, statement, confidence, source_role, source_observation_id, version,"
        " valid_from, known_from, authored, recorded_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'user', %s, %s, %s, %s, true, %s)",
        (
            fact_id,
            project_id,
            subject,
            subject_entity_id,
            claim.predicate,
            claim.object,
            object_entity_id,
            claim.statement,
            AUTHORED_CONFIDENCE,
            observation_id,
            uuid.uuid4(),
            valid_from,
            at,
            at,
        ),
    )
    await conn.execute(
        "INSERT INTO fact_evidence (fact_id, observation_id, message_id, source_ordinal, quote,"
        " byte_start, byte_end, authored_by, extractor_version)"
        " VALUES (%s, %s, %s, 0, %s, 0, %s, %s, %s)",
        (
            fact_id,
            observation_id,
            message_id,
            claim.statement,
            len(claim.statement.encode("utf-8")),
            principal,
            CURATED_EXTRACTOR,
        ),
    )
    if cardinality == "one":
        await supersede(conn, project_id, fact_id, observation_id, at)
    await recompute_formed(conn, project_id)
    return Written(fact_id, observation_id)


async def lock_targets(
    conn: Conn, project_id: int, ids: list[uuid.UUID]
) -> dict[uuid.UUID, Target]:
    """The project's facts among `ids`, locked (in id order) against concurrent change."""
    cursor = await conn.execute(
        "SELECT f.id, f.version, f.data_subject_id, s.name, f.predicate,"
        " f.valid_from, f.valid_until, f.known_until,"
        " (SELECT count(*) FROM fact_evidence e WHERE e.fact_id = f.id)"
        " FROM facts f JOIN entities s ON s.id = f.subject_entity_id"
        " WHERE f.project_id = %s AND f.id = ANY(%s) ORDER BY f.id FOR UPDATE OF f",
        (project_id, ids),
    )
    return {row[0]: Target(*row) for row in await cursor.fetchall()}


async def retract(
    conn: Conn,
    target: Target,
    principal: uuid.UUID,
    at: datetime,
    replacement: Written | None = None,
) -> Retraction:
    """Close what is known of `target` now (its validity is kept) and record who did it; its
    receipt marks it withdrawn."""
    ended_by = replacement.source_observation_id if replacement else None
    await receipts.withdraw(conn, "(SELECT %(f)s::uuid)", {"f": target.id})
    version = await change(
        conn, target.id, at, ended_by, "known_until = %(at)s, retracted_at = %(at)s", {}
    )
    retraction = Retraction(
        target.id,
        version,
        uuid.uuid4(),
        principal,
        at,
        ended_by,
        replacement.id if replacement else None,
    )
    await conn.execute(
        "INSERT INTO fact_retractions (operation_id, fact_id, version, principal_id, retracted_at,"
        " replacement_source_observation_id, replacement_record_id)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (
            retraction.operation_id,
            target.id,
            version,
            principal,
            at,
            retraction.replacement_source_observation_id,
            retraction.replacement_record_id,
        ),
    )
    return retraction


async def retraction_of(conn: Conn, fact_id: uuid.UUID) -> Retraction | None:
    async with conn.cursor(row_factory=class_row(Retraction)) as cursor:
        await cursor.execute(
            "SELECT fact_id AS id, version, operation_id, principal_id, retracted_at,"
            " replacement_source_observation_id, replacement_record_id"
            " FROM fact_retractions WHERE fact_id = %s",
            (fact_id,),
        )
        return await cursor.fetchone()


async def record_page(
    conn: Conn, project_id: int, data_subject_id: str | None, after: uuid.UUID | None, limit: int
) -> list[RecordRow]:
    """Up to `limit` facts of the project (or of one person) in id order, after `after`."""
    async with conn.cursor(row_factory=class_row(RecordRow)) as cursor:
        await cursor.execute(
            "SELECT f.id, f.version, f.subject_entity_id, f.object_entity_id, f.predicate,"
            f" f.statement, f.source_role, f.recorded_at, {STATUS} AS status FROM facts f"
            " WHERE f.project_id = %(p)s AND (%(s)s::text IS NULL OR f.data_subject_id = %(s)s)"
            " AND (%(after)s::uuid IS NULL OR f.id > %(after)s) ORDER BY f.id LIMIT %(n)s",
            {"p": project_id, "s": data_subject_id, "after": after, "n": limit},
        )
        return await cursor.fetchall()


async def head(conn: Conn, project_id: int, fact_id: uuid.UUID) -> Head | None:
    """The fact's present version, if it is the project's."""
    async with conn.cursor(row_factory=class_row(Head)) as cursor:
        await cursor.execute(
            "SELECT id, version, valid_from, valid_until, known_from, known_until FROM facts"
            " WHERE project_id = %s AND id = %s",
            (project_id, fact_id),
        )
        return await cursor.fetchone()


async def history_page(
    conn: Conn,
    fact_id: uuid.UUID,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[HistoryRow]:
    """Earlier versions of a fact, the most recently ended first, before the cursor."""
    async with conn.cursor(row_factory=class_row(HistoryRow)) as cursor:
        await cursor.execute(
            "SELECT id, valid_from, valid_until, known_from, known_until, ended_by_observation_id"
            " FROM fact_history WHERE fact_id = %(f)s AND (%(k)s::timestamptz IS NULL"
            " OR (known_until, id) < (%(k)s, %(h)s::uuid))"
            " ORDER BY known_until DESC, id DESC LIMIT %(n)s",
            {
                "f": fact_id,
                "k": before[0] if before else None,
                "h": before[1] if before else None,
                "n": limit,
            },
        )
        return await cursor.fetchall()
