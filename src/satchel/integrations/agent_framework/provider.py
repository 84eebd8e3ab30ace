"""The memory context provider: recall in before the model, the turn observed after it.

Before each run the person's message is recalled for and, when recall returned something, one
untrusted user message is added before it. After a successful run the person's message and the
final reply are observed under the turn key, with the session id as the run id.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from agent_framework import (
    AgentSession,
    ContextProvider,
    Message,
    SessionContext,
    SupportsAgentRun,
)

from satchel.integrations.core import AgentMemory, ErrorHook
from satchel.memory.client import AsyncMemoryClient
from satchel.memory.message import UNTRUSTED_KEY, is_memory_text


def memory_message(text: str) -> Message:
    """A rendered memory text as the one user message the model sees, marked untrusted."""
    return Message("user", [text], additional_properties={UNTRUSTED_KEY: True})


def is_memory_message(message: Message) -> bool:
    """Whether a message is one an integration injected rather than one a person wrote."""
    return bool(message.additional_properties.get(UNTRUSTED_KEY)) or is_memory_text(message.text)


def person_text(messages: Sequence[Message]) -> str:
    """What the person said in this run: the text of its user messages, memory left out."""
    texts = [m.text for m in messages if m.role == "user" and not is_memory_message(m)]
    return "\n".join(text for text in texts if text)


def final_reply(messages: Sequence[Message]) -> str:
    """The reply the run ended with: the last message's text when the assistant wrote it."""
    if not messages or messages[-1].role != "assistant":
        return ""
    return messages[-1].text


class SubjectProvider(ContextProvider):
    """A provider working on one subject's memory through the shared turn policy."""

    def __init__(
        self,
        source_id: str,
        client: AsyncMemoryClient,
        *,
        data_subject_id: str,
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        context_characters: int | None = None,
    ) -> None:
        super().__init__(source_id)
        self.policy = AgentMemory(
            client,
            data_subject_id=data_subject_id,
            on_error=on_error,
            recall_controls=recall_controls,
            context_characters=context_characters,
        )

    def memory(self, session: AgentSession) -> AgentMemory:
        """The policy for this session: its id is the run id the turn key is derived from."""
        memory = copy.copy(self.policy)
        memory.run_id = session.session_id
        return memory


class MemoryProvider(SubjectProvider):
    """Recall in as one untrusted user message; the person's message and final reply out.

    Inside an agent loop the turn is observed once, when the loop ends. A recall failure goes to
    `on_error` and the run continues without memory. A store failure goes
    to `on_error` and is raised from `agent.run` as `MemoryStoreFailed`; history providers listed
    before this one have then not stored the turn, so a retry is the same turn and stored once.
    """

    DEFAULT_SOURCE_ID = "taisce_memory"
    after_run_once_per_turn = True

    def __init__(
        self,
        client: AsyncMemoryClient,
        *,
        data_subject_id: str,
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
    ) -> None:
        super().__init__(
            source_id,
            client,
            data_subject_id=data_subject_id,
            on_error=on_error,
            recall_controls=recall_controls,
        )

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Add the memory message for the person's message when recall returned something."""
        question = person_text(context.input_messages)
        if not question:
            return
        text = await self.memory(session).recall_message(question)
        if text is not None:
            context.extend_messages(self, [memory_message(text)])

    async def after_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Observe the person's message and the final reply; tool traffic stays out."""
        response = context.response
        user = person_text(context.input_messages)
        if response is None or not user:
            return
        await self.memory(session).observe(user, final_reply(response.messages))
