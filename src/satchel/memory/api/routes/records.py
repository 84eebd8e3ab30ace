"""`POST /v1/records/{assert,correct,retract,list,history}`: authored facts and their changes."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from satchel.memory.api.bodies import (
    Answer,
    Body,
    Instant,
    Interval,
    Text,
    Timestamp,
    Uuid,
    interval,
    omitted,
    render_time,
)
from satchel.memory.api.errors import ApiError, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store import facts
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import normalize
from satchel.memory.store.predicates import PREDICATES

router = APIRouter(route_class=StrictRoute)

MAX_BATCH = 20
MAX_EVIDENCE = 128
MAX_SUBJECT_ID_BYTES = 1_024
MAX_NAME_BYTES = 1_024
MAX_STATEMENT_BYTES = 16_384
MAX_PAGE_SUBJECT_BYTES = 1 << 20
PREVIEW_CHARACTERS = 512
DEFAULT_PAGE = 20
MAX_PAGE = 100
ASSERT_NAMESPACE = "record.assert/v1:"
ZERO_TIME = "0001-01-01T00:00:00Z"

# Names that stand for someone only in context: a subject cannot be one of these.
UNRESOLVABLE = frozenset(
    {
        "he",
        "she",
        "it",
        "they",
        "him",
        "her",
        "them",
        "his",
        "hers",
        "its",
        "their",
        "theirs",
        "this",
        "that",
        "these",
        "those",
        "we",
        "us",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "someone",
        "somebody",
        "something",
        "anyone",
        "anybody",
        "anything",
        "everyone",
        "everybody",
        "everything",
        "nobody",
        "nothing",
        "who",
        "whom",
        "what",
        "which",
        "here",
        "there",
    }
)


# A subject that is one of those words, in any case and spacing (as `normalize` reads it).
STAND_INS = (
    "^\\s*(?:"
    + "|".join("".join(f"[{c}{c.upper()}]" for c in word) for word in sorted(UNRESOLVABLE))
    + ")\\s*$"
)
Predicate = Literal[PREDICATES]  # type: ignore[valid-type]
RecordId = Annotated[str, Uuid(nil=False)]
Version = Annotated[str, Uuid(nil=False)]
Name = Annotated[str, Text(MAX_NAME_BYTES)]
Statement = Annotated[str, Text(MAX_STATEMENT_BYTES)]


class AssertItem(Body):
    idempotency_key: Annotated[str, Uuid()] = Field(description="one UUID per record")
    data_subject_id: Annotated[str, Text(MAX_SUBJECT_ID_BYTES, blank="empty")] | None = None
    subject: Name = Field(
        description="whom or what it is about; not a word that only stands in for someone",
        json_schema_extra={"not": {"pattern": STAND_INS}},
    )
    predicate: Predicate
    object: Name
    statement: Statement
    valid_from: Timestamp | None = None


Batch = Field(min_length=1, max_length=MAX_BATCH)


class AssertBody(Body):
    refusal: ClassVar[str] = "invalid_record_mutation"

    records: Annotated[list[AssertItem], Batch, Field(description="unique idempotency keys")]


class Asserted(Answer):
    id: str
    version: str
    source_observation_id: str
    replayed: bool


class AssertAnswer(Answer):
    records: list[Asserted]


class CorrectItem(Body):
    id: RecordId
    expected_version: Version
    object: Name
    statement: Statement
    valid_from: Timestamp | None = Field(default=None, description="default: server time")


class CorrectBody(Body):
    refusal: ClassVar[str] = "invalid_record_mutation"

    records: Annotated[list[CorrectItem], Batch, Field(description="unique record ids")]


class Corrected(Answer):
    original_id: str
    id: str
    version: str
    source_observation_id: str


class CorrectAnswer(Answer):
    records: list[Corrected]


class RetractItem(Body):
    id: RecordId
    expected_version: Version


class RetractBody(Body):
    refusal: ClassVar[str] = "invalid_record_mutation"

    records: Annotated[list[RetractItem], Batch, Field(description="unique record ids")]


class Retracted(Answer):
    id: str
    version: str
    operation_id: str
    principal_id: str | None
    retracted_at: Instant
    replacement_source_observation_id: str | None = omitted()
    replacement_record_id: str | None = omitted()


class RetractAnswer(Answer):
    records: list[Retracted]


class RecordAfter(Body):
    id: Annotated[str, Uuid()]


PageLimit = Annotated[int, Field(ge=0, le=MAX_PAGE)] | None


class ListBody(Body):
    refusal: ClassVar[str] = "invalid_record_page"

    data_subject_id: Annotated[str, Text(MAX_PAGE_SUBJECT_BYTES, blank="empty")] | None = None
    after: RecordAfter | None = Field(default=None, description="the previous page's `next`")
    limit: PageLimit = Field(default=None, description=f"0 or absent: {DEFAULT_PAGE}")


class Record(Answer):
    version: str
    id: str
    subject_entity_id: str | None
    object_entity_id: str | None
    predicate: str
    statement_preview: str
    statement_bytes: int
    preview_truncated: bool
    source_role: str
    recorded_at: Instant
    status: str


class RecordCursor(Answer):
    id: str


class ListAnswer(Answer):
    records: list[Record]
    next: RecordCursor | None = omitted()


class HistoryBefore(Body):
    known_until: Timestamp
    history_id: Annotated[str, Uuid()]


class HistoryBody(Body):
    refusal: ClassVar[str] = "invalid_record_page"

    id: RecordId
    before: HistoryBefore | None = Field(default=None, description="the previous page's `next`")
    limit: PageLimit = Field(default=None, description=f"0 or absent: {DEFAULT_PAGE}")


class RecordTimes(Answer):
    valid: Interval
    known: Interval


class RecordVersion(Answer):
    history_id: str
    valid: Interval
    known: Interval
    ended_by_observation_id: str | None


class HistoryCursor(Answer):
    known_until: Instant
    history_id: str


class HistoryAnswer(Answer):
    version: str
    retraction: Retracted | None = omitted()
    id: str
    current: RecordTimes
    previous: list[RecordVersion]
    next: HistoryCursor | None = omitted()


def _strid(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def retraction_answer(retraction: facts.Retraction) -> Retracted:
    return Retracted(
        id=str(retraction.id),
        version=str(retraction.version),
        operation_id=str(retraction.operation_id),
        principal_id=_strid(retraction.principal_id),
        retracted_at=retraction.retracted_at,
        replacement_source_observation_id=_strid(retraction.replacement_source_observation_id),
        replacement_record_id=_strid(retraction.replacement_record_id),
    )


def _fingerprint(claim: facts.Claim) -> bytes:
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


def _mutation(message: str) -> ApiError:
    return ApiError(400, "invalid_record_mutation", message)


def _claims(items: list[AssertItem]) -> list[tuple[uuid.UUID, facts.Claim]]:
    found: list[tuple[uuid.UUID, facts.Claim]] = []
    for index, item in enumerate(items):
        if normalize(item.subject) in UNRESOLVABLE:
            raise _mutation(
                f"records[{index}].subject: must name someone or something, not stand in for it"
            )
        claim = facts.Claim(
            item.data_subject_id or None,
            item.subject,
            item.predicate,
            item.object,
            item.statement,
            item.valid_from,
        )
        found.append((uuid.UUID(item.idempotency_key), claim))
    _distinct([key for key, _ in found], "idempotency_key")
    return found


def _distinct(values: list[uuid.UUID], field: str) -> None:
    seen: set[uuid.UUID] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise _mutation(f"records[{index}].{field}: repeats an earlier record's")
        seen.add(value)


def _targets(items: list[CorrectItem] | list[RetractItem]) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The (id, expected_version) pairs of a correct or retract batch, ids distinct."""
    pairs = [(uuid.UUID(item.id), uuid.UUID(item.expected_version)) for item in items]
    _distinct([fact_id for fact_id, _ in pairs], "id")
    return pairs


