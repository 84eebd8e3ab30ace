"""PydanticAI capability: memory in before each model request, the turn out after a successful run.

The history processor (`process_history`) recalls once per run and hands the model the memory
message before the person's prompt, and, when compaction is due, the deployment's context in
place of the history the run was given. It is applied to the request only: PydanticAI's own
`ProcessHistory` writes a processor's answer back into the run's history, which would store the
memory message with the conversation. The observer (`after_run`) stores the person's prompt and
the final output under the turn key of the run's `conversation_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

import pydantic_core
from pydantic_ai import DeferredToolRequests, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult

from satchel.integrations.core import AgentMemory, ErrorHook
from satchel.integrations.pydantic_ai.history import request_messages, split_run
from satchel.integrations.pydantic_ai.messages import prompt_text
from satchel.memory.client import AsyncMemoryClient


@dataclass
class PydanticAIMemory(AbstractCapability[Any]):
    """One subject's memory around each run of an agent; give it to `Agent(capabilities=...)` or
    to one run's `capabilities=`.

    `compact_after_messages` arms compaction (off when None): a run given at least that many
    messages of history hands the model the deployment's context in their place, unless the
    context holds nothing yet.
    """

    client: AsyncMemoryClient
    data_subject_id: str
    _: KW_ONLY
    on_error: ErrorHook | None = None
    recall_controls: Mapping[str, Any] | None = None
    context_characters: int | None = None
    compact_after_messages: int | None = None
    _turn: AgentMemory | None = field(default=None, init=False, repr=False)
    _prepared: bool = field(default=False, init=False, repr=False)
    _recall: str | None = field(default=None, init=False, repr=False)
    _context: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.compact_after_messages is not None and self.compact_after_messages < 1:
            raise ValueError("compact_after_messages must be at least 1, or None to turn it off")
        self._memory("")

    def _memory(self, conversation_id: str) -> AgentMemory:
        return AgentMemory(
            self.client,
            data_subject_id=self.data_subject_id,
            run_id=conversation_id,
            on_error=self.on_error,
            recall_controls=self.recall_controls,
            context_characters=self.context_characters,
        )

    def _bound(self, ctx: RunContext[Any]) -> AgentMemory:
        return self._turn or self._memory(ctx.conversation_id or "")

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        """A fresh copy per run, its turn key bound to the run's conversation id."""
        run = replace(self)
        run._turn = self._memory(ctx.conversation_id or "")
        return run

    def compaction_due(self, history: list[ModelMessage]) -> bool:
        """Whether the history the run was given trips the compaction trigger."""
        limit = self.compact_after_messages
        return limit is not None and len(history) >= limit

    async def process_history(
        self, ctx: RunContext[Any], messages: list[ModelMessage]
    ) -> list[ModelMessage]:
        """The messages to hand the model; recall and context are fetched on the first call."""
        turn = self._bound(ctx)
        if not self._prepared:
            self._prepared = True
            history, _ = split_run(messages, ctx.run_id)
            if self.compaction_due(history):
                self._context = await turn.context_message()
            question = prompt_text(ctx.prompt)
            self._recall = await turn.recall_message(question) if question else None
        return request_messages(messages, ctx.run_id, context=self._context, recall=self._recall)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        request_context.messages = await self.process_history(ctx, list(request_context.messages))
        return request_context

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """Store the turn; a store failure reaches the error hook and is raised to the caller."""
        user = prompt_text(ctx.prompt)
        if user and not isinstance(result.output, DeferredToolRequests):
            await self._bound(ctx).observe(user, output_text(result.output))
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None


def output_text(output: object) -> str:
    """A run's final output as text: a string as is, structured output as its JSON."""
    if isinstance(output, str):
        return output
    return pydantic_core.to_json(output).decode()
