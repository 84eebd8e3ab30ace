"""`POST /v1/messages/get`: a bounded byte window of one stored message, by chunk id."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends
from pydantic import ConfigDict, Field

from satchel.memory.api.bodies import Answer, Body, Uuid
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.service.messages import message_window
from satchel.memory.store.messages import MAX_MESSAGE_BYTES

router = APIRouter(route_class=StrictRoute)

MAX_WINDOW_BYTES = 4096
MIN_WINDOW_BYTES = 4  # one whole UTF-8 character always fits
DIGEST = "^[0-9a-f]{64}$"


class MessageRequest(Body):
    """A window of one message; past byte 0 the first window's digest is required."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"byte_start": {"minimum": 1}}, "required": ["byte_start"]},
            "then": {
                "required": ["expected_digest"],
                "properties": {"expected_digest": {"type": "string"}},
            },
        }
    )
    refusal: ClassVar[str] = "invalid_message_window"

    chunk_id: Annotated[str, Uuid(nil=False)] = Field(description="from a passage")
    byte_start: Annotated[int, Field(ge=0, le=MAX_MESSAGE_BYTES)] | None = Field(
        default=None, description="where the window starts; default 0"
    )
    byte_limit: Annotated[int, Field(ge=MIN_WINDOW_BYTES, le=MAX_WINDOW_BYTES)] | None = Field(
        default=None, description=f"the window's size; default {MAX_WINDOW_BYTES}"
    )
    expected_digest: (
        Annotated[str, Field(pattern="^(?:[0-9a-f]{64})?$", json_schema_extra={"pattern": DIGEST})]
        | None
    ) = Field(
        default=None,
        description="the first window's content_digest (64 lowercase hex); required past byte 0;"
        " empty counts as absent",
    )


class MessageWindow(Answer):
    chunk_id: str
    source_id: str
    ordinal: int
    role: str
    occurred_at: datetime
    content_digest: str
    message_bytes: int
    byte_start: int
    byte_end: int
    text: str
    complete: bool
    next_byte_start: int | None = None


@router.post(
    "/v1/messages/get",
    response_model=MessageWindow,
    response_model_exclude_unset=True,
    **access("read"),
)
async def get_message(
    body: MessageRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> MessageWindow:
    window = await message_window(
        parts.pool,
        grant.project_id,
        uuid.UUID(body.chunk_id),
        body.byte_start or 0,
        MAX_WINDOW_BYTES if body.byte_limit is None else body.byte_limit,
        body.expected_digest or None,
    )
    answer = MessageWindow(
        chunk_id=str(window.chunk_id),
        source_id=str(window.source_id),
        ordinal=window.ordinal,
        role=window.role,
        occurred_at=window.occurred_at.astimezone(UTC),
        content_digest=window.content_digest,
        message_bytes=window.message_bytes,
        byte_start=window.byte_start,
        byte_end=window.byte_end,
        text=window.text,
        complete=window.byte_start == 0 and window.byte_end == window.message_bytes,
    )
    if window.byte_end < window.message_bytes:
        answer.next_byte_start = window.byte_end
    return answer
