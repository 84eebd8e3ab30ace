"""The reference agent loop: no framework, over the shared turn policy, with a stubbed model."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from satchel.integrations.core import AgentMemory
from satchel.integrations.driver import (
    DriverMessage,
    Instruction,
    ModelFailure,
    RecordingClient,
    Report,
    Turn,
    turn_outcome,
)


@dataclass(frozen=True)
class Reply:
    """What the model answers: a tool call to run (`call`), or the final `text`."""

    text: str = ""
    call: str | None = None


Model = Callable[[Sequence[DriverMessage]], Awaitable[Reply]]


class StubModel:
    """A model that answers from the turn and records every message list it was handed."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.handed: list[list[DriverMessage]] = []

    @property
    def first(self) -> list[DriverMessage]:
        return self.handed[0] if self.handed else []

    async def __call__(self, messages: Sequence[DriverMessage]) -> Reply:
        self.handed.append([message.model_copy() for message in messages])
        if self.turn.model_failure:
            raise ModelFailure()
        step = len(self.handed) - 1
        if step < len(self.turn.tool_calls):
            return Reply(call=self.turn.tool_calls[step].call)
        return Reply(text=self.turn.assistant)


class ReferenceAgent:
    """One conversation: the history it holds, its model and tools, and the subject's memory.

    Compaction is due once the history holds `compact_at` messages (never when None).
    """

    memory_role = "user"
    memory_untrusted = True
    store_failed_turns = False

    def __init__(
        self,
        memory: AgentMemory,
        model: Model,
        *,
        history: Sequence[DriverMessage] = (),
        synthetic: Sequence[DriverMessage] = (),
        tools: Mapping[str, str] | None = None,
        compact_at: int | None = None,
    ) -> None:
        self.memory = memory
        self.model = model
        self.synthetic = list(synthetic)
        self.history = [*history, *self.synthetic]
        self.tools = dict(tools or {})
        self.compact_at = compact_at
        self.traffic: list[DriverMessage] = []

    def memory_message(self, text: str) -> DriverMessage:
        """A memory or context message as the model is handed it."""
        return DriverMessage(role=self.memory_role, content=text, untrusted=self.memory_untrusted)

    def compaction_due(self) -> bool:
        return self.compact_at is not None and len(self.history) >= self.compact_at

    async def compacted(self, history: list[DriverMessage]) -> list[DriverMessage]:
        """The deployment's context in place of the earlier history; the person's message stays."""
        context = await self.memory.context_message()
        if context is None:
            return history
        return [self.memory_message(context), history[-1]]

    async def run(self, user: str) -> str:
        """One turn: memory in before the person's message, the model, then the turn stored."""
        self.history.append(DriverMessage(role="user", content=user))
        if self.compaction_due():
            self.history = await self.compacted(self.history)
        request = list(self.history)
        recalled = await self.memory.recall_message(user)
        if recalled is not None:
            request.insert(len(request) - 1, self.memory_message(recalled))
        try:
            reply = await self.answer(request)
        except ModelFailure:
            if self.store_failed_turns:
                await self.store(user, "")
            raise
        self.history.append(DriverMessage(role="assistant", content=reply))
        await self.store(user, reply)
        return reply

    async def answer(self, request: list[DriverMessage]) -> str:
        """Call the model, running each tool call it asks for, until it gives its final reply."""
        while True:
            reply = await self.model(request)
            if reply.call is None:
                return reply.text
            traffic = [
                DriverMessage(role="assistant", content=reply.call),
                DriverMessage(role="tool", content=self.tools[reply.call]),
            ]
            self.traffic.extend(traffic)
            self.history.extend(traffic)
            request = [*request, *traffic]

    async def store(self, user: str, reply: str) -> None:
        """Observe the person's message and the final reply; a failure is raised to the caller."""
        await self.memory.observe(user, reply)


def _report_error(operation: str, error: Exception) -> None:
    print(f"reference: {operation} failed: {error}", file=sys.stderr, flush=True)


async def run_turn(
    instruction: Instruction,
    agent_type: type[ReferenceAgent] = ReferenceAgent,
    memory_type: type[AgentMemory] = AgentMemory,
) -> Report:
    """Run one instruction's turn through a fresh conversation and report what happened."""
    turn = instruction.turn
    model = StubModel(turn)
    report = Report()
    client = RecordingClient(instruction.api, instruction.token)
    async with client:
        memory = memory_type(
            client,
            data_subject_id=instruction.data_subject_id,
            run_id=instruction.case,
            on_error=_report_error,
        )
        agent = agent_type(
            memory,
            model,
            history=turn.history,
            synthetic=turn.synthetic,
            tools={tool.call: tool.result for tool in turn.tool_calls},
            compact_at=1 if turn.compact else None,
        )
        with turn_outcome(report, "reference"):
            await agent.run(turn.user)
    report.model_messages = model.first
    report.observed = client.observed
    return report
