"""Conformance driver: a real Agent and Runner over the SDK's scripted model and an in-memory
SQLite session; `python -m satchel.integrations.openai_agents.driver` speaks the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    TResponseInputItem,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import SQLiteSession
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

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
from satchel.integrations.openai_agents.compaction import compact_at
from satchel.integrations.openai_agents.items import is_untrusted, item_role, item_text
from satchel.integrations.openai_agents.memory import SessionMemory

TOOL_NAME = "run_call"


def case_tool(calls: Mapping[str, str]) -> FunctionTool:
    """A function tool answering each of the turn's calls with the turn's result for it."""

    @function_tool(name_override=TOOL_NAME)
    def run_call(call: str) -> str:
        """Run one call and return its result.

        Args:
            call: The call to run, as written.
        """
        return calls[call]

    return run_call


def scripted_model(turn: Turn) -> ScriptedModel:
    """Asks for the turn's tool calls, then gives its reply; or fails when the turn says so."""
    if turn.model_failure:
        return ScriptedModel([ModelStep.raise_error(ModelFailure())])
    steps: list[ModelStep] = []
    if turn.tool_calls:
        calls = [
            function_call(TOOL_NAME, {"call": tool_call.call}, call_id=f"call-{index}")
            for index, tool_call in enumerate(turn.tool_calls)
        ]
        steps.append(ModelStep(output=calls))
    steps.append(ModelStep(output=[assistant_message(turn.assistant)]))
    return ScriptedModel(steps)


def session_items(messages: Sequence[DriverMessage]) -> list[TResponseInputItem]:
    """Messages as the session stores them."""
    return [cast(TResponseInputItem, {"role": m.role, "content": m.content}) for m in messages]


def model_messages(items: object) -> list[DriverMessage]:
    """What the model was handed, with `untrusted` read from each item's `provider_data`."""
    if isinstance(items, str):
        return [DriverMessage(role="user", content=items)]
    return [
        DriverMessage(role=item_role(item), content=item_text(item), untrusted=is_untrusted(item))
        for item in cast(list[object], items)
    ]


async def run_turn(instruction: Instruction) -> Report:
    """Run one instruction's turn through SessionMemory and report what happened."""
    turn = instruction.turn
    session = SQLiteSession(instruction.case)
    await session.add_items(session_items([*turn.history, *turn.synthetic]))
    model = scripted_model(turn)
    agent: Agent[Any] = Agent(
        name="assistant",
        instructions="Answer the person.",
        model=model,
        tools=[case_tool({c.call: c.result for c in turn.tool_calls})],
    )
    report = Report()
    client = RecordingClient(instruction.api, instruction.token)
    async with client:
        memory = SessionMemory(
            client,
            session,
            data_subject_id=instruction.data_subject_id,
            should_trigger_compaction=compact_at(1) if turn.compact else None,
        )
        with turn_outcome(report, "openai-agents"):
            await memory.run(agent, turn.user, run_config=RunConfig(tracing_disabled=True))
        report.observed = client.observed
    first = model.first_call
    report.model_messages = model_messages(first.input) if first is not None else []
    session.close()
    return report


if __name__ == "__main__":
    set_tracing_disabled(True)
    main(run_turn)
