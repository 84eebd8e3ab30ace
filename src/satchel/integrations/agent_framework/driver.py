"""The conformance driver for the Agent Framework integration: `python -m` this module.

Each instruction runs one real `Agent` turn with the history provider, the compaction provider and
the memory provider, a real tool, and a scripted chat client that records what it was handed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    FunctionTool,
    InMemoryHistoryProvider,
    Message,
    tool,
)

from satchel.integrations.agent_framework.compaction import ContextCompactionProvider
from satchel.integrations.agent_framework.provider import MemoryProvider
from satchel.integrations.driver import (
    DriverMessage,
    Instruction,
    ModelFailure,
    RecordingClient,
    Report,
    Turn,
    main,
    turn_outcome,
)
from satchel.memory.message import UNTRUSTED_KEY

COMPACTION_TRIGGER = 2
"""The message-count threshold a case's `compact` arms: any history of three or more trips it."""

TOOL_NAME = "perform"


class ScriptedChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """A chat client answering from the turn: its tool calls first, then the final reply."""

    def __init__(self, turn: Turn) -> None:
        super().__init__()
        self.turn = turn
        self.requests: list[list[Message]] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **_: Any
    ) -> Awaitable[ChatResponse]:
        self.requests.append(list(messages))
        return self._answer(len(self.requests))

    async def _answer(self, call: int) -> ChatResponse:
        if self.turn.model_failure:
            raise ModelFailure()
        if call == 1 and self.turn.tool_calls:
            calls = [
                Content.from_function_call(
                    call_id=f"call_{index}", name=TOOL_NAME, arguments={"call": step.call}
                )
                for index, step in enumerate(self.turn.tool_calls)
            ]
            return ChatResponse(messages=[Message("assistant", calls)])
        return ChatResponse(messages=[Message("assistant", [self.turn.assistant])])


def turn_tool(turn: Turn) -> FunctionTool:
    """A real tool the framework executes: it answers each of the turn's calls with its result."""
    results = {step.call: step.result for step in turn.tool_calls}

    def perform(call: str) -> str:
        """Carry out one call and return what it answered."""
        return results.get(call, f"unknown call: {call}")

    made: FunctionTool = tool(perform, name=TOOL_NAME)
    return made


def _wire(message: Message) -> DriverMessage:
    return DriverMessage(
        role=message.role,
        content=message.text,
        untrusted=bool(message.additional_properties.get(UNTRUSTED_KEY)),
    )


async def run_turn(instruction: Instruction) -> Report:
    """Run one instruction's turn through a real agent and say what happened."""
    turn = instruction.turn
    model = ScriptedChatClient(turn)
    report = Report()
    memory = RecordingClient(instruction.api, instruction.token)
    async with memory:
        history = InMemoryHistoryProvider()
        agent = Agent(
            client=model,
            tools=[turn_tool(turn)],
            context_providers=[
                history,
                ContextCompactionProvider(
                    memory,
                    data_subject_id=instruction.data_subject_id,
                    max_messages=COMPACTION_TRIGGER if turn.compact else None,
                ),
                MemoryProvider(memory, data_subject_id=instruction.data_subject_id),
            ],
        )
        session = agent.create_session(session_id=instruction.case)
        held = [Message(m.role, [m.content]) for m in [*turn.history, *turn.synthetic]]
        session.state[history.source_id] = {"messages": held}
        with turn_outcome(report, "agent-framework"):
            await agent.run(turn.user, session=session)
        report.observed = memory.observed
    if model.requests:
        report.model_messages = [_wire(m) for m in model.requests[0]]
    return report


if __name__ == "__main__":
    main(run_turn)
