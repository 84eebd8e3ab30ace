"""Authored records' use cases: assert (idempotent per key), correct, retract, list and history.

Each change is one transaction: the project's facts are locked in id order and checked against
the versions the caller expects; an assertion's retry keys are locked in key order and a retry
must repeat the first attempt's content (its fingerprint)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import (
    MAX_EVIDENCE,
    UNRESOLVABLE,
    Conflict,
    Invalid,
    NotFound,
    TooLarge,
    render_time,
)
from satchel.memory.service.pages import keyset_page
from satchel.memory.store import facts
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import normalize
from satchel.memory.store.supersession import RecordConflict

ASSERT_NAMESPACE = "record.assert/v1:"
ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class KeyedClaim:
    """One record to assert and the idempotency key its retries repeat."""

    key: uuid.UUID
    claim: facts.Claim


@dataclass(frozen=True, slots=True)
class Asserted:
    """An asserted record: the fact, its version now, its source and whether it was a retry."""

    id: uuid.UUID
    version: uuid.UUID
    source_observation_id: uuid.UUID
    replayed: bool


@dataclass(frozen=True, slots=True)
class Correction:
    """A record's new object and statement, given the version the caller last read."""

    id: uuid.UUID
    expected_version: uuid.UUID
    object: str
    statement: str
    valid_from: datetime | None


@dataclass(frozen=True, slots=True)
class Corrected:
    """A corrected record: the original and the fact that replaces it."""

    original_id: uuid.UUID
    id: uuid.UUID
    version: uuid.UUID
    source_observation_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Expected:
    """A record to retract and the version the caller last read."""

    id: uuid.UUID
    version: uuid.UUID


@dataclass(frozen=True, slots=True)
class RecordPage:
    """Up to `limit` records, and the id the next page starts after (None: no next page)."""

    rows: list[facts.RecordRow]
    next: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class History:
    """A record's present version, its retraction if any, and a page of earlier versions."""

    head: facts.Head
    retraction: facts.Retraction | None
    previous: list[facts.HistoryRow]
    next: facts.HistoryRow | None


def fingerprint(claim: facts.Claim) -> bytes:
    """The content a retry of an assertion must repeat."""
    valid_from = render_time(claim.valid_from) if claim.valid_from else ZERO_TIME
    document = [
        "record.assert/v1",
        claim.data_subject_id or "",
        claim.subject,
        claim.predicate,
        claim.object,
        claim.statement,
        valid_from,
    ]
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()


def _mutation(message: str) -> Invalid:
    return Invalid(message, "invalid_record_mutation")


def _check_claims(claims: list[KeyedClaim]) -> None:
    """Subjects that name someone, keys distinct."""
    for index, item in enumerate(claims):
        if normalize(item.claim.subject) in UNRESOLVABLE:
            raise _mutation(
                f"records[{index}].subject: must name someone or something, not stand in for it"
            )
    _distinct([item.key for item in claims], "idempotency_key")


def _distinct(values: list[uuid.UUID], field: str) -> None:
    seen: set[uuid.UUID] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise _mutation(f"records[{index}].{field}: repeats an earlier record's")
        seen.add(value)


async def _lock(
    conn: Conn, project_id: int, expected: list[Expected], *, open_validity: bool
) -> dict[uuid.UUID, facts.Target]:
    """Lock the batch's facts. In the contract's order: more than `MAX_EVIDENCE` pieces of
    evidence across the batch (413), then any not the project's (404), then any not at the
    expected version or no longer known (409; corrections also need them still valid)."""
    targets = await facts.lock_targets(conn, project_id, [item.id for item in expected])
    if sum(target.evidence for target in targets.values()) > MAX_EVIDENCE:
        raise TooLarge(
            f"the batch's records hold more than {MAX_EVIDENCE} pieces of evidence; split it",
            "record_mutation_limit",
        )
    if len(targets) != len(expected):
        raise NotFound("record not found")
    for item in expected:
        target = targets[item.id]
        if (
            target.version != item.version
            or target.known_until is not None
            or (open_validity and target.valid_until is not None)
        ):
            raise Conflict("the record changed or is closed; read it again", "record_conflict")
    return targets


def _out_of_order(index: int) -> Conflict:
    return Conflict(
        f"records[{index}]: its validity overlaps a single-valued record still believed that it"
        " cannot supersede (one starting at the same time or later, or a closed range); inspect"
        " the current records",
        "record_conflict",
    )


