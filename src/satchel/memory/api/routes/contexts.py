"""`POST /v1/contexts`: one subject's history under a character budget, with no model call."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from satchel.memory.api.bodies import Answer, Body
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store.contexts import assemble
from satchel.memory.store.log import freshness

router = APIRouter(route_class=StrictRoute)


class ContextRequest(Body):
    data_subject_id: str | None = None
    max_characters: int | None = None


class ContextSegment(Answer):
    segment_id: str
    level: int
    from_offset: int
    to_offset: int
    covered: int
    summary: str


class ContextMessage(Answer):
    role: str
    content: str


class ContextTurn(Answer):
    log_offset: int
    occurred_at: datetime
    messages: list[ContextMessage]


class ContextWatermark(Answer):
    scope: str
    stored: int | None
    formed: int | None
    parked: int


class Context(Answer):
    segments: list[ContextSegment]
    turns: list[ContextTurn]
    watermark: ContextWatermark
    characters: int
    truncated: bool


def invalid_context(message: str) -> ApiError:
    return ApiError(400, "invalid_context", message)


@router.post("/v1/contexts", response_model=Context, **access("read"))
async def assemble_context(
    body: ContextRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Context:
    subject = body.data_subject_id or ""
    if not subject.strip():
        raise invalid_context("a data subject is required: a context is one subject's history")
    budget: int = request.app.state.settings.recall_budget
    if body.max_characters is not None:
        if not 0 < body.max_characters <= budget:
            raise invalid_context(
                "max_characters must be positive and no larger than the server's budget"
            )
        budget = body.max_characters
    async with request.app.state.pool.connection() as conn, conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        assembly = await assemble(conn, grant.project_id, subject, budget)
        watermark = ContextWatermark(**await freshness(conn, grant.project_id))
    return Context(
        segments=[
            ContextSegment(
                segment_id=str(segment.id),
                level=segment.level,
                from_offset=segment.start,
                to_offset=segment.end,
                covered=segment.covered,
                summary=segment.summary,
            )
            for segment in assembly.segments
        ],
        turns=[
            ContextTurn(
                log_offset=turn.offset,
                occurred_at=turn.occurred_at.astimezone(UTC),
                messages=[ContextMessage(role=role, content=text) for role, text in turn.messages],
            )
            for turn in assembly.turns
        ],
        watermark=watermark,
        characters=assembly.characters,
        truncated=assembly.truncated,
    )
