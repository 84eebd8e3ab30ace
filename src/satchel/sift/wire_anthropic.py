"""Anthropic Messages request fields from sifted messages: consecutive same-role entries merged so
roles alternate (a note after tool results joins their user entry, last), and at most four cache
breakpoints: the system prompt (or the tools without one), where the previous request ended or
where a trim's change began, the end of the prefix the next batch keeps, and the last stored
message."""

from collections.abc import Mapping, Sequence
from typing import Any

from satchel.sift.canonical import tool_input
from satchel.sift.messages import (
    ChatMessage,
    call_arguments,
    call_name,
    content_text,
    convert_tools,
    function_head,
    image_url,
    map_content,
    split_data_url,
    tool_calls,
)
from satchel.sift.result import SiftResult
from satchel.sift.transcript import SYSTEM_ROLES

Block = dict[str, Any]
MAX_BREAKPOINTS = 4
"""Anthropic accepts at most four `cache_control` breakpoints in one request."""


def cache_breakpoint() -> dict[str, str]:
    """The `cache_control` value of a breakpoint."""
    return {"type": "ephemeral"}


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions in Anthropic's shape and name order; OpenAI function tools are converted."""
    return convert_tools(
        tools,
        lambda function: (
            function_head(function)
            | {"input_schema": function.get("parameters") or {"type": "object"}}
        ),
    )


def anthropic_request(
    request: SiftResult | Sequence[ChatMessage],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    previous_end: int | None = None,
    note: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for `client.messages.create(model=..., max_tokens=..., **request)`.

    Given a `SiftResult`, its `previous_end`, `note`, `reused_end` (or `changed_from`) and
    `stable_end` are used: after a trim the prefix the requests before it wrote is still read
    from the cache, and between batches every request writes the prefix the next batch keeps.
    """
    stable_end: int | None = None
    reused_end: int | None = None
    changed_end: int | None = None
    if isinstance(request, SiftResult):
        messages: Sequence[ChatMessage] = request.messages
        previous_end, note = request.previous_end, request.note
        stable_end, reused_end = request.stable_end, request.reused_end
        if request.changed_from is not None:
            changed_end = request.changed_from - 1
    else:
        messages = request
    ends = (len(messages) - 1 - int(note), previous_end, reused_end, changed_end, stable_end)
    start = 0
    system: list[Block] = []
    while start < len(messages) and messages[start].get("role") in SYSTEM_ROLES:
        text = content_text(messages[start].get("content"))
        if text:
            system.append({"type": "text", "text": text})
        start += 1
    entries: list[dict[str, Any]] = []
    last_block: dict[int, Block] = {}
    latest: Block | None = None
    for index in range(start, len(messages)):
        message = messages[index]
        role, blocks = _blocks(message)
        if blocks:
            if entries and entries[-1]["role"] == role:
                entries[-1]["content"].extend(blocks)
            else:
                entries.append({"role": role, "content": blocks})
            latest = blocks[-1]
        if latest is not None:
            last_block[index] = latest

    fields: dict[str, Any] = {}
    marked = 0
    for end in ends:
        block = last_block.get(end) if end is not None else None
        if block is not None and "cache_control" not in block and marked < MAX_BREAKPOINTS:
            block["cache_control"] = cache_breakpoint()
            marked += 1
    if system:
        if marked < MAX_BREAKPOINTS:
            system[-1]["cache_control"] = cache_breakpoint()
            marked += 1
        fields["system"] = system
    fields["messages"] = entries
    if tools:
        converted = anthropic_tools(tools)
        if not system or marked < MAX_BREAKPOINTS:
            converted[-1]["cache_control"] = cache_breakpoint()
        fields["tools"] = converted
    return fields


def _blocks(message: ChatMessage) -> tuple[str, list[Block]]:
    role = message.get("role")
    if role == "assistant":
        blocks = _content_blocks(message.get("content"))
        for call in tool_calls(message):
            call_id = str(call.get("id"))
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": call_name(call),
                    "input": tool_input(call_arguments(call), call_id),
                }
            )
        return "assistant", blocks
    if role == "tool":
        block: Block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id")}
        content = _content_blocks(message.get("content"))
        if content:
            block["content"] = content
        if message.get("is_error") is True:
            block["is_error"] = True
        return "user", [block]
    return "user", _content_blocks(message.get("content"))


def _content_blocks(content: object) -> list[Block]:
    return map_content(content, lambda text: {"type": "text", "text": text}, _image_block)


def _image_block(part: Mapping[str, Any]) -> Block:
    if part.get("type") == "image":
        return dict(part)
    url = image_url(part)
    inline = split_data_url(url)
    if inline is not None:
        media_type, data = inline
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}
