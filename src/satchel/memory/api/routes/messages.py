"""`POST /v1/messages/get`: a bounded byte window of one stored message, by chunk id."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from satchel.memory.api.bodies import Answer, Body
from satchel.memory.api.errors import ApiError, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store.messages import (
    MAX_MESSAGE_BYTES,
    MessageChanged,
    MessageUnavailable,
    WindowInvalid,
    read_window,
)

router = APIRouter(route_class=StrictRoute)

MAX_WINDOW_BYTES = 4096
MIN_WINDOW_BYTES = 4  # one whole UTF-8 character always fits
DIGEST = re.compile(r"[0-9a-f]{64}")


class MessageRequest(Body):
    chunk_id: str | None = None
    byte_start: int | None = None
    byte_limit: int | None = None
    expected_digest: str | None = None


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


def invalid_window() -> ApiError:
    return ApiError(
        400,
        "invalid_message_window",
        "a valid message reference and bounded UTF-8 byte window are required",
    )


def chunk_of(text: str | None) -> uuid.UUID:
    try:
        chunk = uuid.UUID(text or "")
    except ValueError:
        raise invalid_window() from None
    if chunk.int == 0:
        raise invalid_window()
    return chunk


@router.post(
    "/v1/messages/get",
    response_model=MessageWindow,
    response_model_exclude_unset=True,
    **access("read"),
)
async def get_message(
    body: MessageRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> MessageWindow:
    chunk = chunk_of(body.chunk_id)
    start = body.byte_start or 0
    limit = MAX_WINDOW_BYTES if body.byte_limit is None else body.byte_limit
    digest = body.expected_digest or None
    if not 0 <= start <= MAX_MESSAGE_BYTES or not MIN_WINDOW_BYTES <= limit <= MAX_WINDOW_BYTES:
        raise invalid_window()
    if (start > 0 and digest is None) or (digest is not None and not DIGEST.fullmatch(digest)):
        raise invalid_window()
    try:
        async with request.app.state.pool.connection() as conn:
            window = await read_window(conn, grant.project_id, chunk, start, limit, digest)
    except WindowInvalid:
        raise invalid_window() from None
    except MessageChanged:
        raise ApiError(
            409, "source_changed", "the source changed; retrieve a new initial window"
        ) from None
    except MessageUnavailable:
        raise ApiError(500, "internal", "the source message could not be read") from None
    if window is None:
        raise not_found("message not found")
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
