"""`POST /v1/inspect/{subjects,turns,segments,parked,worker}`: the
read-only routes the memory inspector needs beyond the contract's (satchel's own, under one
prefix), each a bounded page of the token's project."""

from __future__ import annotations

import uuid
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Text, Uuid, omitted
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.service import inspection
from satchel.memory.service.pages import keyset_page

router = APIRouter(route_class=StrictRoute)

MAX_SUBJECT_ID_BYTES = 1_024
DEFAULT_PAGE = 20
MAX_PAGE = 100
DEFAULT_TURNS = 10
MAX_TURNS = 20  # a turn holds up to 256 KiB of messages: a page stays within a few MiB
MAX_OFFSET = (1 << 53) - 1  # offsets count turns; a cursor above any real one is still exact

SubjectId = Annotated[str, Text(MAX_SUBJECT_ID_BYTES)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)] | None
PageLimit = Annotated[int, Field(ge=0, le=MAX_PAGE)] | None


class InspectBody(Body):
    refusal: ClassVar[str] = "invalid_inspection"


class WorkerBody(InspectBody):
    """No fields: the workers are the deployment's."""


class SubjectsBody(InspectBody):
    after: Annotated[str, Text(MAX_SUBJECT_ID_BYTES, blank="any")] | None = Field(
        default=None, description="the previous page's `next.data_subject_id`"
    )
    limit: PageLimit = Field(default=None, description=f"0 or absent: {DEFAULT_PAGE}")


class TurnsBody(InspectBody):
    data_subject_id: SubjectId
    after: Offset = Field(default=None, description="the previous page's `next.log_offset`")
    limit: Annotated[int, Field(ge=0, le=MAX_TURNS)] | None = Field(
        default=None, description=f"0 or absent: {DEFAULT_TURNS}"
    )


class SegmentsBody(InspectBody):
    data_subject_id: SubjectId
    after: Annotated[str, Uuid()] | None = Field(
        default=None, description="the previous page's `next.id`"
    )
    limit: PageLimit = Field(default=None, description=f"0 or absent: {DEFAULT_PAGE}")


class ParkedBody(InspectBody):
    after: Offset = Field(default=None, description="the previous page's `next.log_offset`")
    limit: PageLimit = Field(default=None, description=f"0 or absent: {DEFAULT_PAGE}")


class SubjectSeen(Answer):
    data_subject_id: str
    turns: int
    last_occurred_at: Instant


class SubjectNext(Answer):
    data_subject_id: str


class SubjectsAnswer(Answer):
    subjects: list[SubjectSeen]
    next: SubjectNext | None = omitted()


class TurnMessage(Answer):
    chunk_id: str
    ordinal: int
    role: str
    occurred_at: Instant
    text: str


class StoredTurn(Answer):
    id: str
    log_offset: int
    occurred_at: Instant
    stored_at: Instant
    state: Literal["formed", "parked", "waiting"]
    messages: list[TurnMessage]


class OffsetNext(Answer):
    log_offset: int


class TurnsAnswer(Answer):
    turns: list[StoredTurn]
    next: OffsetNext | None = omitted()


class Segment(Answer):
    id: str
    level: int
    from_offset: int
    to_offset: int
    covered: int
    summary: str
    created_at: Instant


class SegmentNext(Answer):
    id: str


class SegmentsAnswer(Answer):
    segments: list[Segment]
    next: SegmentNext | None = omitted()


class ParkedTurn(Answer):
    id: str
    kind: str
    log_offset: int
    attempts: int
    stored_at: Instant
    parked_at: Instant
    failure: str | None


class ParkedAnswer(Answer):
    parked: list[ParkedTurn]
    next: OffsetNext | None = omitted()


class WorkerAnswer(Answer):
    running: int
    beat_age_seconds: float | None


Project = Annotated[Grant, Depends(current_grant)]


