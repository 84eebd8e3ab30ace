"""The messages one model request is handed: the history the run was given, compacted into the
deployment's context when due, and the recalled memory placed before the person's prompt.

Nothing here changes a message it was given; a rewritten request is a new `ModelRequest`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    SystemPromptPart,
    UserPromptPart,
)

from satchel.integrations.pydantic_ai.messages import is_untrusted, memory_prompt


def split_run(
    messages: Sequence[ModelMessage], run_id: str | None
) -> tuple[list[ModelMessage], list[ModelMessage]]:
    """The history the run was given, and what the run itself added (from its first request on)."""
    start = next((i for i, m in enumerate(messages) if m.run_id == run_id), len(messages))
    return list(messages[:start]), list(messages[start:])


def compacted(history: Sequence[ModelMessage], context: str) -> list[ModelMessage]:
    """The history replaced by the context message; system prompts the history opened with stay."""
    kept: list[ModelRequestPart] = [
        part
        for message in history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, SystemPromptPart)
    ]
    return [ModelRequest(parts=[*kept, memory_prompt(context)])]


def with_recall(current: Sequence[ModelMessage], recall: str) -> list[ModelMessage]:
    """The run's messages with the memory message just before the person's prompt."""
    messages = list(current)
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        parts = list(message.parts)
        at = next((i for i, p in enumerate(parts) if _is_prompt(p)), None)
        if at is not None:
            parts.insert(at, memory_prompt(recall))
            messages[index] = replace(message, parts=parts)
            return messages
    return [ModelRequest(parts=[memory_prompt(recall)]), *messages]


def request_messages(
    messages: Sequence[ModelMessage],
    run_id: str | None,
    *,
    context: str | None,
    recall: str | None,
) -> list[ModelMessage]:
    """What the model is handed for one request of the run `run_id`."""
    history, current = split_run(messages, run_id)
    if context is not None and current:
        history = compacted(history, context)
    if recall is not None:
        current = with_recall(current, recall)
    return history + current


def _is_prompt(part: ModelRequestPart) -> bool:
    return isinstance(part, UserPromptPart) and not is_untrusted(part)
