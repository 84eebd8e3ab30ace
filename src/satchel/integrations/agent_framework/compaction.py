"""The compaction provider: the deployment's context in place of a long session history.

Off by default. With `max_messages` set, a run whose loaded history holds more messages than that
asks the deployment for the subject's context and hands the model that one untrusted user message
in place of the history; the person's current message stays. After a successful run the history
kept in session state is replaced the same way, so the next run starts from the context. A context
failure goes to `on_error` and the history stays as it was; so does an empty context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_framework import (
    AgentSession,
    InMemoryHistoryProvider,
    Message,
    SessionContext,
    SupportsAgentRun,
)

from satchel.integrations.agent_framework.provider import SubjectProvider, memory_message
from satchel.integrations.core import ErrorHook
from satchel.memory.client import AsyncMemoryClient

_PENDING = "pending_replacement"
"""The provider-state key carrying a compaction from `before_run` to `after_run`."""


def _held_messages(session: AgentSession, history_source_id: str) -> list[Any] | None:
    """The history list a session-state history provider keeps, when it keeps one."""
    held = session.state.get(history_source_id)
    messages = held.get("messages") if isinstance(held, dict) else None
    return messages if isinstance(messages, list) else None


class ContextCompactionProvider(SubjectProvider):
    """Compaction by the deployment's context, due when the history exceeds `max_messages`.

    List it after the history provider whose `source_id` is `history_source_id` and before the
    `MemoryProvider`. The stored history is replaced only where it lives in session state (as
    `InMemoryHistoryProvider` keeps it); with other history providers only the model's view is
    compacted.
    """

    DEFAULT_SOURCE_ID = "taisce_compaction"
    after_run_once_per_turn = True

    def __init__(
        self,
        client: AsyncMemoryClient,
        *,
        data_subject_id: str,
        max_messages: int | None = None,
        history_source_id: str = InMemoryHistoryProvider.DEFAULT_SOURCE_ID,
        on_error: ErrorHook | None = None,
        context_characters: int | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
    ) -> None:
        if max_messages is not None and max_messages <= 0:
            raise ValueError("max_messages must be greater than 0, or None to leave compaction off")
        super().__init__(
            source_id,
            client,
            data_subject_id=data_subject_id,
            on_error=on_error,
            context_characters=context_characters,
        )
        self.max_messages = max_messages
        self.history_source_id = history_source_id

    def due(self, history: Sequence[Message]) -> bool:
        """Whether the loaded history trips the trigger."""
        return self.max_messages is not None and len(history) > self.max_messages

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Replace the loaded history with the subject's context when compaction is due."""
        state.pop(_PENDING, None)
        if self.max_messages is None:
            return
        self._check_order(agent)
        history = context.context_messages.get(self.history_source_id, [])
        if not self.due(history):
            return
        text = await self.memory(session).context_message()
        if text is None:
            return
        context.context_messages[self.history_source_id] = [memory_message(text)]
        held = _held_messages(session, self.history_source_id)
        state[_PENDING] = {"text": text, "held": len(held) if held else 0}

    async def after_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """After a successful run, the held history the model did not see becomes the context."""
        pending = state.pop(_PENDING, None)
        held = _held_messages(session, self.history_source_id)
        if not isinstance(pending, dict) or held is None:
            return
        held[: pending["held"]] = [memory_message(pending["text"])]

    def _check_order(self, agent: SupportsAgentRun) -> None:
        providers = getattr(agent, "context_providers", None)
        if not isinstance(providers, list) or self not in providers:
            return
        earlier = providers[: providers.index(self)]
        if not any(p.source_id == self.history_source_id for p in earlier):
            raise ValueError(
                f"compaction needs the history provider {self.history_source_id!r} listed before "
                f"{self.source_id!r} in context_providers (it replaces the history that one loads)"
            )