@router.post("/v1/inspect/subjects", response_model=SubjectsAnswer, **access("read"))
async def inspect_subjects(body: SubjectsBody, parts: Parts, grant: Project) -> SubjectsAnswer:
    limit = body.limit or DEFAULT_PAGE
    found = await inspection.data_subjects(parts.pool, grant.project_id, body.after, limit)
    page, last = keyset_page(found, limit)
    return SubjectsAnswer(
        subjects=[
            SubjectSeen(
                data_subject_id=row.data_subject_id,
                turns=row.turns,
                last_occurred_at=row.last_occurred_at,
            )
            for row in page
        ],
        next=SubjectNext(data_subject_id=last.data_subject_id) if last else None,
    )


def _state(formed: bool, parked: bool) -> Literal["formed", "parked", "waiting"]:
    return "parked" if parked else "formed" if formed else "waiting"


@router.post("/v1/inspect/turns", response_model=TurnsAnswer, **access("read"))
async def inspect_turns(body: TurnsBody, parts: Parts, grant: Project) -> TurnsAnswer:
    limit = body.limit or DEFAULT_TURNS
    found = await inspection.subject_turns(
        parts.pool, grant.project_id, body.data_subject_id, body.after, limit
    )
    page, last = keyset_page(found, limit)
    return TurnsAnswer(
        turns=[
            StoredTurn(
                id=str(turn.row.id),
                log_offset=turn.row.log_offset,
                occurred_at=turn.row.occurred_at,
                stored_at=turn.row.stored_at,
                state=_state(turn.row.formed, turn.row.parked),
                messages=[
                    TurnMessage(
                        chunk_id=str(message.id),
                        ordinal=message.ordinal,
                        role=message.role,
                        occurred_at=message.occurred_at,
                        text=message.content,
                    )
                    for message in turn.messages
                ],
            )
            for turn in page
        ],
        next=OffsetNext(log_offset=last.row.log_offset) if last else None,
    )


@router.post("/v1/inspect/segments", response_model=SegmentsAnswer, **access("read"))
async def inspect_segments(body: SegmentsBody, parts: Parts, grant: Project) -> SegmentsAnswer:
    limit = body.limit or DEFAULT_PAGE
    after = uuid.UUID(body.after) if body.after else None
    found = await inspection.subject_segments(
        parts.pool, grant.project_id, body.data_subject_id, after, limit
    )
    page, last = keyset_page(found, limit)
    return SegmentsAnswer(
        segments=[
            Segment(
                id=str(row.id),
                level=row.level,
                from_offset=row.from_offset,
                to_offset=row.to_offset,
                covered=row.covered,
                summary=row.summary,
                created_at=row.created_at,
            )
            for row in page
        ],
        next=SegmentNext(id=str(last.id)) if last else None,
    )


@router.post("/v1/inspect/parked", response_model=ParkedAnswer, **access("read"))
async def inspect_parked(body: ParkedBody, parts: Parts, grant: Project) -> ParkedAnswer:
    limit = body.limit or DEFAULT_PAGE
    found = await inspection.parked_turns(parts.pool, grant.project_id, body.after, limit)
    page, last = keyset_page(found, limit)
    return ParkedAnswer(
        parked=[
            ParkedTurn(
                id=str(turn.row.id),
                kind=turn.row.kind,
                log_offset=turn.row.log_offset,
                attempts=turn.row.attempts,
                stored_at=turn.row.stored_at,
                parked_at=turn.row.parked_at,
                failure=turn.failure,
            )
            for turn in page
        ],
        next=OffsetNext(log_offset=last.row.log_offset) if last else None,
    )


@router.post("/v1/inspect/worker", response_model=WorkerAnswer, **access("read"))
async def inspect_worker(body: WorkerBody, parts: Parts) -> WorkerAnswer:
    """The deployment's formation workers (shared by its projects): how many run, and the
    seconds since the freshest one reported in (null when none runs)."""
    state = await inspection.worker_state(parts.pool)
    return WorkerAnswer(running=state.running, beat_age_seconds=state.beat_age)
