"""`POST /v1/feedback/{record,list,promote}`: reports that a record is wrong, and acting on them.

Recording changes nothing else. Promotion runs the correction (a proposed object) or the
retraction (none) a caller could have sent, credited to the promoter, in one transaction with the
report's promotion mark, so a report is promoted once.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Text, Timestamp, Uuid, omitted
from satchel.memory.api.errors import ApiError, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.routes.records import MAX_NAME_BYTES, MAX_STATEMENT_BYTES
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.domain import MAX_EVIDENCE
from satchel.memory.store import facts
from satchel.memory.store import feedback as store
from satchel.memory.store.database import Conn

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


def _item(row: store.Feedback) -> FeedbackItem:
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
    body: FeedbackRecordRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> FeedbackItem:
    async with request.app.state.pool.connection() as conn, conn.transaction():
        written = await store.record(
            conn,
            grant.project_id,
            grant.token_id,
            uuid.UUID(body.record_id),
            body.note,
            body.proposed_object,
            datetime.now(UTC),
        )
    if written is None:
        raise not_found("record not found")
    return _item(written)


@router.post("/v1/feedback/list", response_model=FeedbackPage, **access("read"))
async def list_feedback(
    body: FeedbackListRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> FeedbackPage:
    limit = body.limit or DEFAULT_PAGE
    after = (body.after.recorded_at, uuid.UUID(body.after.id)) if body.after else None
    fact_id = uuid.UUID(body.record_id) if body.record_id else None
    async with request.app.state.pool.connection() as conn:
        rows = await store.page(
            conn, grant.project_id, fact_id, bool(body.open_only), after, limit + 1
        )
    shown = rows[:limit]
    last = shown[-1] if len(rows) > limit else None
    return FeedbackPage(
        feedback=[_item(row) for row in shown],
        next=FeedbackCursor(recorded_at=last.recorded_at, id=str(last.id)) if last else None,
    )


async def _target(
    conn: Conn, project_id: int, fact_id: uuid.UUID, version: uuid.UUID, *, correct: bool
) -> facts.Target:
    """The report's record, locked: at the expected version and still known (a correction also
    needs it still valid), else 409; with bounded evidence, else 413."""
    target = (await facts.lock_targets(conn, project_id, [fact_id])).get(fact_id)
    if target is None:
        raise not_found("record not found")
    if (
        target.version != version
        or target.known_until is not None
        or (correct and target.valid_until is not None)
    ):
        raise ApiError(409, "record_conflict", "the record changed or is closed; read it again")
    if target.evidence > MAX_EVIDENCE:
        raise ApiError(
            413,
            "record_mutation_limit",
            f"a record with more than {MAX_EVIDENCE} pieces of evidence cannot be changed here",
        )
    return target


@router.post("/v1/feedback/promote", response_model=Promotion, **access("write"))
async def promote_feedback(
    body: FeedbackPromoteRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Promotion:
    at = datetime.now(UTC)
    version = uuid.UUID(body.expected_version)
    async with request.app.state.pool.connection() as conn, conn.transaction():
        # The log lock first, as corrections and erasures take it; then the report, so racing
        # promotions queue on it and the later one finds it promoted.
        await facts.lock_log(conn, grant.project_id)
        report = await store.lock(conn, grant.project_id, uuid.UUID(body.id))
        if report is None:
            raise not_found("feedback not found")
        if report.promoted_at is not None:
            raise ApiError(
                409, "feedback_already_promoted", "this feedback was already promoted; stop here"
            )
        correct = report.proposed_object is not None
        target = await _target(conn, grant.project_id, report.fact_id, version, correct=correct)
        replacement: facts.Written | None = None
        if report.proposed_object is not None:
            admitted = await facts.cardinalities(conn, [target.predicate])
            claim = facts.Claim(
                target.data_subject_id,
                target.subject,
                target.predicate,
                report.proposed_object,
                report.note,
                at,
            )
            replacement = facts.Written(uuid.uuid4(), uuid.uuid4())
            await facts.retract(conn, target, grant.token_id, at, replacement)
            try:
                await facts.assert_claim(
                    conn,
                    grant.project_id,
                    grant.token_id,
                    claim,
                    admitted.get(target.predicate, "many"),
                    at,
                    replacement,
                )
            except facts.RecordConflict:
                raise ApiError(
                    409,
                    "record_conflict",
                    "the proposed object conflicts with a single-valued record believed over the"
                    " same time; correct that record instead",
                ) from None
            new_version = (await facts.versions(conn, [replacement.id]))[replacement.id]
        else:
            new_version = (await facts.retract(conn, target, grant.token_id, at)).version
        replacement_id = replacement.id if replacement else None
        await store.mark_promoted(conn, report.id, grant.token_id, at, replacement_id)
    return Promotion(
        id=str(report.id),
        record_id=str(report.fact_id),
        operation=CORRECT if replacement else RETRACT,
        replacement_record_id=str(replacement_id) if replacement_id else None,
        version=str(new_version),
        promoted_at=at,
    )