async def _lock(
    conn: Conn,
    project_id: int,
    pairs: list[tuple[uuid.UUID, uuid.UUID]],
    *,
    open_validity: bool,
) -> dict[uuid.UUID, facts.Target]:
    """Lock the batch's facts. In the contract's order: more than `MAX_EVIDENCE` pieces of
    evidence across the batch (413), then any not the project's (404), then any not at the
    expected version or no longer known (409; corrections also need them still valid)."""
    targets = await facts.lock_targets(conn, project_id, [fact_id for fact_id, _ in pairs])
    if sum(target.evidence for target in targets.values()) > MAX_EVIDENCE:
        raise ApiError(
            413,
            "record_mutation_limit",
            f"the batch's records hold more than {MAX_EVIDENCE} pieces of evidence; split it",
        )
    if len(targets) != len(pairs):
        raise not_found("record not found")
    for fact_id, version in pairs:
        target = targets[fact_id]
        if (
            target.version != version
            or target.known_until is not None
            or (open_validity and target.valid_until is not None)
        ):
            raise ApiError(409, "record_conflict", "the record changed or is closed; read it again")
    return targets


def _out_of_order(index: int) -> ApiError:
    return ApiError(
        409,
        "record_conflict",
        f"records[{index}]: its validity overlaps a single-valued record still believed that it"
        " cannot supersede (one starting at the same time or later, or a closed range); inspect"
        " the current records",
    )


