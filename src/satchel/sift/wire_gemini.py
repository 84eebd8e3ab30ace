"""Gemini (google-genai) request fields from sifted messages, as plain dicts in a fixed key order.

The leading system and developer messages become the system instruction; the rest become
`contents` with consecutive same-role entries merged so roles alternate (a note after tool results
joins their user entry, last). Assistant messages are `model` entries: their text, then one
`function_call` part per call with the arguments as an object with sorted keys. A tool result is a
`function_response` part in a `user` entry, named after the call it answers; its images go in the
response's own `parts`.
"""

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
    image_parts,
    image_url,
    map_content,
    split_data_url,
    tool_calls,
)
from satchel.sift.result import SiftResult
from satchel.sift.transcript import SYSTEM_ROLES

Part = dict[str, Any]
Content = dict[str, Any]

IMAGE_MIME_TYPES = {
    "gif": "image/gif",
    "heic": "image/heic",
    "heif": "image/heif",
    "jpeg": "image/jpeg",
    "jpg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
}
"""MIME types of web-URL images by file extension (a fixed table, the same on every machine)."""


def gemini_contents(messages: Sequence[ChatMessage]) -> tuple[Content | None, list[Content]]:
    """The system instruction (None without one) and the contents.

    Leading system and developer messages are joined by blank lines into one text part; a later
    one is sent as user text in its place, so nothing before it moves. Messages with nothing to
    send give no part. Raises ValueError for tool-call arguments that are not a JSON object and
    for a tool result that follows no call with its id (Gemini needs the tool's name).
    """
    start = 0
    texts: list[str] = []
    while start < len(messages) and messages[start].get("role") in SYSTEM_ROLES:
        text = content_text(messages[start].get("content"))
        if text:
            texts.append(text)
        start += 1
    system = {"parts": [{"text": "\n\n".join(texts)}]} if texts else None
    names: dict[str, str] = {}
    contents: list[Content] = []
    for message in messages[start:]:
        role, parts = _parts(message, names)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return system, contents


def gemini_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One Gemini tool holding the function declarations in name order. Chat Completions function
    tools are converted (their JSON schema kept as `parameters_json_schema`); other entries are
    taken as declarations already."""
    return [{"function_declarations": convert_tools(tools, _declaration)}]


def _declaration(function: Mapping[str, Any]) -> dict[str, Any]:
    declaration = function_head(function)
    if function.get("parameters"):
        declaration["parameters_json_schema"] = function["parameters"]
    return declaration


def gemini_request(
    request: SiftResult | Sequence[ChatMessage],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.models.generate_content(model=..., **request)`: `contents`
    and a `config` with the system instruction and tools (each left out when there is none)."""
    messages = request.messages if isinstance(request, SiftResult) else request
    system, contents = gemini_contents(messages)
    config: dict[str, Any] = {}
    if system is not None:
        config["system_instruction"] = system
    if tools:
        config["tools"] = gemini_tools(tools)
    return {"contents": contents, "config": config}


def _parts(message: ChatMessage, names: dict[str, str]) -> tuple[str, list[Part]]:
    role = message.get("role")
    content = message.get("content")
    if role == "assistant":
        parts = _content_parts(content)
        for call in tool_calls(message):
            call_id = call.get("id")
            name = call_name(call)
            function_call: dict[str, Any] = {}
            if call_id is not None:
                function_call["id"] = str(call_id)
                names[str(call_id)] = name
            function_call["name"] = name
            function_call["args"] = tool_input(call_arguments(call), str(call_id))
            parts.append({"function_call": function_call})
        return "model", parts
    if role == "tool":
        call_id = str(message.get("tool_call_id"))
        if call_id not in names:
            raise ValueError(f"tool result {call_id!r} follows no call with that id")
        key = "error" if message.get("is_error") is True else "output"
        response: dict[str, Any] = {
            "id": call_id,
            "name": names[call_id],
            "response": {key: content_text(content)},
        }
        images = [_image(part) for part in image_parts(content)]
        if images:
            response["parts"] = images
        return "user", [{"function_response": response}]
    return "user", _content_parts(content)


def _content_parts(content: object) -> list[Part]:
    return map_content(content, lambda text: {"text": text}, _image)


def _image(part: Mapping[str, Any]) -> Part:
    url = image_url(part)
    inline = split_data_url(url)
    if inline is not None:
        media_type, data = inline
        return {"inline_data": {"mime_type": media_type, "data": data}}
    file_data = {"file_uri": url}
    name = url.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1]
    mime_type = IMAGE_MIME_TYPES.get(name.rpartition(".")[2].lower()) if "." in name else None
    if mime_type is not None:
        file_data["mime_type"] = mime_type
    return {"file_data": file_data}
