"""`POST /v1/records/{assert,correct,retract,list,history}`: authored facts and their changes."""

from __future__ import annotations

import uuid
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends
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
)
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.domain import UNRESOLVABLE
from satchel.memory.service import records
from satchel.memory.store import facts
from satchel.memory.store.predicates import PREDICATES

router = APIRouter(route_class=StrictRoute)

MAX_BATCH = 20
MAX_SUBJECT_ID_BYTES = 1_024
MAX_NAME_BYTES = 1_024
MAX_STATEMENT_BYTES = 16_384
MAX_PAGE_SUBJECT_BYTES = 1 << 20
PREVIEW_CHARACTERS = 512
DEFAULT_PAGE = 20
MAX_PAGE = 100

# A subject that is one of the `UNRESOLVABLE` words, in any case and spacing (as `normalize`
# reads it).
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


def _text_or_none(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def retraction_answer(retraction: facts.Retraction) -> Retracted:
    return Retracted(
        id=str(retraction.id),
        version=str(retraction.version),
        operation_id=str(retraction.operation_id),
        principal_id=_text_or_none(retraction.principal_id),
        retracted_at=retraction.retracted_at,
        replacement_source_observation_id=_text_or_none(
            retraction.replacement_source_observation_id
        ),
        replacement_record_id=_text_or_none(retraction.replacement_record_id),
    )


@router.post("/v1/records/assert", response_model=AssertAnswer, **access("write"))
async def assert_records(
    body: AssertBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> AssertAnswer:
    claims = [
        records.KeyedClaim(
            uuid.UUID(item.idempotency_key),
            facts.Claim(
                item.data_subject_id or None,
                item.subject,
                item.predicate,
                item.object,
                item.statement,
                item.valid_from,
            ),
        )
        for item in body.records
    ]
    done = await records.assert_records(parts.pool, grant.project_id, grant.token_id, claims)
    return AssertAnswer(
        records=[
            Asserted(
                id=str(item.id),
                version=str(item.version),
                source_observation_id=str(item.source_observation_id),
                replayed=item.replayed,
            )
            for item in done
        ]
    )


@router.post("/v1/records/correct", response_model=CorrectAnswer, **access("write"))
async def correct_records(
    body: CorrectBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> CorrectAnswer:
    changes = [
        records.Correction(
            uuid.UUID(item.id),
            uuid.UUID(item.expected_version),
            item.object,
            item.statement,
            item.valid_from,
        )
        for item in body.records
    ]
    done = await records.correct_records(parts.pool, grant.project_id, grant.token_id, changes)
    return CorrectAnswer(
        records=[
            Corrected(
                original_id=str(item.original_id),
                id=str(item.id),
                version=str(item.version),
                source_observation_id=str(item.source_observation_id),
            )
            for item in done
        ]
    )


@router.post("/v1/records/retract", response_model=RetractAnswer, **access("write"))
async def retract_records(
    body: RetractBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> RetractAnswer:
    expected = [
        records.Expected(uuid.UUID(item.id), uuid.UUID(item.expected_version))
        for item in body.records
    ]
    done = await records.retract_records(parts.pool, grant.project_id, grant.token_id, expected)
    return RetractAnswer(records=[retraction_answer(retraction) for retraction in done])


@router.post("/v1/records/list", response_model=ListAnswer, **access("read"))
async def list_records(
    body: ListBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ListAnswer:
    after = uuid.UUID(body.after.id) if body.after is not None else None
    page = await records.list_records(
        parts.pool,
        grant.project_id,
        body.data_subject_id or None,
        after,
        body.limit or DEFAULT_PAGE,
    )
    return ListAnswer(
        records=[
            Record(
                version=str(row.version),
                id=str(row.id),
                subject_entity_id=_text_or_none(row.subject_entity_id),
                object_entity_id=_text_or_none(row.object_entity_id),
                predicate=row.predicate,
                statement_preview=row.statement[:PREVIEW_CHARACTERS],
                statement_bytes=len(row.statement.encode()),
                preview_truncated=len(row.statement) > PREVIEW_CHARACTERS,
                source_role=row.source_role,
                recorded_at=row.recorded_at,
                status=row.status,
            )
            for row in page.rows
        ],
        next=RecordCursor(id=str(page.next)) if page.next is not None else None,
    )


@router.post("/v1/records/history", response_model=HistoryAnswer, **access("read"))
async def record_history(
    body: HistoryBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> HistoryAnswer:
    before = None
    if body.before is not None:
        before = (body.before.known_until, uuid.UUID(body.before.history_id))
    history = await records.record_history(
        parts.pool, grant.project_id, uuid.UUID(body.id), before, body.limit or DEFAULT_PAGE
    )
    current, last = history.head, history.next
    return HistoryAnswer(
        version=str(current.version),
        retraction=retraction_answer(history.retraction) if history.retraction else None,
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
                ended_by_observation_id=_text_or_none(row.ended_by_observation_id),
            )
            for row in history.previous
        ],
        next=(
            HistoryCursor(known_until=last.known_until, history_id=str(last.id))
            if last is not None and last.known_until is not None
            else None
        ),
    )
