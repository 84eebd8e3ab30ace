"""Bounded results: a long tool result shown as its head, a note naming exactly which characters
are left out and how to read them, and its tail. Images stay with their result."""

from typing import Any

from satchel.sift.messages import ChatMessage, content_text, image_parts

NOTE_ROOM = 240
"""Characters set aside for the middle note inside the limit."""


def bounded_text(text: str, limit: int, artifact_id: str) -> str:
    """`text` cut to at most `limit` characters around a note; unchanged when it already fits."""
    if len(text) <= limit:
        return text
    room = max(limit - NOTE_ROOM, 2)
    head = room * 3 // 5
    tail = room - head
    missing = len(text) - head - tail
    note = (
        f"\n[… characters {head} to {head + missing} of {len(text)} are left out here; "
        f'artifact_read(id="{artifact_id}", offset={head}) reads them, a page at a time …]\n'
    )
    return text[:head] + note + text[len(text) - tail :]


def bounded_result(message: ChatMessage, limit: int, artifact_id: str) -> ChatMessage:
    """A copy of a tool result whose text is bounded; its image parts are kept after the text."""
    content = message.get("content")
    text = content_text(content)
    shown = bounded_text(text, limit, artifact_id)
    bounded: ChatMessage = dict(message)
    if isinstance(content, str):
        bounded["content"] = shown
    else:
        parts: list[Any] = [{"type": "text", "text": shown}]
        parts.extend(image_parts(content))
        bounded["content"] = parts
    return bounded
