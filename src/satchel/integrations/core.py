"""One subject's memory around an agent turn, the policy every framework integration shares.

Recall and context failures are reported to the error hook and never raised: the agent runs
without memory. A store failure is reported to the hook *and* raised as `MemoryStoreFailed`,
because a turn lost silently is invisible until someone asks for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from satchel.memory.client import AsyncMemoryClient, MemoryClient, MemoryServiceError
from satchel.memory.message import (
    recall_is_empty,
    render_context_message,
    render_memory_message,
    turn_key,
)

ErrorHook = Callable[[str, Exception], None]
"""Called with the operation (`recall`, `context` or `observe`) and the error it met."""


class MemoryStoreFailed(RuntimeError):
    """The turn was answered but not stored in memory; `cause` is the deployment's refusal."""

    def __init__(self, cause: MemoryServiceError) -> None:
        super().__init__(f"the turn was not stored in memory: {cause}")
        self.cause = cause


def observed_messages(user: str, assistant: str) -> list[dict[str, Any]]:
    """The person's message and the final reply, each its own group; nothing else is observed."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": user, "group_ordinal": 0}]
    if assistant:
        messages.append({"role": "assistant", "content": assistant, "group_ordinal": 1})
    return messages


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _ignore(operation: str, error: Exception) -> None:
    """The default hook: the failure is already handled by the policy above."""


class _Policy:
    def __init__(
        self,
        *,
        data_subject_id: str,
        run_id: str,
        on_error: ErrorHook | None,
        recall_controls: Mapping[str, Any] | None,
        context_characters: int | None,
    ) -> None:
        if not data_subject_id or not data_subject_id.strip():
            raise ValueError("data_subject_id is required: memory is one person's")
        self.data_subject_id = data_subject_id
        self.run_id = run_id
        self.on_error = on_error or _ignore
        self.recall_controls = dict(recall_controls or {})
        self.context_characters = context_characters

    def key(self, messages: list[dict[str, Any]]) -> str:
        return turn_key(self.data_subject_id, self.run_id, messages)

    def recalled(self, watermark: Mapping[str, Any], recall: Mapping[str, Any]) -> str | None:
        return None if recall_is_empty(recall) else render_memory_message(watermark, recall)


class AgentMemory(_Policy):
    """The shared policy over `AsyncMemoryClient`; one instance per subject and run."""

    def __init__(
        self,
        client: AsyncMemoryClient,
        *,
        data_subject_id: str,
        run_id: str = "",
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        context_characters: int | None = None,
    ) -> None:
        super().__init__(
            data_subject_id=data_subject_id,
            run_id=run_id,
            on_error=on_error,
            recall_controls=recall_controls,
            context_characters=context_characters,
        )
        self.client = client

    async def recall_message(self, question: str) -> str | None:
        """The memory message for `question`, or None when recall found nothing or failed."""
        try:
            recall = await self.client.recall(
                question=question, data_subject_id=self.data_subject_id, **self.recall_controls
            )
            if recall_is_empty(recall):
                return None
            watermark = (await self.client.freshness()).as_watermark()
        except MemoryServiceError as error:
            self.on_error("recall", error)
            return None
        return self.recalled(watermark, recall)

    async def context_message(self) -> str | None:
        """The subject's context as one memory message, or None when it could not be fetched."""
        try:
            context = await self.client.context(
                data_subject_id=self.data_subject_id, max_characters=self.context_characters
            )
        except MemoryServiceError as error:
            self.on_error("context", error)
            return None
        return render_context_message(context)

    async def observe(self, user: str, assistant: str) -> dict[str, Any]:
        """Store the turn under its turn key; a failure is reported and raised."""
        messages = observed_messages(user, assistant)
        try:
            return await self.client.observe(
                idempotency_key=self.key(messages),
                messages=messages,
                data_subject_id=self.data_subject_id,
                occurred_at=_now(),
            )
        except MemoryServiceError as error:
            self.on_error("observe", error)
            raise MemoryStoreFailed(error) from error


class SyncAgentMemory(_Policy):
    """The shared policy over the synchronous `MemoryClient`."""

    def __init__(
        self,
        client: MemoryClient,
        *,
        data_subject_id: str,
        run_id: str = "",
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        context_characters: int | None = None,
    ) -> None:
        super().__init__(
            data_subject_id=data_subject_id,
            run_id=run_id,
            on_error=on_error,
            recall_controls=recall_controls,
            context_characters=context_characters,
        )
        self.client = client

    def recall_message(self, question: str) -> str | None:
        """The memory message for `question`, or None when recall found nothing or failed."""
        try:
            recall = self.client.recall(
                question=question, data_subject_id=self.data_subject_id, **self.recall_controls
            )
            if recall_is_empty(recall):
                return None
            watermark = self.client.freshness().as_watermark()
        except MemoryServiceError as error:
            self.on_error("recall", error)
            return None
        return self.recalled(watermark, recall)

    def context_message(self) -> str | None:
        """The subject's context as one memory message, or None when it could not be fetched."""
        try:
            context = self.client.context(
                data_subject_id=self.data_subject_id, max_characters=self.context_characters
            )
        except MemoryServiceError as error:
            self.on_error("context", error)
            return None
        return render_context_message(context)

    def observe(self, user: str, assistant: str) -> dict[str, Any]:
        """Store the turn under its turn key; a failure is reported and raised."""
        messages = observed_messages(user, assistant)
        try:
            return self.client.observe(
                idempotency_key=self.key(messages),
                messages=messages,
                data_subject_id=self.data_subject_id,
                occurred_at=_now(),
            )
        except MemoryServiceError as error:
            self.on_error("observe", error)
            raise MemoryStoreFailed(error) from error
