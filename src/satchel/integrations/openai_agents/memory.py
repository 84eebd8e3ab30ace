"""Memory around OpenAI Agents SDK runs: recall in (request only), turns out (after success).

`SessionMemory.run` is the whole turn: compaction when due, recall for the person's message, a
`call_model_input_filter` that puts the memory message just before that message in every model
request of the run (never in the session), the run itself, then the observation of the person's
message and the final output. `prepare` and `observe` are the two halves, for a streamed run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agents import (
    Agent,
    ItemHelpers,
    MessageOutputItem,
    RunConfig,
    Runner,
    RunResult,
    TResponseInputItem,
)
from agents.memory import Session
from agents.result import RunResultBase
from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData

from satchel.integrations.core import AgentMemory, ErrorHook
from satchel.integrations.openai_agents.compaction import CompactionTrigger, compact_if_due
from satchel.integrations.openai_agents.items import (
    is_untrusted,
    item_role,
    item_text,
    memory_item,
)
from satchel.memory.client import AsyncMemoryClient


class SessionMemory:
    """One subject's memory around the runs of one session; the session id is the run id."""

    def __init__(
        self,
        client: AsyncMemoryClient,
        session: Session,
        *,
        data_subject_id: str,
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        context_characters: int | None = None,
        should_trigger_compaction: CompactionTrigger | None = None,
    ) -> None:
        self.session = session
        self.should_trigger_compaction = should_trigger_compaction
        self.memory = AgentMemory(
            client,
            data_subject_id=data_subject_id,
            run_id=session.session_id,
            on_error=on_error,
            recall_controls=recall_controls,
            context_characters=context_characters,
        )

    async def prepare(self, user: str, run_config: RunConfig | None = None) -> RunConfig:
        """Compact when due and recall for `user`; the run config that injects what was found."""
        await compact_if_due(self.session, self.memory, self.should_trigger_compaction)
        config = run_config or RunConfig()
        recalled = await self.memory.recall_message(user)
        if recalled is None:
            return config
        return replace(
            config,
            call_model_input_filter=memory_filter(user, recalled, config.call_model_input_filter),
        )

    async def observe(self, user: str, result: RunResultBase) -> None:
        """Store the person's message and the run's final output; raises `MemoryStoreFailed`."""
        await self.memory.observe(user, final_text(result))

    async def run(
        self,
        agent: Agent[Any],
        user: str,
        *,
        run_config: RunConfig | None = None,
        **options: Any,
    ) -> RunResult:
        """Run `agent` on the person's message in this session, with memory in and the turn out."""
        config = await self.prepare(user, run_config)
        result = await Runner.run(agent, user, session=self.session, run_config=config, **options)
        await self.observe(user, result)
        return result


def memory_filter(
    user: str, text: str, inner: CallModelInputFilter | None = None
) -> CallModelInputFilter:
    """A model-input filter placing the memory message before the person's message.

    An application's own filter, when given, runs first; the memory message is added to what it
    returns, so it reaches the model and never the session.
    """

    async def inject(data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        if inner is not None:
            filtered = inner(data)
            model_data = filtered if isinstance(filtered, ModelInputData) else await filtered
        items = list(model_data.input)
        items.insert(_person_index(items, user), memory_item(text))
        return ModelInputData(input=items, instructions=model_data.instructions)

    return inject


def final_text(result: RunResultBase) -> str:
    """The run's final output as text: the output itself, or its last message's text."""
    if isinstance(result.final_output, str):
        return result.final_output
    messages = [item for item in result.new_items if isinstance(item, MessageOutputItem)]
    return ItemHelpers.text_message_output(messages[-1]) if messages else ""


def _person_index(items: list[TResponseInputItem], user: str) -> int:
    """Where the person's message is (its last occurrence), or 0 when it is not there."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item_role(item) == "user" and not is_untrusted(item) and item_text(item) == user:
            return index
    return 0
