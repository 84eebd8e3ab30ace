"""One subject's memory around an agent turn, the policy every framework integration shares.

Recall and context failures are reported to the error hook and never raised: the agent runs
without memory. A context with no segments and no turns (nothing formed yet) is no context: the
history stays. A store failure is reported to the hook *and* raised as `MemoryStoreFailed`,
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


class _Policy[Client]:
    """What the async and the sync policy share: the options and every step that does no I/O."""

    def __init__(
        self,
        client: Client,
        *,
        data_subject_id: str,
        run_id: str = "",
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        context_characters: int | None = None,
    ) -> None:
        if not data_subject_id or not data_subject_id.strip():
            raise ValueError("data_subject_id is required: memory is one person's")
        self.client: Client = client
        self.data_subject_id = data_subject_id
        self.run_id = run_id
        self.on_error = on_error or _ignore
        self.recall_controls = dict(recall_controls or {})
        self.context_characters = context_characters

    def key(self, messages: list[dict[str, Any]]) -> str:
        return turn_key(self.data_subject_id, self.run_id, messages)

    def recalled(self, watermark: Mapping[str, Any], recall: Mapping[str, Any]) -> str | None:
        return None if recall_is_empty(recall) else render_memory_message(watermark, recall)

    def context_text(self, context: Mapping[str, Any]) -> str | None:
        """The context as one memory message, or None when it holds no segments and no turns."""
        if not (context.get("segments") or context.get("turns")):
            return None
        return render_context_message(context)

    def observation(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The observe request for `messages`: their turn key, the subject, the time now."""
        return {
            "idempotency_key": self.key(messages),
            "messages": messages,
            "data_subject_id": self.data_subject_id,
            "occurred_at": _now(),
        }

    def store_failed(self, error: MemoryServiceError) -> MemoryStoreFailed:
        """Report a refused observation to the hook; the error to raise for it."""
        self.on_error("observe", error)
        return MemoryStoreFailed(error)


class AgentMemory(_Policy[AsyncMemoryClient]):
    """The shared policy over `AsyncMemoryClient`; one instance per subject and run."""

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
        """The subject's context as one memory message, or None when it is empty or failed."""
        try:
            context = await self.client.context(
                data_subject_id=self.data_subject_id, max_characters=self.context_characters
            )
        except MemoryServiceError as error:
            self.on_error("context", error)
            return None
        return self.context_text(context)

    async def observe_messages(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Store `messages` under their turn key; a failure is reported and raised."""
        try:
            return await self.client.observe(**self.observation(messages))
        except MemoryServiceError as error:
            raise self.store_failed(error) from error

    async def observe(self, user: str, assistant: str) -> dict[str, Any]:
        """Store the person's message and the final reply; a failure is reported and raised."""
        return await self.observe_messages(observed_messages(user, assistant))


class SyncAgentMemory(_Policy[MemoryClient]):
    """The shared policy over the synchronous `MemoryClient`."""

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
        """The subject's context as one memory message, or None when it is empty or failed."""
        try:
            context = self.client.context(
                data_subject_id=self.data_subject_id, max_characters=self.context_characters
            )
        except MemoryServiceError as error:
            self.on_error("context", error)
            return None
        return self.context_text(context)

    def observe_messages(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Store `messages` under their turn key; a failure is reported and raised."""
        try:
            return self.client.observe(**self.observation(messages))
        except MemoryServiceError as error:
            raise self.store_failed(error) from error

    def observe(self, user: str, assistant: str) -> dict[str, Any]:
        """Store the person's message and the final reply; a failure is reported and raised."""
        return self.observe_messages(observed_messages(user, assistant))
