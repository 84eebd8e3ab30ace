"""The PydanticAI conformance driver: `python -m satchel.integrations.pydantic_ai.driver`.

Each instruction runs a real `Agent` with `PydanticAIMemory` and a real tool. A `FunctionModel`
stands in for the model: it records what it was handed, asks for the turn's tool calls first,
then gives the turn's reply, or fails when the turn says so. The conversation id is the case.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

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
from satchel.integrations.pydantic_ai.memory import PydanticAIMemory
from satchel.integrations.pydantic_ai.messages import is_untrusted, memory_prompt, prompt_text

COMPACT_AFTER_MESSAGES = 2
"""The compaction trigger a `compact` turn arms: any history of two messages or more trips it."""

TOOL = "run_tool"


@dataclass
class ScriptedModel:
    """The model's side of one turn, keeping every message list it was handed."""

    turn: Turn
    handed: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.handed.append(list(messages))
        if self.turn.model_failure:
            raise ModelFailure()
        if len(self.handed) == 1 and self.turn.tool_calls:
            calls = [
                ToolCallPart(TOOL, {"call": c.call}, tool_call_id=f"call_{i}")
                for i, c in enumerate(self.turn.tool_calls)
            ]
            return ModelResponse(parts=list(calls))
        return ModelResponse(parts=[TextPart(self.turn.assistant)])


def scripted_agent(model: ScriptedModel) -> Agent[None, str]:
    """An agent on the scripted model with one tool answering the turn's calls."""
    results = {c.call: c.result for c in model.turn.tool_calls}

    def run_tool(call: str) -> str:
        """Run one tool call and return its result."""
        return results[call]

    return Agent(FunctionModel(model), tools=[run_tool])


def framework_message(message: DriverMessage) -> ModelMessage:
    """A protocol message as the message PydanticAI keeps in its history."""
    if message.role == "assistant":
        return ModelResponse(parts=[TextPart(message.content)])
    if message.role == "system":
        return ModelRequest(parts=[SystemPromptPart(message.content)])
    if message.untrusted:
        return ModelRequest(parts=[memory_prompt(message.content)])
    return ModelRequest(parts=[UserPromptPart(message.content)])


def framework_history(turn: Turn) -> list[ModelMessage]:
    """The history the application hands the run: what the framework wrote, then earlier turns."""
    return [framework_message(m) for m in [*turn.synthetic, *turn.history]]


def reported(messages: Sequence[ModelMessage]) -> list[DriverMessage]:
    """The messages a model was handed, one per request part and one per response."""
    out: list[DriverMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            out.append(DriverMessage(role="assistant", content=_response_text(message)))
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                out.append(DriverMessage(role="system", content=part.content))
            elif isinstance(part, UserPromptPart):
                text = prompt_text(part.content)
                out.append(DriverMessage(role="user", content=text, untrusted=is_untrusted(part)))
            elif isinstance(part, ToolReturnPart):
                out.append(DriverMessage(role="tool", content=part.model_response_str()))
            elif isinstance(part, RetryPromptPart):
                out.append(DriverMessage(role="user", content=part.model_response()))
    return out


def _response_text(response: ModelResponse) -> str:
    texts = []
    for part in response.parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ToolCallPart):
            texts.append(f"{part.tool_name}({part.args_as_json_str()})")
    return "\n".join(texts)


def _log(operation: str, error: Exception) -> None:
    print(f"memory {operation} failed: {error}", file=sys.stderr)


async def run_turn(instruction: Instruction) -> Report:
    """Run one instruction's turn and report what the model was handed and what was stored."""
    turn = instruction.turn
    model = ScriptedModel(turn)
    report = Report()
    client = RecordingClient(instruction.api, instruction.token)
    memory = PydanticAIMemory(
        client,
        instruction.data_subject_id,
        on_error=_log,
        compact_after_messages=COMPACT_AFTER_MESSAGES if turn.compact else None,
    )
    async with client:
        with turn_outcome(report, "pydantic-ai"):
            await scripted_agent(model).run(
                turn.user,
                message_history=framework_history(turn),
                conversation_id=instruction.case,
                capabilities=[memory],
            )
    report.observed = client.observed
    report.model_messages = reported(model.handed[0]) if model.handed else []
    return report


if __name__ == "__main__":
    main(run_turn)
