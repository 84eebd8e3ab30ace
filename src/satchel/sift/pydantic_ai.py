"""PydanticAI: a history processor that applies the sift, and a capability that applies it to each
model request while the run's own history stays whole.

Unchanged messages are passed on as the very objects of the history; receipts become
`ModelResponse`s with one `TextPart`, bounded results become copies of their `ToolReturnPart`.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from satchel.sift.manager import ContextSift
from satchel.sift.messages import ChatMessage
from satchel.sift.result import SiftResult

Place = tuple[int, int | None]
"""Where a flattened message came from: the message index and, for a request, the part index."""

FAILED_OUTCOMES = frozenset({"failed", "denied", "retried"})


class PydanticAISift:
    """Applies one `ContextSift` to PydanticAI message lists; usable as a history processor."""

    def __init__(
        self, sift: ContextSift, *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        self.sift = sift
        self.tools = tools

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The messages to send for this call."""
        return self.apply(messages, tools=self.tools)

    def begin_run(self, messages: Sequence[ModelMessage]) -> str:
        """Record the run's task: the newest user prompt."""
        history, _ = flatten(messages)
        return self.sift.begin_run(history)

    def apply(
        self,
        messages: Sequence[ModelMessage],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        note: str | None = None,
    ) -> list[ModelMessage]:
        """Sift `messages` with these tool definitions and per-call note."""
        history, places = flatten(messages)
        result = self.sift.sift(history, tools=tools, note=note)
        return rebuild(messages, history, places, result)

    def capability(self) -> "SiftCapability":
        """A capability that sifts each model request and leaves the run's history whole."""
        return SiftCapability(self)


@dataclass
class SiftCapability(AbstractCapability[Any]):
    """Sifts what each model request sends; the task is recorded when a new run starts.

    PydanticAI writes what a history processor returns back into the run's history; this
    capability changes only the request, so the stored history keeps every full result.
    """

    processor: PydanticAISift
    _run_id: str | None = field(default=None, init=False, repr=False)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = list(request_context.messages)
        if ctx.run_id != self._run_id or self.processor.sift.task_id is None:
            self._run_id = ctx.run_id
            self.processor.begin_run(messages)
        tools = self.processor.tools
        if tools is None:
            tools = tool_definitions(request_context.model_request_parameters.function_tools)
        request_context.messages = self.processor.apply(messages, tools=tools)
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None


def tool_definitions(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """PydanticAI tool definitions as OpenAI function tools, for measuring the request."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters_json_schema,
            },
        }
        for tool in tools
    ]


def flatten(messages: Sequence[ModelMessage]) -> tuple[list[ChatMessage], list[Place]]:
    """OpenAI-style dicts for PydanticAI messages: one per response, one per request part (tool
    returns first, so results follow their calls), with where each came from."""
    history: list[ChatMessage] = []
    places: list[Place] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            history.append(_response(message))
            places.append((index, None))
            continue
        order = sorted(range(len(message.parts)), key=lambda j: not _is_result(message.parts[j]))
        for part_index in order:
            history.append(_request_part(message.parts[part_index]))
            places.append((index, part_index))
    return history, places


def rebuild(
    messages: Sequence[ModelMessage],
    history: Sequence[ChatMessage],
    places: Sequence[Place],
    result: SiftResult,
) -> list[ModelMessage]:
    """PydanticAI messages for a sift result over the flattened `history`."""
    out: list[ModelMessage] = []
    group: dict[int, ModelRequestPart] = {}
    group_of: int | None = None

    def flush() -> None:
        nonlocal group_of
        if group_of is None:
            return
        original = messages[group_of]
        assert isinstance(original, ModelRequest)
        parts = [group[j] for j in sorted(group)]
        whole = len(parts) == len(original.parts) and all(
            a is b for a, b in zip(parts, original.parts, strict=True)
        )
        out.append(original if whole else replace(original, parts=parts))
        group.clear()
        group_of = None

    note: str | None = None
    for sifted, source in zip(result.messages, result.sources, strict=True):
        if source is None:
            note = str(sifted["content"])
            continue
        index, part_index = places[source]
        original = messages[index]
        if part_index is None:
            flush()
            if sifted is history[source]:
                out.append(original)
            else:
                out.append(ModelResponse(parts=[TextPart(content=str(sifted["content"]))]))
            continue
        if group_of != index:
            flush()
            group_of = index
        assert isinstance(original, ModelRequest)
        part: ModelRequestPart = original.parts[part_index]
        if sifted is not history[source] and isinstance(part, ToolReturnPart):
            part = replace(part, content=sifted["content"])
        group[part_index] = part
    flush()
    if note is not None:
        last = out[-1] if out else None
        if isinstance(last, ModelRequest):
            out[-1] = replace(last, parts=[*last.parts, UserPromptPart(content=note)])
        else:
            out.append(ModelRequest(parts=[UserPromptPart(content=note)]))
    return out


def _is_result(part: ModelRequestPart) -> bool:
    return isinstance(part, ToolReturnPart) or (
        isinstance(part, RetryPromptPart) and part.tool_name is not None
    )


def _response(message: ModelResponse) -> ChatMessage:
    texts = [part.content for part in message.parts if isinstance(part, TextPart)]
    converted: ChatMessage = {"role": "assistant", "content": "\n".join(texts)}
    calls = [part for part in message.parts if isinstance(part, ToolCallPart)]
    if calls:
        converted["tool_calls"] = [
            {
                "id": part.tool_call_id,
                "type": "function",
                "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
            }
            for part in calls
        ]
    return converted


def _request_part(part: ModelRequestPart) -> ChatMessage:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, ToolReturnPart):
        return {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "content": part.model_response_str(),
            "is_error": part.outcome in FAILED_OUTCOMES,
        }
    if isinstance(part, RetryPromptPart):
        if part.tool_name is not None:
            return {
                "role": "tool",
                "tool_call_id": part.tool_call_id,
                "content": part.model_response(),
                "is_error": True,
            }
        return {"role": "user", "content": part.model_response()}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part)}
    content = getattr(part, "content", "")
    return {
        "role": "user",
        "content": content if isinstance(content, str) else str(content),
    }


def _user_content(part: UserPromptPart) -> str | list[dict[str, Any]]:
    if isinstance(part.content, str):
        return part.content
    parts: list[dict[str, Any]] = []
    for item in part.content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        elif getattr(item, "is_image", False):
            parts.append({"type": "image_url", "image_url": {"url": "binary image"}})
        else:
            parts.append({"type": "text", "text": str(item)})
    return parts
