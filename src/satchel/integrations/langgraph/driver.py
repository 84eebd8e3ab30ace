"""The conformance driver of the LangGraph middleware: `python -m <this module>`.

Each instruction runs a real `create_agent` agent with an in-memory checkpointer, a real tool and
a scripted chat model that records what it was handed. The thread id is the instruction's case;
the turn's history is loaded into the thread's state before the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from satchel.integrations.driver import (
    DriverMessage,
    Instruction,
    ModelFailure,
    RecordingClient,
    Report,
    main,
    turn_outcome,
)
from satchel.integrations.driver import ToolCall as CaseToolCall
from satchel.integrations.langgraph.middleware import (
    CompactTrigger,
    MemoryMiddleware,
    is_untrusted,
)

COMPACT_TRIGGER: CompactTrigger = ("messages", 2)
"""What `compact` arms: any history before the person's message trips it."""

TOOL_NAME = "carry_out"

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


class ScriptedChatModel(BaseChatModel):
    """Answers call after call from `replies` (or fails), keeping every message list it was sent."""

    replies: list[AIMessage]
    fail: bool = False
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        if self.fail:
            raise ModelFailure()
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _tool(calls: Sequence[CaseToolCall]) -> BaseTool:
    results = {c.call: c.result for c in calls}

    @tool(TOOL_NAME)
    def carry_out(call: str) -> str:
        """Carry out one action, written as a call, and answer its result."""
        return results[call]

    return carry_out


def _replies(instruction: Instruction) -> list[AIMessage]:
    turn = instruction.turn
    replies: list[AIMessage] = []
    if turn.tool_calls:
        asks = [
            {"name": TOOL_NAME, "args": {"call": c.call}, "id": f"call_{n}", "type": "tool_call"}
            for n, c in enumerate(turn.tool_calls)
        ]
        replies.append(AIMessage(content="", tool_calls=asks))
    replies.append(AIMessage(content=turn.assistant))
    return replies


def _held(message: DriverMessage, *, synthetic: bool) -> BaseMessage:
    """A message as the thread's state holds it; `synthetic` marks what LangChain wrote."""
    extra = {"lc_source": "summarization"} if synthetic else {}
    if message.role == "assistant":
        return AIMessage(content=message.content, additional_kwargs=extra)
    if message.role == "system":
        return SystemMessage(content=message.content, additional_kwargs=extra)
    return HumanMessage(content=message.content, additional_kwargs=extra)


def _reported(message: BaseMessage) -> DriverMessage:
    return DriverMessage(
        role=_ROLES.get(message.type, message.type),
        content=message.text,
        untrusted=is_untrusted(message),
    )


async def run_turn(instruction: Instruction) -> Report:
    """Run one turn through a real agent and report what the model saw and what was stored."""
    turn = instruction.turn
    model = ScriptedChatModel(replies=_replies(instruction), fail=turn.model_failure)
    client = RecordingClient(instruction.api, instruction.token)
    middleware = MemoryMiddleware(
        async_client=client,
        data_subject_id=instruction.data_subject_id,
        compact_trigger=COMPACT_TRIGGER if turn.compact else None,
    )
    agent = create_agent(
        model,
        tools=[_tool(turn.tool_calls)],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": instruction.case}}
    held = [_held(m, synthetic=False) for m in turn.history]
    held += [_held(m, synthetic=True) for m in turn.synthetic]
    report = Report()
    async with client:
        with turn_outcome(report, "langgraph"):
            if held:
                await agent.aupdate_state(config, {"messages": held})
            await agent.ainvoke({"messages": [HumanMessage(content=turn.user)]}, config)
    if model.calls:
        report.model_messages = [_reported(m) for m in model.calls[0]]
    report.observed = client.observed
    return report


if __name__ == "__main__":
    main(run_turn)
