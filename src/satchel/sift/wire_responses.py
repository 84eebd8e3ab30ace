"""OpenAI Responses request fields from sifted messages: one or more input items per message, in
message order, each with a fixed key order, so equal requests give equal bodies.

System and developer messages stay input items in their places (not `instructions`), so the system
prompt is part of the cached prefix and nothing moves. Assistant text is an `EasyInputMessageParam`
with string content: the only assistant shape the SDK types (and the API) take as input without an
item id (`ResponseOutputMessageParam`, with `output_text` parts, requires `id` and `status`). Each
tool call follows as a `function_call` item with canonical arguments; a tool result is a
`function_call_output` item whose `output` is the text, or a list of `input_text` / `input_image`
parts when the result has images.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from satchel.sift.canonical import canonical_arguments
from satchel.sift.messages import (
    ChatMessage,
    call_arguments,
    call_name,
    content_text,
    convert_tools,
    function_head,
    image_parts,
    image_url,
    map_content,
    tool_calls,
)
from satchel.sift.result import SiftResult

Item = dict[str, Any]


def responses_input(messages: Sequence[ChatMessage]) -> list[Item]:
    """The messages as the Responses API's `input` items.

    Messages with nothing to send (empty text, no images, no calls) give no item. Tool-call
    arguments that are not JSON are sent as written.
    """
    items: list[Item] = []
    for message in messages:
        items.extend(_items(message))
    return items


def responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Function tools in the Responses shape and name order; Chat Completions function tools are
    converted (`strict` kept, false when unset: the Chat Completions default), others kept."""
    return convert_tools(
        tools,
        lambda function: (
            {"type": "function"}
            | function_head(function)
            | {
                "parameters": function.get("parameters") or {"type": "object"},
                "strict": bool(function.get("strict", False)),
            }
        ),
    )


def responses_request(
    request: SiftResult | Sequence[ChatMessage],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.responses.create(model=..., **request)`."""
    messages = request.messages if isinstance(request, SiftResult) else request
    fields: dict[str, Any] = {"input": responses_input(messages)}
    if tools:
        fields["tools"] = responses_tools(tools)
    return fields


def _items(message: ChatMessage) -> list[Item]:
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.get("tool_call_id"),
                "output": _output(content),
            }
        ]
    if role == "assistant":
        items: list[Item] = []
        text = content_text(content)
        if text:
            items.append({"type": "message", "role": "assistant", "content": text})
        for call in tool_calls(message):
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": call_name(call),
                    "arguments": canonical_arguments(call_arguments(call)),
                }
            )
        return items
    parts = _input_parts(content)
    if not parts:
        return []
    return [{"type": "message", "role": role, "content": parts}]


def _output(content: object) -> str | list[Item]:
    if not image_parts(content):
        return content_text(content)
    return _input_parts(content)


def _input_parts(content: object) -> list[Item]:
    return map_content(content, lambda text: {"type": "input_text", "text": text}, _image)


def _image(part: Mapping[str, Any]) -> Item:
    nested = part.get("image_url")
    detail = nested.get("detail") if isinstance(nested, Mapping) else part.get("detail")
    return {"type": "input_image", "image_url": image_url(part), "detail": detail or "auto"}
