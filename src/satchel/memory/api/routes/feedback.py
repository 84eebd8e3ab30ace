"""`POST /v1/feedback/{record,list,promote}`: reports that a record is wrong, and acting on them
(the rules are `satchel.memory.service.feedback`'s)."""

from __future__ import annotations

import uuid
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Text, Timestamp, Uuid, omitted
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.routes.records import MAX_NAME_BYTES, MAX_STATEMENT_BYTES
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.domain import Feedback
from satchel.memory.service import feedback
from satchel.memory.service.pages import keyset_page

router = APIRouter(route_class=StrictRoute)

DEFAULT_PAGE = 20
MAX_PAGE = 100
CORRECT = "record.correct"
RETRACT = "record.retract"

Id = Annotated[str, Uuid(nil=False)]


class FeedbackRecordRequest(Body):
    refusal: ClassVar[str] = "invalid_feedback"

    record_id: Id = Field(description="the record (a fact_id) the report is about")
    note: Annotated[str, Text(MAX_STATEMENT_BYTES)] = Field(
        description="what is wrong; a promoted correction's statement"
    )
    proposed_object: Annotated[str, Text(MAX_NAME_BYTES)] | None = Field(
        default=None, description="the object it should have; absent: promoting retracts"
    )


class FeedbackAfter(Body):
    recorded_at: Timestamp
    id: Id


class FeedbackListRequest(Body):
    refusal: ClassVar[str] = "invalid_feedback"

    record_id: Annotated[str, Uuid(nil=False, empty=True)] | None = Field(
        default=None, description="only reports about this record"
    )
    open_only: bool | None = Field(default=None, description="leave out promoted reports")
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] | None = Field(
        default=None, description=f"default {DEFAULT_PAGE}"
    )
    after: FeedbackAfter | None = Field(default=None, description="the previous page's `next`")


class FeedbackPromoteRequest(Body):
    refusal: ClassVar[str] = "invalid_feedback"

    id: Id = Field(description="the report")
    expected_version: Id = Field(description="the record's version (not the report's)")


class FeedbackItem(Answer):
    id: str
    record_id: str
    note: str
    proposed_object: str | None = omitted()
    recorded_by: str
    recorded_at: Instant
    promoted_by: str | None = omitted()
    promoted_at: Instant | None = omitted()
    replacement_record_id: str | None = omitted()


class FeedbackCursor(Answer):
    recorded_at: Instant
    id: str


class FeedbackPage(Answer):
    feedback: list[FeedbackItem]
    next: FeedbackCursor | None = omitted()


class Promotion(Answer):
    id: str
    record_id: str
    operation: str
    replacement_record_id: str | None = omitted()
    version: str
    promoted_at: Instant


def _item(row: Feedback) -> FeedbackItem:
    return FeedbackItem(
        id=str(row.id),
        record_id=str(row.fact_id),
        note=row.note,
        proposed_object=row.proposed_object,
        recorded_by=str(row.recorded_by),
        recorded_at=row.recorded_at,
        promoted_by=str(row.promoted_by) if row.promoted_by else None,
        promoted_at=row.promoted_at,
        replacement_record_id=(
            str(row.replacement_record_id) if row.replacement_record_id else None
        ),
    )


@router.post("/v1/feedback/record", response_model=FeedbackItem, **access("write"))
async def record_feedback(
    body: FeedbackRecordRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> FeedbackItem:
    written = await feedback.record(
        parts.pool,
        grant.project_id,
        grant.token_id,
        uuid.UUID(body.record_id),
        body.note,
        body.proposed_object,
    )
    return _item(written)


@router.post("/v1/feedback/list", response_model=FeedbackPage, **access("read"))
async def list_feedback(
    body: FeedbackListRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> FeedbackPage:
    limit = body.limit or DEFAULT_PAGE
    after = (body.after.recorded_at, uuid.UUID(body.after.id)) if body.after else None
    fact_id = uuid.UUID(body.record_id) if body.record_id else None
    rows = await feedback.page(
        parts.pool, grant.project_id, fact_id, bool(body.open_only), after, limit + 1
    )
    page, last = keyset_page(rows, limit)
    return FeedbackPage(
        feedback=[_item(row) for row in page],
        next=FeedbackCursor(recorded_at=last.recorded_at, id=str(last.id)) if last else None,
    )


@router.post("/v1/feedback/promote", response_model=Promotion, **access("write"))
async def promote_feedback(
    body: FeedbackPromoteRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> Promotion:
    promoted = await feedback.promote(
        parts.pool,
        grant.project_id,
        grant.token_id,
        uuid.UUID(body.id),
        uuid.UUID(body.expected_version),
    )
    replacement_id = promoted.replacement_record_id
    return Promotion(
        id=str(promoted.report.id),
        record_id=str(promoted.report.fact_id),
        operation=CORRECT if replacement_id else RETRACT,
        replacement_record_id=str(replacement_id) if replacement_id else None,
        version=str(promoted.version),
        promoted_at=promoted.at,
    )