async def assert_records(
    pool: AsyncConnectionPool, project_id: int, principal: uuid.UUID, claims: list[KeyedClaim]
) -> list[Asserted]:
    """Assert each claim as an authored fact; a key seen before answers what it wrote, when the
    claim repeats the first attempt's, else `idempotency_conflict`."""
    _check_claims(claims)
    at = datetime.now(UTC)
    answers: list[tuple[uuid.UUID, uuid.UUID, bool]] = []
    async with pool.connection() as conn, conn.transaction():
        admitted = await facts.cardinalities(conn, [item.claim.predicate for item in claims])
        for index, item in enumerate(claims):
            if item.claim.predicate not in admitted:
                raise _mutation(f"records[{index}].predicate: is not an admitted predicate")
        for key in sorted(item.key for item in claims):
            await facts.lock_retry_key(conn, project_id, key)
        for index, item in enumerate(claims):
            claim = item.claim
            digest = hashlib.sha256(ASSERT_NAMESPACE.encode() + item.key.bytes).digest()
            content = fingerprint(claim)
            seen = await facts.retried(conn, project_id, digest)
            if seen is not None:
                seen_content, fact_id, source_id = seen
                if fact_id is None or source_id is None or seen_content != content:
                    raise Conflict(
                        "idempotency key was already used for a different or erased assertion",
                        "idempotency_conflict",
                    )
                answers.append((fact_id, source_id, True))
                continue
            try:
                written = await facts.assert_claim(
                    conn, project_id, principal, claim, admitted[claim.predicate], at
                )
            except RecordConflict:
                raise _out_of_order(index) from None
            await facts.remember_retry(
                conn, project_id, digest, content, written.source_observation_id
            )
            answers.append((written.id, written.source_observation_id, False))
        current = await facts.versions(conn, [fact_id for fact_id, _, _ in answers])
    return [
        Asserted(fact_id, current[fact_id], source_id, replayed)
        for fact_id, source_id, replayed in answers
    ]


async def correct_records(
    pool: AsyncConnectionPool, project_id: int, principal: uuid.UUID, changes: list[Correction]
) -> list[Corrected]:
    """Retract each record and assert its replacement (same subject and predicate)."""
    expected = [Expected(change.id, change.expected_version) for change in changes]
    _distinct([item.id for item in expected], "id")
    at = datetime.now(UTC)
    written: list[tuple[uuid.UUID, facts.Written]] = []
    async with pool.connection() as conn, conn.transaction():
        await facts.lock_log(conn, project_id)
        targets = await _lock(conn, project_id, expected, open_validity=True)
        admitted = await facts.cardinalities(conn, [t.predicate for t in targets.values()])
        for index, change in enumerate(changes):
            target = targets[change.id]
            claim = facts.Claim(
                target.data_subject_id,
                target.subject,
                target.predicate,
                change.object,
                change.statement,
                change.valid_from,
            )
            ids = facts.Written(uuid.uuid4(), uuid.uuid4())
            await facts.retract(conn, target, principal, at, ids)
            cardinality = admitted.get(target.predicate, "many")
            try:
                replacement = await facts.assert_claim(
                    conn, project_id, principal, claim, cardinality, at, ids
                )
            except RecordConflict:
                raise _out_of_order(index) from None
            written.append((change.id, replacement))
        current = await facts.versions(conn, [w.id for _, w in written])
    return [
        Corrected(original, w.id, current[w.id], w.source_observation_id) for original, w in written
    ]


async def retract_records(
    pool: AsyncConnectionPool, project_id: int, principal: uuid.UUID, expected: list[Expected]
) -> list[facts.Retraction]:
    """Close what is known of each record now; their validity is kept."""
    _distinct([item.id for item in expected], "id")
    at = datetime.now(UTC)
    async with pool.connection() as conn, conn.transaction():
        targets = await _lock(conn, project_id, expected, open_validity=False)
        return [await facts.retract(conn, targets[item.id], principal, at) for item in expected]


async def list_records(
    pool: AsyncConnectionPool,
    project_id: int,
    data_subject_id: str | None,
    after: uuid.UUID | None,
    limit: int,
) -> RecordPage:
    """Up to `limit` records of the project (or of one person) in id order, after `after`."""
    async with pool.connection() as conn:
        rows = await facts.record_page(conn, project_id, data_subject_id, after, limit + 1)
    page, last = keyset_page(rows, limit)
    return RecordPage(page, last.id if last else None)


async def record_history(
    pool: AsyncConnectionPool,
    project_id: int,
    fact_id: uuid.UUID,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> History:
    """The record's present version and up to `limit` earlier ones before the cursor."""
    async with pool.connection() as conn:
        head = await facts.head(conn, project_id, fact_id)
        if head is None:
            raise NotFound("record not found")
        rows = await facts.history_page(conn, fact_id, before, limit + 1)
        retraction = await facts.retraction_of(conn, fact_id)
    page, last = keyset_page(rows, limit)
    return History(head, retraction, page, last)
