"""`POST /v1/contexts`: one subject's history under a character budget, with no model call."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Text
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.config import MemorySettings
from satchel.memory.service.contexts import context

router = APIRouter(route_class=StrictRoute)

BUDGET = MemorySettings().recall_budget


class ContextRequest(Body):
    refusal: ClassVar[str] = "invalid_context"

    data_subject_id: Annotated[str, Text()] = Field(description="whose history")
    max_characters: Annotated[int, Field(ge=1, json_schema_extra={"maximum": BUDGET})] | None = (
        Field(default=None, description=f"at most the server's budget ({BUDGET:,} by default)")
    )


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


@router.post("/v1/contexts", response_model=Context, **access("read"))
async def assemble_context(
    body: ContextRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> Context:
    assembly, watermark = await context(
        parts.pool,
        grant.project_id,
        body.data_subject_id,
        body.max_characters,
        parts.settings.recall_budget,
    )
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
        watermark=ContextWatermark(**watermark),
        characters=assembly.characters,
        truncated=assembly.truncated,
    )
