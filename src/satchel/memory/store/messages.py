"""Stored messages by chunk id: a bounded UTF-8 byte window of one message, bound to its digest."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

from satchel.memory.store.database import Conn

MAX_MESSAGE_BYTES = 65_536
ROLES = ("user", "assistant", "system", "tool")  # who may say a message (see migration 0001)


class WindowInvalid(Exception):
    """The window does not fit the message (past its end, or not on a character boundary)."""


class MessageChanged(Exception):
    """The message's content no longer has the digest the caller holds."""


class MessageUnavailable(Exception):
    """The message is larger than the storage contract allows, so no window is served."""


@dataclass(frozen=True, slots=True)
class Window:
    """Bytes `byte_start..byte_end` of one message, decoded, with the message's identity."""

    chunk_id: uuid.UUID
    source_id: uuid.UUID
    ordinal: int
    role: str
    occurred_at: datetime
    content_digest: str
    message_bytes: int
    byte_start: int
    byte_end: int
    text: str


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def cut(content: bytes, start: int, limit: int) -> bytes:
    """`limit` bytes from `start`, less any partial character at the end."""
    if start > len(content) or (start < len(content) and _is_continuation(content[start])):
        raise WindowInvalid
    window = content[start : start + limit]
    end = len(window)
    while end > 0:
        try:
            window[:end].decode("utf-8")
        except UnicodeDecodeError:
            end -= 1
            continue
        break
    if end == 0 and start < len(content):
        raise MessageUnavailable
    return window[:end]


async def read_window(
    conn: Conn,
    project_id: int,
    chunk_id: uuid.UUID,
    start: int,
    limit: int,
    expected_digest: str | None,
) -> Window | None:
    """The window, or None when the project holds no such message."""
    cursor = await conn.execute(
        "SELECT id, observation_id, ordinal, role, occurred_at, content FROM messages"
        " WHERE id = %s AND project_id = %s",
        (chunk_id, project_id),
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    content = row[5].encode("utf-8")
    if len(content) > MAX_MESSAGE_BYTES:
        raise MessageUnavailable
    digest = hashlib.sha256(content).hexdigest()
    if expected_digest is not None and expected_digest != digest:
        raise MessageChanged
    window = cut(content, start, limit)
    return Window(
        chunk_id=row[0],
        source_id=row[1],
        ordinal=row[2],
        role=row[3],
        occurred_at=row[4],
        content_digest=digest,
        message_bytes=len(content),
        byte_start=start,
        byte_end=start + len(window),
        text=window.decode("utf-8"),
    )
