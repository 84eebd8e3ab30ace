"""Reading plain OpenAI-style messages (text, images, tool calls, size) without changing them.

A message is a dict with a `role` (system, developer, user, assistant or tool) and a `content` that
is a string or a list of parts (`{"type": "text", ...}`, `{"type": "image_url", ...}`).
"""

from collections.abc import Callable, Mapping, Sequence
from math import ceil
from typing import Any

ChatMessage = dict[str, Any]
"""One chat message in OpenAI Chat Completions form, as a plain dict."""

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text; plugged into a sift in place of the estimate."""

ROLES = ("system", "developer", "user", "assistant", "tool")
IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image"})
IMAGE_CHARS = 3500
"""An image part counts as this many characters (1,000 tokens by the estimate)."""
IMAGE_TOKENS = 1000
MESSAGE_OVERHEAD_TOKENS = 4
CHARS_PER_TOKEN = 3.5


def content_text(content: object) -> str:
    """The text of a message content: the string itself, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        ]
        return "\n".join(texts)
    return ""


def image_parts(content: object) -> list[Mapping[str, Any]]:
    """The image parts of a message content, in order."""
    if isinstance(content, str) or not isinstance(content, Sequence):
        return []
    return [
        part
        for part in content
        if isinstance(part, Mapping) and part.get("type") in IMAGE_PART_TYPES
    ]


def image_url(part: Mapping[str, Any]) -> str:
    """The URL of an image part (`image_url`, `input_image`, or an Anthropic `image` block): a web
    URL, or a data URL for an inline image."""
    if part.get("type") == "image":
        source = part.get("source")
        source = source if isinstance(source, Mapping) else {}
        if source.get("type") == "base64":
            return f"data:{source.get('media_type')};base64,{source.get('data')}"
        return str(source.get("url"))
    url = part.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    return str(url)


def split_data_url(url: str) -> tuple[str, str] | None:
    """The media type and base64 data of a `data:<type>;base64,<data>` URL; None for any other
    URL."""
    if url.startswith("data:") and ";base64," in url:
        media_type, _, data = url[len("data:") :].partition(";base64,")
        return media_type, data
    return None


def tool_calls(message: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The tool calls of an assistant message (empty when it has none)."""
    calls = message.get("tool_calls")
    return calls if isinstance(calls, Sequence) and not isinstance(calls, str) else ()


def call_name(call: Mapping[str, Any]) -> str:
    """The tool name of one tool call."""
    function = call.get("function")
    return str(function.get("name", "")) if isinstance(function, Mapping) else ""


def call_arguments(call: Mapping[str, Any]) -> str:
    """The arguments of one tool call, as the JSON text the model wrote."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        return ""
    arguments = function.get("arguments", "")
    return arguments if isinstance(arguments, str) else str(arguments)


def message_chars(message: Mapping[str, Any]) -> int:
    """The size of a message in characters: text, tool calls, and a fixed size per image."""
    content = message.get("content")
    if isinstance(content, str):
        chars = len(content)
    else:
        chars = len(content_text(content)) + IMAGE_CHARS * len(image_parts(content))
    for call in tool_calls(message):
        chars += len(call_name(call)) + len(call_arguments(call))
    return chars


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """The fallback token estimate of a message: `ceil(chars / 3.5) + 4`."""
    return ceil(message_chars(message) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def count_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """The tokens of a message by a plugged-in counter, plus the per-message overhead."""
    content = message.get("content")
    parts = [content_text(content)]
    for call in tool_calls(message):
        parts.append(call_name(call))
        parts.append(call_arguments(call))
    images = len(image_parts(content))
    return counter("\n".join(parts)) + IMAGE_TOKENS * images + MESSAGE_OVERHEAD_TOKENS


def text_tokens(text: str, counter: TokenCounter | None) -> int:
    """The tokens of a bare text (such as tool definitions) by the counter or the estimate."""
    return counter(text) if counter is not None else ceil(len(text) / CHARS_PER_TOKEN)


def map_content[T](
    content: object, text: Callable[[str], T], image: Callable[[Mapping[str, Any]], T]
) -> list[T]:
    """A message content's non-empty text parts and image parts, in order, each rendered by
    `text` or `image`; a string content is one text part."""
    if isinstance(content, str):
        return [text(content)] if content else []
    if not isinstance(content, Sequence):
        return []
    images = {id(part) for part in image_parts(content)}
    rendered: list[T] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text" and part.get("text"):
            rendered.append(text(part["text"]))
        elif id(part) in images:
            rendered.append(image(part))
    return rendered


def convert_tools(
    tools: Sequence[Mapping[str, Any]], shape: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Tool definitions in name order: each Chat Completions function tool shaped by `shape`
    (given its `function`), any other entry copied as it is."""
    converted: list[dict[str, Any]] = []
    for tool in tools:
        definition = tool.get("function")
        converted.append(shape(definition) if isinstance(definition, Mapping) else dict(tool))
    return sorted(converted, key=lambda entry: str(entry.get("name", "")))


def function_head(function: Mapping[str, Any]) -> dict[str, Any]:
    """A function tool's name, and its description when it has one."""
    head: dict[str, Any] = {"name": function["name"]}
    if function.get("description"):
        head["description"] = function["description"]
    return head
