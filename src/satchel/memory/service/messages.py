"""Reading a stored message by windows: past its first window the caller names the digest it
read, so a changed source is noticed."""

from __future__ import annotations

import uuid

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Conflict, Failed, Invalid, NotFound
from satchel.memory.store.messages import (
    MessageChanged,
    MessageUnavailable,
    Window,
    WindowInvalid,
    read_window,
)


async def message_window(
    pool: AsyncConnectionPool,
    project_id: int,
    chunk_id: uuid.UUID,
    start: int,
    limit: int,
    digest: str | None,
) -> Window:
    """Up to `limit` bytes of the message holding `chunk_id`, from byte `start`."""
    if start > 0 and digest is None:
        raise Invalid(
            "expected_digest: is required past byte 0 (the content_digest of the first window)",
            "invalid_message_window",
        )
    try:
        async with pool.connection() as conn:
            window = await read_window(conn, project_id, chunk_id, start, limit, digest)
    except WindowInvalid:
        raise Invalid(
            "byte_start: is past the message's end or inside a UTF-8 character",
            "invalid_message_window",
        ) from None
    except MessageChanged:
        raise Conflict(
            "the source changed; retrieve a new initial window", "source_changed"
        ) from None
    except MessageUnavailable:
        raise Failed("the source message could not be read") from None
    if window is None:
        raise NotFound("message not found")
    return window