@router.post("/v1/records/assert", response_model=AssertAnswer, **access("write"))
async def assert_records(
    body: AssertBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> AssertAnswer:
    claims = _claims(body.records)
    at = datetime.now(UTC)
    answers: list[tuple[uuid.UUID, uuid.UUID, bool]] = []
    async with request.app.state.pool.connection() as conn, conn.transaction():
        admitted = await facts.cardinalities(conn, [claim.predicate for _, claim in claims])
        for index, (_, claim) in enumerate(claims):
            if claim.predicate not in admitted:
                raise _mutation(f"records[{index}].predicate: is not an admitted predicate")
        for key in sorted(key for key, _ in claims):
            await facts.lock_retry_key(conn, grant.project_id, key)
        for index, (key, claim) in enumerate(claims):
            digest = hashlib.sha256(ASSERT_NAMESPACE.encode() + key.bytes).digest()
            printed = _fingerprint(claim)
            seen = await facts.retried(conn, grant.project_id, digest)
            if seen is not None:
                fingerprint, fact_id, source_id = seen
                if fact_id is None or source_id is None or fingerprint != printed:
                    raise ApiError(
                        409,
                        "idempotency_conflict",
                        "idempotency key was already used for a different or erased assertion",
                    )
                answers.append((fact_id, source_id, True))
                continue
            try:
                written = await facts.assert_claim(
                    conn, grant.project_id, grant.token_id, claim, admitted[claim.predicate], at
                )
            except facts.RecordConflict:
                raise _out_of_order(index) from None
            await facts.remember_retry(
                conn, grant.project_id, digest, printed, written.source_observation_id
            )
            answers.append((written.id, written.source_observation_id, False))
        current = await facts.versions(conn, [fact_id for fact_id, _, _ in answers])
    return AssertAnswer(
        records=[
            Asserted(
                id=str(fact_id),
                version=str(current[fact_id]),
                source_observation_id=str(source_id),
                replayed=replayed,
            )
            for fact_id, source_id, replayed in answers
        ]
    )


@router.post("/v1/records/correct", response_model=CorrectAnswer, **access("write"))
async def correct_records(
    body: CorrectBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> CorrectAnswer:
    items = body.records
    pairs = _targets(items)
    at = datetime.now(UTC)
    written: list[tuple[uuid.UUID, facts.Written]] = []
    async with request.app.state.pool.connection() as conn, conn.transaction():
        await facts.lock_log(conn, grant.project_id)
        targets = await _lock(conn, grant.project_id, pairs, open_validity=True)
        admitted = await facts.cardinalities(conn, [t.predicate for t in targets.values()])
        for index, ((fact_id, _), item) in enumerate(zip(pairs, items, strict=True)):
            target = targets[fact_id]
            claim = facts.Claim(
                target.data_subject_id,
                target.subject,
                target.predicate,
                item.object,
                item.statement,
                item.valid_from,
            )
            ids = facts.Written(uuid.uuid4(), uuid.uuid4())
            await facts.retract(conn, target, grant.token_id, at, ids)
            cardinality = admitted.get(target.predicate, "many")
            try:
                replacement = await facts.assert_claim(
                    conn, grant.project_id, grant.token_id, claim, cardinality, at, ids
                )
            except facts.RecordConflict:
                raise _out_of_order(index) from None
            written.append((fact_id, replacement))
        current = await facts.versions(conn, [w.id for _, w in written])
    return CorrectAnswer(
        records=[
            Corrected(
                original_id=str(original),
                id=str(w.id),
                version=str(current[w.id]),
                source_observation_id=str(w.source_observation_id),
            )
            for original, w in written
        ]
    )


@router.post("/v1/records/retract", response_model=RetractAnswer, **access("write"))
async def retract_records(
    body: RetractBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> RetractAnswer:
    pairs = _targets(body.records)
    at = datetime.now(UTC)
    async with request.app.state.pool.connection() as conn, conn.transaction():
        targets = await _lock(conn, grant.project_id, pairs, open_validity=False)
        done = [
            await facts.retract(conn, targets[fact_id], grant.token_id, at) for fact_id, _ in pairs
        ]
    return RetractAnswer(records=[retraction_answer(retraction) for retraction in done])


@router.post("/v1/records/list", response_model=ListAnswer, **access("read"))
async def list_records(
    body: ListBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ListAnswer:
    limit = body.limit or DEFAULT_PAGE
    after = uuid.UUID(body.after.id) if body.after is not None else None
    subject_id = body.data_subject_id or None
    async with request.app.state.pool.connection() as conn:
        rows = await facts.record_page(conn, grant.project_id, subject_id, after, limit + 1)
    page = rows[:limit]
    return ListAnswer(
        records=[
            Record(
                version=str(row.version),
                id=str(row.id),
                subject_entity_id=_strid(row.subject_entity_id),
                object_entity_id=_strid(row.object_entity_id),
                predicate=row.predicate,
                statement_preview=row.statement[:PREVIEW_CHARACTERS],
                statement_bytes=len(row.statement.encode()),
                preview_truncated=len(row.statement) > PREVIEW_CHARACTERS,
                source_role=row.source_role,
                recorded_at=row.recorded_at,
                status=row.status,
            )
            for row in page
        ],
        next=RecordCursor(id=str(page[-1].id)) if len(rows) > limit else None,
    )


@router.post("/v1/records/history", response_model=HistoryAnswer, **access("read"))
async def record_history(
    body: HistoryBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> HistoryAnswer:
    fact_id = uuid.UUID(body.id)
    limit = body.limit or DEFAULT_PAGE
    before = None
    if body.before is not None:
        before = (body.before.known_until, uuid.UUID(body.before.history_id))
    async with request.app.state.pool.connection() as conn:
        current = await facts.head(conn, grant.project_id, fact_id)
        if current is None:
            raise not_found("record not found")
        rows = await facts.history_page(conn, fact_id, before, limit + 1)
        retraction = await facts.retraction_of(conn, fact_id)
    page = rows[:limit]
    last = page[-1] if len(rows) > limit else None
    return HistoryAnswer(
        version=str(current.version),
        retraction=retraction_answer(retraction) if retraction else None,
        id=str(current.id),
        current=RecordTimes(
            valid=interval(current.valid_from, current.valid_until),
            known=interval(current.known_from, current.known_until),
        ),
        previous=[
            RecordVersion(
                history_id=str(row.id),
                valid=interval(row.valid_from, row.valid_until),
                known=interval(row.known_from, row.known_until),
                ended_by_observation_id=_strid(row.ended_by_observation_id),
            )
            for row in page
        ],
        next=(
            HistoryCursor(known_until=last.known_until, history_id=str(last.id))
            if last is not None and last.known_until is not None
            else None
        ),
    )
