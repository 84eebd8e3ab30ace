"""OpenAI Chat Completions request fields from sifted messages: only wire fields, in a fixed order,
with canonical tool arguments and tools in name order, so equal requests give equal bodies."""

from collections.abc import Mapping, Sequence
from typing import Any

from satchel.sift.canonical import canonical_arguments
from satchel.sift.messages import ChatMessage, call_arguments, call_name, tool_calls
from satchel.sift.result import SiftResult


def openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The messages as Chat Completions sends them."""
    rendered: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        out: dict[str, Any] = {"role": role}
        if "name" in message:
            out["name"] = message["name"]
        if role == "tool":
            out["tool_call_id"] = message.get("tool_call_id")
        out["content"] = message.get("content")
        calls = tool_calls(message)
        if calls:
            out["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {
                        "name": call_name(call),
                        "arguments": canonical_arguments(call_arguments(call)),
                    },
                }
                for call in calls
            ]
        rendered.append(out)
    return rendered


def openai_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Function-tool definitions in name order."""
    return sorted((dict(tool) for tool in tools), key=_tool_name)


def openai_chat_request(
    request: SiftResult | Sequence[ChatMessage],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create(model=..., **request)`."""
    messages = request.messages if isinstance(request, SiftResult) else request
    fields: dict[str, Any] = {"messages": openai_messages(messages)}
    if tools:
        fields["tools"] = openai_tools(tools)
    return fields


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    if isinstance(function, Mapping):
        return str(function.get("name", ""))
    return str(tool.get("name", ""))
